"""Parse the textual spellings of types: ``R``, ``S(1)``, ``Shard(-1)``, ``"tp: V, dp: S(0)"``."""

from __future__ import annotations

import re

from spmdcheck.lattice import MAX_TENSOR_RANK, AxisType, Kind, S, shard_dim_in_range

_NAMES = {
    "R": Kind.R,
    "Replicate": Kind.R,
    "I": Kind.I,
    "Invariant": Kind.I,
    "V": Kind.V,
    "Varying": Kind.V,
    "P": Kind.P,
    "Partial": Kind.P,
}
_SHARD = re.compile(r"^(?:S|Shard)\(\s*(-?\d+)\s*\)$")


class TypeSpecError(ValueError):
    pass


def parse_axis_type(text: str) -> AxisType:
    text = text.strip()
    if text in _NAMES:
        return AxisType(_NAMES[text])
    m = _SHARD.match(text)
    if m:
        digits = m.group(1)
        dim = int(digits) if len(digits) < 6 else MAX_TENSOR_RANK  # no int() of a 10,000-digit literal
        if not shard_dim_in_range(dim):
            raise TypeSpecError(f"S({digits[:20]}): a tensor has at most {MAX_TENSOR_RANK} dims")
        return S(dim)
    raise TypeSpecError(f"{text!r} is not an SPMD type (R, I, V, P or S(d))")


def parse_type_spec(text: str) -> dict[str, AxisType]:
    """``"tp: V, dp: S(0)"`` -> {"tp": V, "dp": S(0)}. Raises TypeSpecError."""
    out: dict[str, AxisType] = {}
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    if not body.strip():
        raise TypeSpecError('empty type spec: name at least one axis, like "tp: V"')
    # split on commas that are not inside parentheses
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    for part in parts:
        if not part.strip():
            continue
        axis, sep, ty = part.partition(":")
        axis = axis.strip().strip("'\"")
        if not sep or not axis:
            raise TypeSpecError(f"{part.strip()!r}: want AXIS: TYPE")
        if axis in out:
            raise TypeSpecError(f"axis {axis!r} given twice")
        out[axis] = parse_axis_type(ty)
    return out
