"""What the checker inferred for a value, in words: for reveal_spmd_type, --show-types and editor hovers.

A view has the forward type on every mesh axis (the axes in scope and the
ones the value is typed on; `?` where it is unknown) and the gradient type
derived by the lattice's duality (R <-> P, I and V fixed), or "none" for a
value that can never receive a gradient.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from spmdcheck.analysis.dtensor import DTensorValue, to_local
from spmdcheck.analysis.findings import Finding
from spmdcheck.analysis.values import Alternatives, ScalarValue, TensorValue, Unknown, Value
from spmdcheck.diagnostics.violations.notes import RevealType
from spmdcheck.lattice import AxisType, GradState, SpmdType, gradient_type

if TYPE_CHECKING:
    from spmdcheck.analysis.binding import Bound
    from spmdcheck.analysis.context import Analysis
    from spmdcheck.rules.model import OpRule

UNKNOWN_AXIS = "?"
NO_GRADIENT = "none (does not require grad)"


@dataclass(frozen=True)
class TypeView:
    """A value's inferred types, printable and as data (None: the checker does not know)."""

    forward: str
    gradient: str
    forward_axes: dict[str, str] | None
    gradient_axes: dict[str, str] | None
    requires_grad: str  # "yes", "no", "unknown"


def _axes_text(axes: dict[str, str]) -> str:
    return "{" + ", ".join(f"{a}: {t}" for a, t in axes.items()) + "}"


def _per_axis(t: SpmdType, mesh: Iterable[str]) -> dict[str, str]:
    names = sorted(set(mesh) | set(t))
    return {a: _axis_text(t[a]) if a in t else UNKNOWN_AXIS for a in names}


def _axis_text(t: AxisType) -> str:
    return f"{t} (unreduced partial sum)" if t.is_pending else str(t)


def _tensor_view(t: TensorValue, mesh: tuple[str, ...]) -> TypeView:
    grad = t.grad.value
    if t.opaque:
        return TypeView("unknown tensor", "unknown", None, None, grad)
    if not t.typed:
        # spmd_types never stamped a type on it (randn without assert_type, no_typecheck results)
        forward = "untyped tensor" if not mesh else _axes_text(_per_axis(t.type, mesh))
        return TypeView(forward, "unknown" if t.grad is not GradState.NO else NO_GRADIENT, {}, None, grad)
    forward_axes = _per_axis(t.type, mesh)
    if t.grad is GradState.NO:
        return TypeView(_axes_text(forward_axes), NO_GRADIENT, forward_axes, None, grad)
    gradient_axes = _per_axis(gradient_type(t.type), mesh)
    return TypeView(_axes_text(forward_axes), _axes_text(gradient_axes), forward_axes, gradient_axes, grad)


def view_of(value: Value, mesh: Iterable[str] = ()) -> TypeView | None:
    """The view of a tensor-like value; None for values that are not tensors (modules, numbers, groups)."""
    mesh = tuple(mesh)
    if isinstance(value, TensorValue):
        return _tensor_view(value, mesh)
    if isinstance(value, Alternatives):
        views = [_tensor_view(t, mesh) for t, _ in value.options]
        return TypeView(
            " | ".join(dict.fromkeys(v.forward for v in views)),
            " | ".join(dict.fromkeys(v.gradient for v in views)),
            _merge_axes([v.forward_axes for v in views]),
            _merge_axes([v.gradient_axes for v in views]),
            GradState.join(GradState(v.requires_grad) for v in views).value,
        )
    if isinstance(value, ScalarValue):
        axes = _per_axis(value.type, mesh)
        return TypeView("Scalar " + _axes_text(axes), NO_GRADIENT, axes, None, GradState.NO.value)
    if isinstance(value, DTensorValue):
        # its placements, then the view of the local tensor `to_local()` would give
        local = _tensor_view(to_local(value), mesh)
        spelled = ", ".join(str(p) if p is not None else "?" for p in value.placements)
        return TypeView(
            f"DTensor [{spelled}], local {local.forward}",
            local.gradient,
            local.forward_axes,
            local.gradient_axes,
            local.requires_grad,
        )
    if isinstance(value, Unknown):
        return TypeView("unknown", "unknown", None, None, GradState.UNKNOWN.value)
    return None


def merge_views(views: list[TypeView]) -> TypeView:
    """One binding seen in several analyses (the function alone, inlined at a call, loop iterations)."""
    distinct: list[TypeView] = []
    for view in views:
        if view not in distinct:
            distinct.append(view)
    if len(distinct) == 1:
        return distinct[0]
    return TypeView(
        " | ".join(dict.fromkeys(v.forward for v in distinct)),
        " | ".join(dict.fromkeys(v.gradient for v in distinct)),
        _merge_axes([v.forward_axes for v in distinct]),
        _merge_axes([v.gradient_axes for v in distinct]),
        GradState.join(GradState(v.requires_grad) for v in distinct).value,
    )


def _merge_axes(options: list[dict[str, str] | None]) -> dict[str, str] | None:
    """Per axis, the alternatives the value may have there (`V | P`)."""
    if any(o is None for o in options):
        return None
    names = sorted({a for o in options for a in o})  # type: ignore[union-attr]
    return {a: " | ".join(dict.fromkeys(o.get(a, UNKNOWN_AXIS) for o in options)) for a in names}  # type: ignore[union-attr]


def reveal(interp: Analysis, rule: OpRule, bound: Bound, node: cst.Call, args: list) -> Value:
    """`reveal_spmd_type(x)`: a note with x's forward and gradient types; returns x unchanged."""
    if not args:
        return Unknown()
    _, value, value_node = args[0]
    view = view_of(value, interp.mesh)
    shown = interp.ctx.code_of(value_node)
    revealed = RevealType(shown) if view is None else RevealType(shown, view.forward, view.gradient)
    interp.report(Finding.of(revealed, node))
    return value
