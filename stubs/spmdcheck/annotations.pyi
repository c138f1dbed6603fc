"""spmdcheck rules for its own helpers (`spmdcheck.annotations`) used in @model stubs."""

from typing import Any

from spmdcheck.annotations import constant_test

@constant_test
def is_known(value: Any) -> bool: ...
