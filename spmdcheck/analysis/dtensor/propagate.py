"""Ops on DTensors: placements propagated by the local op rules, never reported.

DTensor's sharding propagation makes every op on DTensors right: where an op cannot take its operands'
placements (a Partial into a non-linear op, a Partial added to a Replicate) it redistributes them first
(a Partial is all-reduced). So an op on DTensors is typed by its ordinary stub rule on the local types
of the placements (Shard(d) as S(d), Replicate as R, Partial as P), silently; an op the rule refuses is
typed again with every Partial made Replicate, as DTensor would. The result's local type is read back
as placements (a pending sum of a contraction over a sharded dim is Partial, as DTensor makes it).
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from spmdcheck.analysis import ops
from spmdcheck.analysis.binding import Arg, bind
from spmdcheck.analysis.dtensor.values import REPLICATE_PLACEMENT, DTensorValue, PlacementValue, from_local_type
from spmdcheck.analysis.findings import Finding
from spmdcheck.analysis.frames import Engine
from spmdcheck.analysis.values import (
    UNKNOWN,
    Alternatives,
    Homogeneous,
    Seq,
    TensorValue,
    Value,
)
from spmdcheck.diagnostics.violations.inference import DTensorLocalMix
from spmdcheck.lattice import AxisType, GradState, Kind, SpmdType
from spmdcheck.rules.model import OpRule


def has_dtensor(args: list[Arg]) -> bool:
    """Whether a call's arguments hold a DTensor (directly or in a list: `torch.cat([a, b])`)."""
    for _, value, _ in args:
        if type(value) is DTensorValue:
            return True
        if type(value) is Seq and any(type(item) is DTensorValue for item in value.items):  # type: ignore[attr-defined]
            return True
    return False


def apply_op(interp: Engine, rule: OpRule, args: list[Arg], node: cst.CSTNode) -> Value:
    """An op whose operands include DTensors: a DTensor with the placements DTensor gives the result."""
    dtensors = [v for v in _values(args) if isinstance(v, DTensorValue)]
    dims = dtensors[0].dims
    if any(d.dims != dims for d in dtensors):
        return UNKNOWN  # DTensors on different meshes: PyTorch refuses the op
    if rule.parallel_loss and interp.loss_parallel:
        return _parallel_loss(rule, args)
    if any(isinstance(v, (TensorValue, Alternatives)) for v in _values(args)):
        _report_mix(interp, rule, args, node)  # PyTorch refuses the op
        return UNKNOWN
    name = rule.qualname.rsplit(".", 1)[-1]
    if rule.grad == "yes" and rule.inplace_param is not None and len(dtensors) == 1:
        # `x.requires_grad_()`: the same placements, now a leaf of the autograd graph whose gradient is what its
        # consumers give it
        return replace(dtensors[0], grad=GradState.YES, backward=None)
    if rule.inplace_param is not None or (name.endswith("_") and not name.startswith("__")) or name.startswith("__i"):
        return UNKNOWN  # an in-place op on a DTensor: its placements after it are not followed
    if rule.grad == "leaf" and len(dtensors) == 1:
        return replace(dtensors[0], grad=GradState.YES)  # `nn.Parameter(dt)`: the same DTensor, a leaf
    result = _silently(interp, rule, _as_local(args, replicate_partial=False), node)
    if _refused(result) and any(p is not None and p.kind == "partial" for d in dtensors for p in d.placements):
        result = _silently(interp, rule, _as_local(args, replicate_partial=True), node)  # DTensor reduces first
    return _as_dtensor(result, dims)


def _parallel_loss(rule: OpRule, args: list[Arg]) -> Value:
    """`F.cross_entropy(logits, target)` inside `loss_parallel()`: the logits a DTensor sharded on the class
    dim, the target local; the loss (reduced by mean or sum) is a Replicate DTensor on the logits' mesh, its
    gradient back to the logits sharded alike. Anything else (another reduction, logits not a DTensor) is
    left unknown."""
    bound = bind(rule, args)
    logits = bound.get(rule.params[0].name) if rule.params else None
    reduction = bound.literal(rule, "reduction")  # the stub's default ("mean") when not given
    if not isinstance(logits, DTensorValue) or reduction not in ("mean", "sum"):
        return UNKNOWN
    replicated = (REPLICATE_PLACEMENT,) * len(logits.dims)
    return DTensorValue(logits.dims, replicated, None, 0, logits.grad)


def _report_mix(interp: Engine, rule: OpRule, args: list[Arg], node: cst.CSTNode) -> None:
    """A local tensor known to have at least one dim beside a DTensor (PyTorch takes a 0-dim one as replicated)."""
    items = [(v, n) for _, value, node_ in args for v, n in _items(value, node_)]
    dtensor = next(((v, n) for v, n in items if isinstance(v, DTensorValue)), None)
    local = next(
        (
            (v, n)
            for v, n in items
            if isinstance(v, TensorValue) and not v.opaque and ((v.rank or 0) >= 1 or v.min_rank >= 1)
        ),
        None,
    )
    if dtensor is None or local is None or not isinstance(dtensor[0], DTensorValue):
        return
    spelled = "[" + ", ".join(str(p) if p is not None else "?" for p in dtensor[0].placements) + "]"
    violation = DTensorLocalMix(
        ops.short_name(rule.qualname), interp.ctx.code_of(dtensor[1]), spelled, interp.ctx.code_of(local[1])
    )
    interp.report(Finding.of(violation, node))


def _items(value: Value, node: cst.CSTNode) -> list[tuple[Value, cst.CSTNode]]:
    return [(item, node) for item in value.items] if isinstance(value, Seq) else [(value, node)]


def _values(args: list[Arg]) -> list[Value]:
    out: list[Value] = []
    for _, value, _ in args:
        out.extend(value.items if isinstance(value, Seq) else (value,))
    return out


def _silently(interp: Engine, rule: OpRule, args: list[Arg], node: cst.CSTNode) -> Value:
    saved = interp.checking, interp.effects
    interp.checking, interp.effects = False, []
    try:
        return ops.apply_op(interp, rule, bind(rule, args), node)
    finally:
        interp.checking, interp.effects = saved


def _refused(result: Value) -> bool:
    return isinstance(result, TensorValue) and result.opaque


def _local_of(dt: DTensorValue, replicate_partial: bool) -> TensorValue:
    axes: dict[str, AxisType] = {}
    for dim, placement in zip(dt.dims, dt.placements):
        if placement is not None and placement.kind == "partial" and replicate_partial:
            placement = REPLICATE_PLACEMENT
        t = placement.forward if placement is not None else None
        if t is not None:
            for axis in dim:
                axes[axis] = t
    return TensorValue(SpmdType(axes), dt.grad, dt.rank, opaque=not axes)


def _as_local(args: list[Arg], replicate_partial: bool) -> list[Arg]:
    def convert(value: Value) -> Value:
        return _local_of(value, replicate_partial) if isinstance(value, DTensorValue) else value

    out: list[Arg] = []
    for key, value, node in args:
        if isinstance(value, Seq):
            value = Seq(tuple(convert(item) for item in value.items), value.is_list)
        out.append((key, convert(value), node))
    return out


def _as_dtensor(result: Value, dims: tuple[tuple[str, ...], ...]) -> Value:
    if isinstance(result, TensorValue):
        placements: tuple[PlacementValue | None, ...]
        if result.opaque:
            placements = (None,) * len(dims)
        else:
            placements = from_local_type(dims, _without_invariant(result.type))
        return DTensorValue(dims, placements, None, result.rank, result.grad)
    if isinstance(result, Homogeneous):
        item = _as_dtensor(result.item, dims)
        return Homogeneous(item) if item is not UNKNOWN else UNKNOWN
    if isinstance(result, Seq):
        return Seq(tuple(_as_dtensor(item, dims) for item in result.items), result.is_list)
    return result if not isinstance(result, (TensorValue, Alternatives)) else UNKNOWN


def _without_invariant(t: SpmdType) -> SpmdType:
    return SpmdType({a: (AxisType(Kind.R) if x.kind is Kind.I else x) for a, x in t.items()})
