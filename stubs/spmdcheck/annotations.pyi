"""spmdcheck rules for its own helpers (`spmdcheck.annotations`): `is_known` in @model stubs, and
`reveal_spmd_type` in user code."""

from typing import Any

from spmdcheck.annotations import constant_test, spmd_api

@constant_test
def is_known(value: Any) -> bool: ...

# Reports the inferred forward and gradient types of its argument (SPMD901, a note); returns it unchanged.
@spmd_api("reveal")
def reveal_spmd_type(value: Any) -> Any: ...
