"""Every violation class, by code: to check that each code has exactly one, and to find a code's class."""

from __future__ import annotations

from spmdcheck.diagnostics.violation import Violation
from spmdcheck.diagnostics.violations import (
    accumulation,
    collectives,
    contracts,
    control_flow,
    gradient_norms,
    gradients,
    inference,
    inputs,
    notes,
    pending,
)

FAMILIES = (
    inputs,
    inference,
    pending,
    collectives,
    contracts,
    control_flow,
    gradients,
    accumulation,
    gradient_norms,
    notes,
)


def _concrete(module: object) -> list[type[Violation]]:
    return [
        v
        for v in vars(module).values()
        if isinstance(v, type) and issubclass(v, Violation) and v.code and v.__module__ == module.__name__  # type: ignore[attr-defined]
    ]


ALL: tuple[type[Violation], ...] = tuple(v for family in FAMILIES for v in _concrete(family))
BY_CODE: dict[str, type[Violation]] = {v.code: v for v in ALL}


def violation_class(code: str) -> type[Violation]:
    """The violation of `code` (KeyError for a code no violation defines)."""
    return BY_CODE[code]
