"""spmdcheck rules for `spmd_types.checker` (read with libcst, never imported)."""

from typing import Any

from spmdcheck.annotations import context

from . import is_type_checking as is_type_checking
from . import local_map as local_map
from . import no_typecheck as no_typecheck

@context("typecheck")
def typecheck(strict_mode: str | None = None, local: bool | None = None) -> Any: ...

# Legacy class wrapper around typecheck().
@context("typecheck")
def SpmdTypeMode(strict_mode: str | None = None, local: bool | None = None) -> Any: ...
