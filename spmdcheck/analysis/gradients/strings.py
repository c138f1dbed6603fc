"""Strings the gradient walk builds from constants: f-strings (`f"w{i}"`, as `setattr(self, f"w{i}", ...)`
names an attribute) and implicitly concatenated literals. Anything else in them makes the string unknown."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import libcst as cst

from spmdcheck.analysis.gradients.state import OPAQUE

_FORMATTABLE = (str, int, bool)  # formatted alike by `format()` and `str()`, whatever the platform


def formatted(expr: cst.FormattedString | cst.ConcatenatedString, evaluate: Callable[[Any], Any]) -> Any:
    """The string's value when every part is a constant the walk knows (OPAQUE otherwise)."""
    if isinstance(expr, cst.ConcatenatedString):
        left, right = evaluate(expr.left), evaluate(expr.right)
        both = isinstance(left, str) and isinstance(right, str) and type(left) is type(right)
        return left + right if both else OPAQUE
    if "b" in expr.prefix.lower():
        return OPAQUE
    out: list[str] = []
    for part in expr.parts:
        if isinstance(part, cst.FormattedStringText):
            out.append(part.value)
            continue
        if part.conversion is not None or part.format_spec is not None or part.equal is not None:
            return OPAQUE
        value = evaluate(part.expression)
        if not isinstance(value, _FORMATTABLE):
            return OPAQUE
        out.append(str(value))
    return "".join(out)
