"""Collectives and conversions: spmd_types calls, library mappings, raw torch.distributed."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from spmdcheck.analysis.binding import NOT_LITERAL, Bound
from spmdcheck.analysis.findings import Finding, Suggestion
from spmdcheck.analysis.ops import megatron_spelling, render_fix_call, short_name, type_spelling
from spmdcheck.analysis.typeexpr import axis_name, is_opaque_axis
from spmdcheck.analysis.values import (
    UNKNOWN,
    UNNAMED_GROUP,
    Literal,
    RankValue,
    Seq,
    TensorValue,
    TypeValue,
    Value,
)
from spmdcheck.diagnostics.violations.collectives import (
    CollectiveSrcMismatch,
    CollectiveUntyped,
    DoubleReduction,
    ExpertModeRequired,
    ForbiddenTransition,
    RawCollectiveOnAutogradPath,
    WrongShardDim,
)
from spmdcheck.diagnostics.violations.inputs import MalformedAnnotation, UnknownAxis
from spmdcheck.diagnostics.violations.pending import PendingSumMisuse, ReducedLocalMean
from spmdcheck.lattice import AxisType, GradState, Kind, SpmdType
from spmdcheck.rules.model import (
    CollectiveRule,
    MappingRule,
    OpRule,
    RawCollectiveRule,
    Transition,
)

if TYPE_CHECKING:
    from spmdcheck.analysis.context import Analysis

REDUCING = {"all_reduce", "reduce_scatter"}


def letter(t: AxisType) -> str:
    return "S" if t.kind is Kind.V and t.is_shard else t.kind.value


def resolve_axis(interp: Analysis, value: Value | None, node: cst.CSTNode | None) -> str | None:
    """The axis a collective acts on; an unknown axis name is reported (SPMD003)."""
    if value is None:
        return None
    name = axis_name(value)
    if name is None:
        return None
    known = interp.ctx.known_axes
    if known and name not in known and not is_opaque_axis(name):
        if not isinstance(value, Literal):
            # a group's axis named by a stub (Megatron's expert-data-parallel group is `edp`) that this
            # project's mesh does not list: the user wrote no axis name to correct, so it is unknown
            return None
        where = node if node is not None else value
        interp.report(Finding.of(UnknownAxis(name, tuple(known)), where))
        return None
    return name


def default_group_axis(interp: Analysis) -> str | None:
    """`group=None` is the default group: the mesh itself when it has one axis."""
    mesh = interp.mesh or tuple(sorted(interp.ctx.known_axes))
    return mesh[0] if len(mesh) == 1 else None


def _type_arg(interp: Analysis, bound: Bound, name: str, default: str | None, node: cst.CSTNode) -> AxisType | None:
    from spmdcheck.rules.typespec import parse_axis_type

    value = bound.get(name)
    if value is None:
        return parse_axis_type(default) if default else None
    if isinstance(value, TypeValue):
        return value.type
    return None


def apply_collective(interp: Analysis, rule: OpRule, bound: Bound, node: cst.CSTNode) -> Value:
    coll = rule.collective
    assert coll is not None
    x = bound.get(coll.tensor_param)
    x_node = bound.node(coll.tensor_param)
    axis = resolve_axis(interp, bound.get(coll.axis_param), bound.node(coll.axis_param))
    src = _type_arg(interp, bound, "src", coll.default_src, node)
    dst = _type_arg(interp, bound, "dst", coll.default_dst, node)
    expert = bound.literal(rule, "expert_mode") is True
    api = coll.op
    for name, value in (("src", src), ("dst", dst)):
        if value is None and _given_but_not_a_type(bound.get(name)):
            violation = MalformedAnnotation("bad-type-argument", api=api, param=name)
            interp.report(Finding.of(violation, bound.node(name) or node))
    if src is None or dst is None:
        return _untyped_like(x)
    if not _transition_ok(interp, coll, src, dst, expert, node, api):
        return _untyped_like(x)
    return transition(
        interp,
        api,
        x,
        x_node,
        axis,
        src,
        dst,
        node,
        implicit_partial=coll.implicit_partial,
        inplace=bound.literal(rule, "inplace") is True,
    )


def check_transition(
    interp: Analysis, coll: CollectiveRule, src: AxisType, dst: AxisType, node: cst.CSTNode, api: str
) -> bool:
    """Whether a src -> dst move is one the collective or conversion allows (reported where it is not)."""
    return _transition_ok(interp, coll, src, dst, False, node, api)


def _transition_ok(
    interp: Analysis, coll: CollectiveRule, src: AxisType, dst: AxisType, expert: bool, node: cst.CSTNode, api: str
) -> bool:
    s, d = letter(src), letter(dst)
    if coll.family == "collective":
        varying_for_partial = coll.implicit_partial and "P" in coll.src and s in ("V", "S")
        src_rejected = bool(coll.src) and s not in coll.src and not varying_for_partial
        dst_rejected = bool(coll.dst) and d not in coll.dst
        if src_rejected or dst_rejected:
            violation = ForbiddenTransition(
                api,
                "rejected",
                src,
                dst,
                allowed_src=tuple(coll.src) if src_rejected else None,
                allowed_dst=tuple(coll.dst) if dst_rejected else None,
                already_same=api in REDUCING and s in ("R", "I"),
            )
            interp.report(Finding.of(violation, node))
            return False
        return True
    pair = Transition(s, d)
    if src == dst or s == d and s != "S":
        return True
    if s == "S" and d == "S" and src.shard == dst.shard:
        return True
    if pair in coll.expert:
        if expert:
            return True
        interp.report(Finding.of(ExpertModeRequired(api, src, dst), node))
        return False
    if coll.allowed is None or pair in coll.allowed:
        return True
    violation = ForbiddenTransition(api, "not-allowed", src, dst, use_instead=coll.forbidden_hints.get(pair))
    interp.report(Finding.of(violation, node))
    return False


def _given_but_not_a_type(value: Value | None) -> bool:
    """A src=/dst= argument that is statically something other than a type (a bare S, a string)."""
    from spmdcheck.analysis.values import Unknown

    return value is not None and not isinstance(value, Unknown) and value != Literal(None)


def transition(
    interp: Analysis,
    api: str,
    x: Value | None,
    x_node: cst.CSTNode | None,
    axis: str | None,
    src: AxisType,
    dst: AxisType,
    node: cst.CSTNode,
    *,
    implicit_partial: bool,
    inplace: bool = False,
) -> Value:
    """Check the input against src on the axis, and give the output (dst on the axis, the rest copied)."""
    interp.note_collective(api, axis, node)
    if not isinstance(x, TensorValue):
        return UNKNOWN
    if axis is None:
        # the axis is not known statically: nothing about the output can be trusted on any axis
        return TensorValue(SpmdType(), x.grad, None)
    actual = x.type.get(axis)
    operand = interp.ctx.code_of(x_node) if x_node is not None else "the input"
    if actual is None:
        if interp.ctx.options.strict and not x.opaque:
            interp.report(Finding.of(CollectiveUntyped(api, operand, axis), node))
    elif not _check_src(interp, api, x, actual, src, axis, operand, node, implicit_partial, x_node, dst):
        # the mismatch is reported once: what the collective produced is unknown, so nothing cascades
        return TensorValue(SpmdType(), x.grad, None, opaque=True)
    out = dst
    if (
        actual is not None
        and actual.kind is Kind.V
        and dst.kind is Kind.V
        and not dst.is_shard
        and src.kind is Kind.V
        and not src.is_shard
        and api in ("convert", "reinterpret", "redistribute")
    ):
        out = AxisType(Kind.V, shard=actual.shard)  # a no-op V -> V keeps the layout it had
    rank = _rank_after(api, x.rank, src, dst)
    result = TensorValue(
        x.type.with_axis(axis, AxisType(out.kind, shard=_norm_shard(out.shard, rank))),
        x.grad,
        rank,
        # an input whose type is unknown stays unknown on the other axes: nothing to report from them
        opaque=x.opaque,
        min_rank=x.min_rank if rank is None else 0,
    )
    if api in REDUCING and out.kind in (Kind.R, Kind.I):
        result = TensorValue(result.type, result.grad, result.rank, reduced_at=((axis, interp.ctx.site(node)),))
    if inplace:
        interp.rebind(x_node, result)
    return result


def _norm_shard(shard: int | None, rank: int | None) -> int | None:
    if shard is not None and shard < 0 and rank is not None:
        return shard + rank
    return shard


def _rank_after(api: str, rank: int | None, src: AxisType, dst: AxisType) -> int | None:
    if rank is None:
        return None
    if api in ("all_gather", "unshard") and not src.is_shard:
        return rank + 1
    if api == "reduce_scatter" and not dst.is_shard:
        return rank - 1
    if api == "convert" and src.kind in (Kind.R, Kind.I) and dst.kind is Kind.V and not dst.is_shard:
        return rank - 1
    return rank


def _check_src(
    interp: Analysis,
    api: str,
    x: TensorValue,
    actual: AxisType,
    src: AxisType,
    axis: str,
    operand: str,
    node: cst.CSTNode,
    implicit_partial: bool,
    x_node: cst.CSTNode | None,
    dst: AxisType | None = None,
) -> bool:
    """Report a src mismatch (False: the input is not what the collective accepts), or layout warnings."""
    a, s = actual.kind, src.kind
    ok = a is s or (s is Kind.P and a is Kind.V and implicit_partial)
    if not ok and {a, s} == {Kind.R, Kind.I} and (x.grad is GradState.NO or not interp.grad_enabled):
        ok = True  # 0.3.1: R and I stand for each other on a value that never gets a gradient
    if not ok:
        if s is Kind.P and a in (Kind.R, Kind.I):
            reduced_at = next((ref for a, ref in x.reduced_at if a == axis), None)
            interp.report(Finding.of(DoubleReduction(api, axis, operand, actual, reduced_at), node))
        else:
            mismatch = CollectiveSrcMismatch(api, src, axis, operand, actual)
            suggestions = []
            if s is Kind.P and a is Kind.V and not implicit_partial:
                suggestions.append(
                    Suggestion(
                        mismatch.fix_title,
                        render_fix_call(interp, "reinterpret", operand, axis, "V", "P"),
                        x_node,
                    )
                )
            interp.report(Finding.of(mismatch, node, suggestions))
        return False
    # the tracked shard dim must be the one the collective names
    if src.shard is not None and actual.kind is Kind.V and actual.shard is not None:
        want, have = _norm_shard(src.shard, x.rank), _norm_shard(actual.shard, x.rank)
        # S(-a) and S(b) are the same dim only if the rank is exactly a + b: excluded by a larger lower bound
        mixed = (src.shard >= 0) != (actual.shard >= 0)
        comparable = x.rank is not None or not mixed or x.min_rank > abs(src.shard) + abs(actual.shard)
        if x.rank is None and mixed and comparable:
            want, have = src.shard, actual.shard  # both stand, different dims
        elif x.rank is None and mixed:
            # unknown rank: read it as a matrix (as `.T` and the layout rules do) when both dims fit in 2
            guess = max(2, x.min_rank)
            if all(-guess <= d < guess for d in (src.shard, actual.shard)):
                comparable = True
                want, have = _norm_shard(src.shard, guess), _norm_shard(actual.shard, guess)
        if comparable and want != have:
            wrong = WrongShardDim(api, src, operand, actual, axis)
            fix = Suggestion(wrong.fix_title, type_spelling(interp, wrong.right_src))
            interp.report(Finding.of(wrong, node, [fix]))
            return False  # reported once: what the wrong concatenation gives is unknown (no cascade)
    discharged = s is Kind.P or api in REDUCING or (dst is not None and dst.kind is Kind.P)
    if actual.is_pending and actual.pending.what == "mean" and api in REDUCING:  # type: ignore[union-attr]
        interp.report(Finding.of(ReducedLocalMean(operand, axis, actual.pending.ref, api), node))  # type: ignore[union-attr]
    elif actual.is_pending and not discharged:
        misuse = PendingSumMisuse(axis, actual.pending.ref, operand, api)  # type: ignore[union-attr]
        fix = Suggestion(misuse.fix_title, render_fix_call(interp, "all_reduce", operand, axis, "V", "R"), x_node)
        interp.report(Finding.of(misuse, node, [fix]))
    return True


def _untyped_like(x: Value | None) -> Value:
    if isinstance(x, TensorValue):
        return TensorValue(SpmdType(), x.grad, x.rank)
    return UNKNOWN


def apply_mapping(interp: Analysis, rule: OpRule, bound: Bound, node: cst.CSTNode) -> Value:
    """A library function that is one spmd_types collective (Megatron mappings)."""
    chosen: MappingRule | None = None
    for m in rule.mappings:
        if m.when and all(bound.literal(rule, k) == v for k, v in m.when):
            chosen = m
            break
    if chosen is None:
        if any(m.when and any(bound.literal(rule, k) is NOT_LITERAL for k, _ in m.when) for m in rule.mappings):
            x = bound.get(rule.mappings[0].tensor_param)
            return _untyped_like(x)
        chosen = next((m for m in rule.mappings if not m.when), rule.mappings[0])
    x = bound.get(chosen.tensor_param)
    x_node = bound.node(chosen.tensor_param)
    group = bound.get(chosen.group_param) if chosen.group_param else None
    if group is not None and not (isinstance(group, Literal) and group.value is None):
        axis = resolve_axis(interp, group, bound.node(chosen.group_param))  # type: ignore[arg-type]
    elif chosen.axis is not None:
        axis = chosen.axis if (not interp.ctx.known_axes or chosen.axis in interp.ctx.known_axes) else None
    else:
        axis = default_group_axis(interp)
    return transition(
        interp, chosen.op, x, x_node, axis, chosen.src, chosen.dst, node, implicit_partial=chosen.op in REDUCING
    )


def apply_raw(interp: Analysis, rule: OpRule, bound: Bound, node: cst.CSTNode) -> Value:
    raw: RawCollectiveRule = rule.raw  # type: ignore[assignment]
    x = bound.get(raw.input)
    x_node = bound.node(raw.input)
    group = bound.get(raw.group_param)
    if group is None or (isinstance(group, Literal) and group.value is None):
        axis = default_group_axis(interp)
    else:
        axis = resolve_axis(interp, group, bound.node(raw.group_param))
    name = short_name(rule.qualname).replace("torch.distributed.", "dist.")
    named_group = group is None or (isinstance(group, Literal) and group.value is None) or axis is not None
    # a group the checker cannot name (`dist.new_group(ranks)`): how a rank condition relates to it is unknown
    interp.note_collective(name, axis if named_group else UNNAMED_GROUP, node)
    # A leaf (a receive buffer made with requires_grad=True, a Parameter) has no upstream graph to lose.
    # `dist.broadcast(x, src=...)` with a source computed from the caller's own rank: ranks agree on the
    # source only where the source alone calls it (a group leader sending what it assembled, Megatron's
    # bridge communicator), and the source only reads x.
    sends_only = rule.qualname.endswith(".broadcast") and isinstance(bound.get("src"), RankValue)
    cuts_history = isinstance(x, TensorValue) and x.grad is GradState.YES and not x.leaf and not sends_only
    if cuts_history and interp.grad_enabled and not raw.differentiable:
        operand = interp.ctx.code_of(x_node) if x_node is not None else "the input"
        raw_use = RawCollectiveOnAutogradPath(name, operand)
        suggestions = []
        if axis is not None and "all_reduce" in rule.qualname:
            suggestions.append(
                Suggestion(
                    raw_use.fix_title,
                    render_fix_call(interp, "all_reduce", operand, axis, "P", "R"),
                    None,
                )
            )
            meg = megatron_spelling(interp, "all_reduce", "P", "I", axis, operand)
            if meg:
                suggestions.append(Suggestion(RawCollectiveOnAutogradPath.MEGATRON_FIX_TITLE, meg, None))
        interp.report(Finding.of(raw_use, node, suggestions))
    if not isinstance(x, TensorValue):
        return UNKNOWN
    # R before I: a raw gather's output is most often used per rank (Replicate)
    dst_letter = next((x for x in ("R", "I", "V", "P", "S") if x in raw.dst), "R")
    dst = AxisType(Kind.V) if dst_letter in ("V", "S") else AxisType(Kind(dst_letter))
    if (
        dst.kind is Kind.R
        and raw.src == frozenset({"P"})
        and x.grad is GradState.UNKNOWN
        and interp.grad_enabled
        and not raw.differentiable
    ):
        # A raw reduction has no backward: forward sum, identity backward, which is all_reduce(P -> I)
        # (Megatron's reduce_from_...). Where grad-ness is unknown the value may be on the autograd path, so
        # it is typed by what it does there: used as I it is right, used as R it is reported downstream.
        dst = AxisType(Kind.I)
    if axis is not None and axis not in x.type and interp.ctx.options.strict and not x.opaque:
        operand = interp.ctx.code_of(x_node) if x_node else "the input"
        interp.report(Finding.of(CollectiveUntyped(name, operand, axis), node))
    if axis is not None and axis in x.type and "*" not in raw.src:
        actual = x.type[axis]
        if letter(actual) not in raw.src and not (actual.kind is Kind.V and "V" in raw.src):
            src_kind = Kind(sorted(raw.src)[0]) if sorted(raw.src)[0] in "RIVP" else Kind.V
            _check_src(
                interp,
                name,
                x,
                actual,
                AxisType(src_kind),
                axis,
                interp.ctx.code_of(x_node) if x_node is not None else "the input",
                node,
                False,
                x_node,
            )
    if axis is not None:
        new = TensorValue(x.type.with_axis(axis, dst), x.grad, x.rank)
    else:
        new = TensorValue(SpmdType(), x.grad, x.rank)
    if raw.output is not None:
        out = bound.get(raw.output)
        out_node = bound.node(raw.output)
        if isinstance(out, Seq):
            for element in getattr(out_node, "elements", ()):
                interp.rebind(element.value, new)
        elif isinstance(out, TensorValue):
            interp.rebind(out_node, TensorValue(new.type, out.grad, out.rank))
        return Literal(None)
    if raw.mutates:
        interp.rebind(x_node, new)
        return Literal(None)
    return new
