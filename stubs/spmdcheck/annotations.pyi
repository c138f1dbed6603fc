"""spmdcheck's own annotation helpers (spmdcheck/annotations.py), as rules."""

from typing import Any

from spmdcheck.annotations import spmd_api

# Reports the inferred forward and gradient types of its argument (SPMD901, a note); returns it unchanged.
@spmd_api("reveal")
def reveal_spmd_type(value: Any) -> Any: ...
