"""Handlers of the spmd_types annotation API: assert_type and friends, Scalar, S(d), backward()."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import libcst as cst

from spmdcheck.analysis.binding import Bound
from spmdcheck.analysis.findings import Finding, Suggestion
from spmdcheck.analysis.ops import render_fix_call
from spmdcheck.analysis.reveal import reveal
from spmdcheck.analysis.typeexpr import (
    TypeDict,
    TypeExprError,
    axis_name,
    is_opaque_axis,
    merge_type_dicts,
    type_dict,
)
from spmdcheck.analysis.values import (
    UNKNOWN,
    DictValue,
    Literal,
    LocalMapValue,
    MeshValue,
    ScalarValue,
    Seq,
    TensorValue,
    TypeValue,
    Value,
)
from spmdcheck.diagnostics.violations.collectives import ForbiddenTransition
from spmdcheck.diagnostics.violations.contracts import (
    ArgumentTypeMismatch,
    AssertTypeMismatch,
    DeclaredTypeMismatch,
    InvalidLossType,
)
from spmdcheck.diagnostics.violations.inputs import MalformedAnnotation, UnknownAxis
from spmdcheck.diagnostics.violations.pending import PendingSumMisuse
from spmdcheck.lattice import MAX_TENSOR_RANK, S_UNKNOWN_DIM, AxisType, GradState, Kind, S, SpmdType, shard_dim_in_range
from spmdcheck.rules.model import OpRule

if TYPE_CHECKING:
    from spmdcheck.analysis.context import Analysis

Handler = Callable[["Analysis", OpRule, Bound, cst.Call, list], Value]


def asserted_axes(interp: Analysis, td: TypeDict, node: cst.CSTNode) -> dict[str, AxisType] | None:
    axes = dict(td.axes)
    known = interp.ctx.known_axes
    for axis in list(axes):
        if known and axis not in known and not is_opaque_axis(axis):
            interp.report(Finding.of(UnknownAxis(axis, tuple(known)), node))
            del axes[axis]
    if td.bare is not None and not td.partial:
        if not interp.mesh:
            # A caller (or a project helper the checker cannot see through) may have set the mesh: unknown
            # is silent by default; strict mode asks for a mesh it can see.
            if interp.ctx.options.strict:
                interp.report(Finding.of(MalformedAnnotation("bare-without-mesh"), node))
            return axes or None
        for axis in interp.mesh:
            axes.setdefault(axis, td.bare)
    return axes


def refine(
    interp: Analysis,
    x: TensorValue,
    axes: dict[str, AxisType],
    node: cst.CSTNode,
    contract: type[DeclaredTypeMismatch],
    what: str,
) -> TensorValue:
    """assert_type semantics: set unknown axes, check known ones; V may become P (or S(d)).

    `contract` is the violation a disagreement is (AssertTypeMismatch, ReturnTypeMismatch,
    ArgumentTypeMismatch).
    """
    merged = dict(x.type)
    for axis, want in sorted(axes.items()):
        have = x.type.get(axis)
        if have is None:
            merged[axis] = _normalize(want, x.rank)
            continue
        if have.kind is want.kind:
            if want.kind is Kind.V and want.shard is not None:
                w, h = _normalize(want, x.rank).shard, _normalize(have, x.rank).shard
                if h is not None and w != h and (x.rank is not None or (want.shard >= 0) == (have.shard >= 0)):
                    interp.report(Finding.of(contract(what, axis, have, want, "shard-dim"), node))
                    continue
                if have.is_pending:
                    _pending_at_contract(interp, have, axis, node, f"S({want.shard})")
                merged[axis] = AxisType(Kind.V, shard=want.shard)
            continue
        if have.kind is Kind.V and want.kind is Kind.P:
            merged[axis] = AxisType(Kind.P)  # declaring the pending sum
            continue
        if have.is_pending and want.kind in (Kind.R, Kind.I):
            # decision 3: a pending sum at an R/I contract also gets its own warning, pointing at the contraction
            _pending_at_contract(interp, have, axis, node, str(want))
        origin = have.pending.ref if have.pending is not None else None
        mismatch = contract(what, axis, have, want, pending_origin=origin)
        suggestions = []
        if have.kind in (Kind.V, Kind.P) and want.kind in (Kind.R, Kind.I) and isinstance(node, cst.Call):
            operand = interp.ctx.code_of(node.args[0].value) if node.args else "x"
            suggestions.append(
                Suggestion(
                    mismatch.fix_title,
                    render_fix_call(interp, "all_reduce", operand, axis, str(have.kind), want.kind.value),
                    None,
                )
            )
        interp.report(Finding.of(mismatch, node, suggestions))
    return TensorValue(SpmdType(merged), x.grad, x.rank, reduced_at=x.reduced_at, leaf=x.leaf)


def _pending_at_contract(interp: Analysis, have: AxisType, axis: str, node: cst.CSTNode, want: str) -> None:
    value = _contracted_value(node)
    operand = interp.ctx.code_of(value)
    misuse = PendingSumMisuse(axis, have.pending.ref, declared=want)  # type: ignore[union-attr]
    reduction = "reduce_scatter" if want.startswith("S(") else "all_reduce"
    fix = Suggestion(misuse.fix_title, render_fix_call(interp, reduction, operand, axis, "V", want), value)
    interp.report(Finding.of(misuse, node, [fix]))


def _contracted_value(node: cst.CSTNode) -> cst.CSTNode:
    """The expression a contract is about: assert_type's first argument, a returned value, an argument."""
    if isinstance(node, cst.Call) and node.args:
        return node.args[0].value
    if isinstance(node, cst.Return) and node.value is not None:
        return node.value
    return node


def _normalize(t: AxisType, rank: int | None) -> AxisType:
    if t.kind is Kind.V and t.shard is not None and t.shard < 0 and rank is not None:
        return S(t.shard + rank)
    return t


def _types_from(
    interp: Analysis, values: list[tuple[Value, cst.CSTNode]], node: cst.CSTNode
) -> dict[str, AxisType] | None:
    parts = []
    for value, vnode in values:
        if isinstance(value, Literal) and value.value is None:
            continue
        try:
            parts.append(type_dict(value, known_name(interp)))
        except TypeExprError as exc:
            if _statically_unknown(value):
                return None  # a type built at run time: gradual, nothing to check
            interp.report(Finding.of(MalformedAnnotation("unreadable", str(exc)), vnode))
            return None
    if not parts:
        interp.report(Finding.of(MalformedAnnotation("no-types"), node))
        return None
    try:
        merged = merge_type_dicts(parts)
    except TypeExprError as exc:
        interp.report(Finding.of(MalformedAnnotation("merge", str(exc)), node))
        return None
    return asserted_axes(interp, merged, node)


def known_name(interp: Analysis) -> Callable[[str], bool]:
    """Whether the stubs describe an imported name."""
    registry = interp.ctx.registry
    return lambda qualname: registry.lookup(registry.resolve_alias(qualname)) is not None


def _statically_unknown(value: Value) -> bool:
    from spmdcheck.analysis.values import DictValue, Unknown

    if isinstance(value, DictValue):
        return any(isinstance(item, Unknown) or isinstance(key, Unknown) for key, item, _ in value.items)
    return isinstance(value, Unknown)


def assert_type(interp: Analysis, rule: OpRule, bound: Bound, node: cst.Call, args: list) -> Value:
    if not args:
        return UNKNOWN
    _, target, target_node = args[0]
    axes = _types_from(interp, [(v, n) for k, v, n in args[1:] if k in (None, "partition_spec")], node)
    if axes is None:
        return target
    return _apply_to(
        interp, target, target_node, lambda t: refine(interp, t, axes, node, AssertTypeMismatch, "assert_type")
    )


def _apply_to(
    interp: Analysis, target: Value, target_node: cst.CSTNode, fn: Callable[[TensorValue], TensorValue]
) -> Value:
    if isinstance(target, TensorValue):
        result = fn(target)
        interp.rebind(target_node, result)
        return result
    if isinstance(target, Seq):
        elements = getattr(target_node, "elements", None)
        items = []
        for i, item in enumerate(target.items):
            if isinstance(item, TensorValue):
                new = fn(item)
                if elements is not None and i < len(elements):
                    interp.rebind(elements[i].value, new)
                items.append(new)
            else:
                items.append(item)
        return Seq(tuple(items), target.is_list)
    if target is UNKNOWN or not isinstance(target, TensorValue):
        # asserting on a value we could not type: from here on it has the asserted type
        fresh = fn(TensorValue(SpmdType(), GradState.UNKNOWN, None))
        interp.rebind(target_node, fresh)
        return fresh
    return target


def assert_type_like(interp: Analysis, rule: OpRule, bound: Bound, node: cst.Call, args: list) -> Value:
    if len(args) < 2:
        return UNKNOWN
    _, target, target_node = args[0]
    _, source, _ = args[1]
    if not isinstance(source, TensorValue):
        return target
    axes = dict(source.type)
    if len(args) > 2:
        extra = _types_from(interp, [(args[2][1], args[2][2])], node)
        axes.update(extra or {})
    return _apply_to(
        interp, target, target_node, lambda t: refine(interp, t, axes, node, AssertTypeMismatch, "assert_type_like")
    )


def mutate_type(interp: Analysis, rule: OpRule, bound: Bound, node: cst.Call, args: list) -> Value:
    if not args:
        return UNKNOWN
    _, target, target_node = args[0]
    src, dst = bound.get("src"), bound.get("dst")
    axis_value = bound.get("axis")
    if not isinstance(target, TensorValue):
        if target is UNKNOWN and axis_value is not None:
            target = TensorValue(SpmdType(), GradState.UNKNOWN, None)  # after the call the axis is dst
        else:
            return target
    axes = [axis_name(axis_value)] if axis_value is not None else list(target.type)
    new = dict(target.type)
    for axis in axes:
        if axis is None:
            return target
        want_src = _per_axis(src, axis)
        want_dst = _per_axis(dst, axis)
        have = target.type.get(axis)
        if have is None:
            # Only the axes the checker knows are stored: a missing axis is unknown (a value built from
            # unknown parts), not known to be untyped, unless the value is known to carry no type at all.
            if interp.ctx.options.strict and not target.opaque and not target.typed:
                untyped = AssertTypeMismatch("mutate_type", axis, None, want_dst, "untyped")
                interp.report(Finding.of(untyped, node))
            elif want_dst is not None:
                new[axis] = want_dst
            continue
        if want_src is not None and want_src.kind is not have.kind:
            interp.report(Finding.of(AssertTypeMismatch("mutate_type", axis, have, want_src, "src"), node))
            continue
        if want_dst is not None:
            new[axis] = want_dst
    result = TensorValue(SpmdType(new), target.grad, target.rank)
    interp.rebind(target_node, result)
    return result


def _per_axis(value: Value | None, axis: str) -> AxisType | None:
    if isinstance(value, TypeValue):
        return value.type
    try:
        td = type_dict(value) if value is not None else None
    except TypeExprError:
        return None
    return td.axes.get(axis) if td is not None else None


def reinterpret_no_grad(interp: Analysis, rule: OpRule, bound: Bound, node: cst.Call, args: list) -> Value:
    target, target_node = bound.get("x"), bound.node("x")
    axis, dst = axis_name(bound.get("axis") or UNKNOWN), bound.get("dst")
    if not isinstance(target, TensorValue) or axis is None or not isinstance(dst, TypeValue):
        return target or UNKNOWN
    if target.grad is GradState.YES:
        interp.report(Finding.of(ForbiddenTransition("reinterpret_no_grad", "requires-grad"), node))
        return target
    result = TensorValue(target.type.with_axis(axis, dst.type), target.grad, target.rank)
    interp.rebind(target_node, result)
    return result


def scalar(interp: Analysis, rule: OpRule, bound: Bound, node: cst.Call, args: list) -> Value:
    if len(args) < 2:
        return UNKNOWN
    try:
        td = type_dict(args[1][1])
    except TypeExprError as exc:
        interp.report(Finding.of(MalformedAnnotation("unreadable", str(exc)), args[1][2]))
        return UNKNOWN
    return ScalarValue(SpmdType(td.axes))


def shard_type(interp: Analysis, rule: OpRule, bound: Bound, node: cst.Call, args: list) -> Value:
    """`S(d)`: d a constant (literal, constant arithmetic, `x.dim() - 1` at a known rank), else S(?)."""
    dim = args[0][1] if args else None
    if isinstance(dim, Literal) and isinstance(dim.value, int) and not isinstance(dim.value, bool):
        if not shard_dim_in_range(dim.value):
            interp.report(Finding.of(MalformedAnnotation("shard-dim-range", limit=MAX_TENSOR_RANK), node))
            return UNKNOWN
        return TypeValue(S(dim.value))
    if dim is None or isinstance(dim, Literal):
        interp.report(Finding.of(MalformedAnnotation("shard-dim-not-int"), node))
        return UNKNOWN
    if _integer_constant(args[0][2]):  # constant arithmetic too large to fold (`10**10**10`)
        interp.report(Finding.of(MalformedAnnotation("shard-dim-range", limit=MAX_TENSOR_RANK), node))
        return UNKNOWN
    return TypeValue(S_UNKNOWN_DIM)  # computed at run time: sharded, on a dim the checker cannot know


def _integer_constant(node: cst.CSTNode) -> bool:
    """An expression of integer literals and arithmetic only (iterative: it may be long)."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, cst.BinaryOperation):
            stack += [item.left, item.right]
        elif isinstance(item, cst.UnaryOperation):
            stack.append(item.expression)
        elif not isinstance(item, cst.Integer):
            return False
    return True


def backward(interp: Analysis, rule: OpRule, bound: Bound, node: cst.Call, args: list) -> Value:
    first = rule.params[0].name if rule.params else "self"  # Tensor.backward(self) / autograd.backward(tensors)
    loss, loss_node = bound.get(first), bound.node(first)
    explicit = bound.get("gradient") or bound.get("grad_tensors")
    if (explicit is not None and explicit != Literal(None)) or not isinstance(loss, TensorValue):
        return Literal(None)
    operand = interp.ctx.code_of(loss_node) if loss_node is not None else "loss"
    for axis, t in sorted(loss.type.items()):
        if t.kind is Kind.R:
            replicate = InvalidLossType(operand, axis, Kind.R)
            fixes = [
                Suggestion(replicate.fix_title, render_fix_call(interp, "all_reduce", "...", axis, "P", "I"), None),
                Suggestion(InvalidLossType.LOCAL_LOSS_TITLE, operand, None),
            ]
            interp.report(Finding.of(replicate, node, fixes))
            return Literal(None)
        if t.kind is Kind.V:
            varying = InvalidLossType(operand, axis, Kind.V)
            fix = Suggestion(
                varying.fix_title, render_fix_call(interp, "reinterpret", operand, axis, "V", "P"), loss_node
            )
            interp.report(Finding.of(varying, node, [fix]))
            return Literal(None)
    return Literal(None)


def partition_spec(interp: Analysis, rule: OpRule, bound: Bound, node: cst.Call, args: list) -> Value:
    """`PartitionSpec(a0, a1, ...)`: the axis (or axes) at position i shard dim i, read as {axis: S(i)}."""
    items: list[tuple[Value, Value, cst.CSTNode]] = []
    for dim, (keyword, value, arg_node) in enumerate(args):
        if keyword is not None:
            return UNKNOWN  # `*dims` unpacked or an unexpected keyword: the positions are unknown
        names = value.items if isinstance(value, Seq) else (value,)
        for name in names:
            if isinstance(name, Literal) and name.value is None:
                continue
            items.append((name, TypeValue(S(dim)), arg_node))
    return DictValue(tuple(items))


def local_map(interp: Analysis, rule: OpRule, bound: Bound, node: cst.Call, args: list) -> Value:
    """`spmd.local_map(in_types=..., out_types=...)` (the decorator form is read with the function)."""
    out_types = bound.get("out_types")
    if out_types is None:
        return UNKNOWN
    return LocalMapValue(bound.get("in_types") or UNKNOWN, out_types)


def call_local_map(interp: Analysis, boundary: LocalMapValue, args: list, node: cst.Call) -> Value:
    """`local_map(...)(fn)` wraps fn; calling the wrapper checks the arguments against in_types
    (assert_type semantics, SPMD403) and gives the results the out_types."""
    if not boundary.applied:
        return LocalMapValue(boundary.in_types, boundary.out_types, applied=True)
    leaves = boundary.in_types.items if isinstance(boundary.in_types, Seq) else ()
    positional = [(v, n) for k, v, n in args if k is None]
    for i, (value, value_node) in enumerate(positional):
        if i >= len(leaves) or not isinstance(value, TensorValue):
            continue
        try:
            declared = type_dict(leaves[i], known_name(interp))
        except TypeExprError:
            continue
        if not declared.partial:
            refine(interp, value, declared.axes, value_node, ArgumentTypeMismatch, f"local_map argument {i}")
    out = boundary.out_types
    if isinstance(out, Seq):
        return Seq(tuple(_boundary_output(interp, leaf) for leaf in out.items), out.is_list)
    return _boundary_output(interp, out)


def _boundary_output(interp: Analysis, leaf: Value) -> Value:
    try:
        declared = type_dict(leaf, known_name(interp))
    except TypeExprError:
        return UNKNOWN
    if declared.partial or declared.bare is not None:
        return TensorValue(SpmdType(declared.axes), GradState.UNKNOWN, None, opaque=not declared.axes)
    return TensorValue(SpmdType(declared.axes), GradState.UNKNOWN, None)


def current_mesh(interp: Analysis, rule: OpRule, bound: Bound, node: cst.Call, args: list) -> Value:
    """`current_mesh()`: the mesh in scope, when the checker knows it."""
    return MeshValue(interp.mesh) if interp.mesh else UNKNOWN


def autograd_apply(cls: Value, enclosing: list) -> Value:
    """`Cls.apply` of an autograd Function with a `typecheck_forward` (spmd_types' legacy registration):

    that static method is the typed signature of `apply`: a call of `apply` is checked and typed by running
    it with the call's arguments. (Inside typecheck_forward, its own `Cls.apply(...)` is not re-entered.)
    """
    from spmdcheck.analysis.values import ClassValue, FunctionValue

    if isinstance(cls, ClassValue):
        hook = cls.lookup("typecheck_forward")
        inside = isinstance(hook, FunctionValue) and any(fn is hook.node for fn in enclosing)
        if isinstance(hook, FunctionValue) and not inside:
            return hook
    return UNKNOWN


def ignore(interp: Analysis, rule: OpRule, bound: Bound, node: cst.Call, args: list) -> Value:
    return UNKNOWN


HANDLERS: dict[str, Handler] = {
    "assert_type": assert_type,
    "assert_type_like": assert_type_like,
    "assert_local_type_like": assert_type_like,
    "mutate_type": mutate_type,
    "reinterpret_no_grad": reinterpret_no_grad,
    "scalar": scalar,
    "shard_type": shard_type,
    "backward": backward,
    "ignore": ignore,
    "current_mesh": current_mesh,
    "reveal": reveal,
    "partition_spec": partition_spec,
    "local_map": local_map,
}
