"""Typing one ordinary op call: per-axis inference, einsum layouts, pending sums, in-place."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import libcst as cst

from spmdcheck import einsum
from spmdcheck.analysis import shapes, tp_whole
from spmdcheck.analysis.binding import Bound, Slot, has_unknown_operand, operand_slots
from spmdcheck.analysis.dtensor.fixes import dtensor_fixes
from spmdcheck.analysis.findings import Finding, Suggestion
from spmdcheck.analysis.values import (
    UNKNOWN,
    Homogeneous,
    Literal,
    Pieces,
    ScalarValue,
    TensorValue,
    Value,
)
from spmdcheck.diagnostics.violations.inference import (
    AXIS_RULE_VIOLATIONS,
    InplaceTypeChange,
    MissingAxis,
    MixedShardLayout,
    ShardedDimMismatch,
    TypeChangingWrite,
    axis_fix_title,
    megatron_fix_title,
)
from spmdcheck.diagnostics.violations.inputs import MalformedEinsum
from spmdcheck.diagnostics.violations.pending import PendingSumMisuse
from spmdcheck.lattice import (
    SCALAR,
    AxisError,
    AxisType,
    GradState,
    Kind,
    Linearity,
    Operand,
    Rule,
    Site,
    SpmdType,
    infer_axis,
    shadow_partial_check,
    suggest_fixes,
)
from spmdcheck.rules.model import OpRule, ParamRole, Returns

if TYPE_CHECKING:
    from spmdcheck.analysis.context import Analysis


def short_name(qualname: str) -> str:
    for prefix in ("torch.nn.functional.", "torch.Tensor.", "torch."):
        if qualname.startswith(prefix):
            rest = qualname[len(prefix) :]
            return {"torch.nn.functional.": "F.", "torch.Tensor.": "Tensor.", "torch.": "torch."}[prefix] + rest
    return qualname


def describe_slot(interp: Analysis, slot: Slot) -> str:
    text = interp.ctx.code_of(slot.node)
    return text if len(text) <= 40 else text[:37] + "..."


def axis_kind(slot: Slot, axis: str) -> AxisType | None:
    if slot.value is None:
        return None
    return slot.value.type.get(axis)


def apply_op(interp: Analysis, rule: OpRule, bound: Bound, node: cst.CSTNode) -> Value:
    """Type an ordinary op (not a collective) from its stub rule."""
    bias_param = rule.bias or rule.affine_bias
    slots = operand_slots(rule, bound)
    if not interp.grad_enabled:
        # under no_grad nothing receives a gradient: the R/I relaxation applies to every operand
        for s in slots:
            if isinstance(s.value, TensorValue):
                s.value = TensorValue(s.value.type, GradState.NO, s.value.rank)
    tensors = [s for s in slots if isinstance(s.value, TensorValue)]
    grad = interp.result_grad([s.value.grad for s in tensors])  # type: ignore[union-attr]
    if rule.grad == "no":
        grad = GradState.NO
    elif rule.grad in ("yes", "leaf"):
        grad = GradState.YES
    first_rank = next((s.value.rank for s in tensors if s.value.rank is not None), None)  # type: ignore[union-attr]

    axes: set[str] = set()
    for s in slots:
        if s.value is not None:
            axes.update(s.value.type)
    if interp.ctx.options.strict and (axes or tensors):
        axes.update(interp.mesh)  # spmd_types strict: under a mesh every tensor operand needs every axis

    result_axes: dict[str, AxisType] = {}
    result_rank: int | None = first_rank if rule.dims is not None and rule.dims.name == "keep" else None
    failed = False
    op_name = short_name(rule.qualname)
    for axis in sorted(axes):
        present: list[Slot] = []
        for s in slots:
            t = axis_kind(s, axis)
            if s.value is None:
                present.append(s)
            elif t is None:
                if interp.ctx.options.strict and not failed and not _opaque(s):
                    _report_missing(interp, s, axis, node, op_name)
                    failed = True
                continue
            else:
                present.append(s)
        if failed:
            continue
        if rule.contraction is not None:
            outcome, rank = _contraction_axis(interp, rule, bound, present, axis, node, bias_param)
            if rank is not None:
                result_rank = rank
        else:
            outcome = _plain_axis(interp, rule, bound, present, axis, node)
            if isinstance(outcome, AxisType) and rule.dims is not None:
                result_rank = _rank_of(rule, bound, present)
        if isinstance(outcome, _Failure):
            failed = True
            continue
        if outcome is not None:
            result_axes[axis] = outcome
    if rule.dims is not None and result_rank is None and tensors:
        result_rank = _rank_of(rule, bound, slots)

    opaque = has_unknown_operand(rule, bound)
    if opaque:
        # gradual typing: an operand we could not model may be a tensor of any type
        result_axes = {}
        grad = GradState.UNKNOWN if grad is not GradState.YES else grad
    if failed:
        # the error is reported once: what the op produced is unknown, so nothing downstream cascades
        return _shape_result(rule, TensorValue(SpmdType(), grad, result_rank, opaque=True), bound)
    min_rank = 0
    if result_rank is None:
        if rule.contraction in ("linear", "matmul"):
            min_rank = 2  # their operands are taken to be matrices or batches of them (see _operand_rank)
        elif rule.dims is not None and rule.dims.name == "keep":
            min_rank = max((s.value.min_rank for s in tensors), default=0)  # type: ignore[union-attr]
    if rule.untyped_is_unknown and not result_axes and tensors:
        opaque = True  # `nn.Parameter(torch.empty(...))`: laid out later, by whoever parallelizes its module
    result = TensorValue(
        SpmdType(result_axes), grad, result_rank, opaque=opaque, min_rank=min_rank, leaf=rule.grad == "leaf"
    )
    if any(s.value.boundary for s in tensors):  # type: ignore[union-attr]
        result = replace(result, boundary=_kept_boundaries(tensors, result_axes))
    _inplace(interp, rule, bound, result, node)
    return _shape_result(rule, result, bound)


def _kept_boundaries(tensors: list[Slot], result_axes: dict[str, AxisType]) -> tuple[tuple[str, int, str, str], ...]:
    """The DTensor boundaries that made the operands Invariant on axes where the result still is."""
    kept: list[tuple[str, int, str, str]] = []
    for s in tensors:
        for entry in s.value.boundary:  # type: ignore[union-attr]
            t = result_axes.get(entry[0])
            if t is not None and t.kind is Kind.I and entry not in kept:
                kept.append(entry)
    return tuple(kept)


def _opaque(slot: Slot) -> bool:
    return isinstance(slot.value, TensorValue) and slot.value.opaque


# dims rules of ops that cut a tensor into pieces of different values (split/chunk, unbind)
_CUTS = frozenset({"split", "select"})


def _shape_result(rule: OpRule, result: TensorValue, bound: Bound) -> Value:
    if rule.returns is Returns.TENSORS:
        if rule.dims is None or rule.dims.name not in _CUTS:
            return Homogeneous(result)
        dim = bound.literal(rule, rule.dims.params[0]) if rule.dims.params else None
        count = bound.get(rule.dims.pieces) if rule.dims.pieces is not None else None
        return Pieces(result, dim if isinstance(dim, int) and not isinstance(dim, bool) else None, count)
    if rule.returns is Returns.VALUE:
        return UNKNOWN
    if rule.returns is Returns.NONE:
        return Literal(None)
    return result


class _Failure:
    pass


FAILED = _Failure()


def _operands(slots: list[Slot], axis: str) -> list[Operand]:
    ops: list[Operand] = []
    for s in slots:
        if s.value is None:
            ops.append(Operand(SCALAR, GradState.NO, s.divisor))
            continue
        t = s.value.type[axis]
        grad = s.value.grad if isinstance(s.value, TensorValue) else GradState.NO
        ops.append(Operand(t.kind, grad, s.divisor))
    return ops


def _plain_axis(
    interp: Analysis, rule: OpRule, bound: Bound, present: list[Slot], axis: str, node: cst.CSTNode
) -> AxisType | _Failure | None:
    if not any(s.value is not None for s in present):
        return None
    ops = _operands(present, axis)
    base = infer_axis(ops, rule.linearity)
    if isinstance(base, AxisError):
        _report_axis_error(interp, base, present, ops, axis, node, rule.linearity, short_name(rule.qualname))
        return FAILED
    pending = [s.value is not None and s.value.type[axis].is_pending for s in present]
    if base is Kind.R and rule.dims is not None and rule.dims.name == "expand":
        sized = shapes.sized_by_shard(rule, bound, axis)  # broadcast over this rank's block of a sharded dim
        if sized is not None:
            return AxisType(Kind.V, shard=sized)
    if base is not Kind.V:
        return AxisType(base)
    shard_slot = next((s for s in present if s.value is not None and s.value.type[axis].shard is not None), None)
    all_sharded = all(
        s.value.type[axis].shard is not None
        for s in present
        if s.value is not None and s.value.type[axis].kind is Kind.V
    )
    shard = shard_slot.value.type[axis].shard if shard_slot is not None and all_sharded else None  # type: ignore[union-attr]
    rank = shard_slot.value.rank if shard_slot is not None and isinstance(shard_slot.value, TensorValue) else None
    if rule.dims is not None and rule.dims.name == "keep" and shard is not None:
        shard = _agree(present, axis)
    at_least = _least_rank(shard_slot.value.type) if rank is None and shard_slot is not None else 0  # type: ignore[union-attr]
    moved = shapes.move(rule, bound, shard, rank, at_least)
    site = None
    if any(pending):
        shadow = shadow_partial_check(ops, pending, rule.linearity)
        origin = next(s for s, p in zip(present, pending) if p).value.type[axis].pending  # type: ignore[union-attr]
        if isinstance(shadow, AxisError):
            _report_pending(interp, shadow, origin, axis, node, short_name(rule.qualname), present, pending)
            return AxisType(Kind.V, shard=moved.shard)
        site = origin
    if moved.reduced and site is None:
        # a local mean over a sharded dim sums to (axis size) x the global mean: remembered as such
        site = Site(interp.ctx.site(node), "mean" if rule.dims and rule.dims.name == "mean" else "reduction")
    return AxisType(Kind.V, shard=moved.shard if site is None else None, pending=site)


def _least_rank(t: SpmdType) -> int:
    """The rank a layout proves: a tensor sharded on dim d (or -d) on some axis has more than d dims."""
    return max((a.shard + 1 if a.shard >= 0 else -a.shard for a in t.values() if a.shard is not None), default=0)


def _agree(slots: list[Slot], axis: str) -> int | None:
    """The common shard dim of elementwise operands, which broadcasting aligns from the right.

    Each operand's shard dim, counted from the right, is known when its rank is (or the dim is negative);
    with an unknown rank a positive S(d) could be any of -(d+1), -(d+2), ... The operands agree when exactly
    one right-aligned dim fits them all (a 1-D S(0) scale against an S(-1) activation is the last dim).
    """
    same: set[int] = set()
    candidates: set[int] | None = None
    first: Slot | None = None
    for s in slots:
        if s.value is None or s.value.type[axis].kind is not Kind.V:
            continue
        d = s.value.type[axis].shard
        if d is None:
            return None
        first = first or s
        same.add(d)
        rank = s.value.rank if isinstance(s.value, TensorValue) else None
        if d < 0:
            fits = {d}
        elif rank is not None:
            fits = {d - rank}
        else:
            fits = {d - r for r in range(d + 1, d + 4)}
        candidates = fits if candidates is None else candidates & fits
    if first is None:
        return None
    if candidates is not None and len(candidates) == 1:
        exact = next(iter(candidates))
        rank = first.value.rank if isinstance(first.value, TensorValue) else None
        return exact + rank if rank is not None and first.value.type[axis].shard >= 0 else exact  # type: ignore[union-attr]
    if len(same) == 1 and candidates:  # the same positive dim of operands of unknown rank
        return first.value.type[axis].shard  # type: ignore[union-attr]
    return None


def _rank_of(rule: OpRule, bound: Bound, slots: list[Slot]) -> int | None:
    rank = next((s.value.rank for s in slots if isinstance(s.value, TensorValue) and s.value.rank is not None), None)
    return shapes.move(rule, bound, None, rank).rank


def _contraction_axis(
    interp: Analysis,
    rule: OpRule,
    bound: Bound,
    present: list[Slot],
    axis: str,
    node: cst.CSTNode,
    bias_param: str | None,
) -> tuple[AxisType | _Failure | None, int | None]:
    factors = [s for s in present if s.param != bias_param and s.value is not None]
    all_factors = [s for s in operand_slots(rule, bound) if s.param != bias_param and s.value is not None]
    layout_known = len(factors) == len(all_factors)  # a factor without this axis: no equation to judge
    scalars = [s for s in present if s.value is None]
    bias = [s for s in present if s.param == bias_param and s.value is not None]
    op_name = short_name(rule.qualname)
    if not factors:
        return None, None
    equation, eq_text = _equation(interp, rule, bound, all_factors, node)
    ranks = [_operand_rank(s, rule.contraction or "") for s in factors]
    ops = _operands(factors + scalars, axis)
    types = [s.value.type[axis] for s in factors]  # type: ignore[union-attr]
    site = Site(interp.ctx.site(node), "contraction")
    rank: int | None = None
    if equation is not None and layout_known:
        try:
            outcome = einsum.judge_axis(equation, ranks, types, _operands(factors, axis), site)
            spec = einsum.expand(equation, ranks)
            rank = len(spec.output) if spec is not None else None
        except einsum.EinsumError as exc:
            interp.report(Finding.of(MalformedEinsum(str(exc), op_name), node))
            return FAILED, None
        product = outcome.result
        if isinstance(product, AxisError) and scalars:
            product = infer_axis(ops, Linearity.MULTILINEAR)
        if isinstance(product, AxisError):
            _report_axis_error(
                interp, product, factors, _operands(factors, axis), axis, node, Linearity.MULTILINEAR, op_name
            )
            return FAILED, None
        if outcome.issue is not None:
            _report_layout(interp, outcome.issue, factors, axis, node, op_name, eq_text)
    else:
        base = infer_axis(ops, Linearity.MULTILINEAR)
        if isinstance(base, AxisError):
            _report_axis_error(interp, base, factors + scalars, ops, axis, node, Linearity.MULTILINEAR, op_name)
            return FAILED, None
        product = AxisType(base)
    # pending sums entering the product
    pending = [t.is_pending for t in types]
    if any(pending) and product.kind is Kind.V:
        shadow = shadow_partial_check(_operands(factors, axis), pending, Linearity.MULTILINEAR)
        origin = next(t.pending for t in types if t.is_pending)
        if isinstance(shadow, AxisError):
            _report_pending(interp, shadow, origin, axis, node, op_name, factors, pending)
            product = AxisType(Kind.V)
        elif not product.is_pending:
            product = AxisType(Kind.V, pending=origin)
    if not bias:
        return product, rank
    # F.linear(x, w, b) / addmm(b, m1, m2): linear(product, bias)
    bias_slot = bias[0]
    bias_type = bias_slot.value.type[axis]  # type: ignore[union-attr]
    combo = [Operand(product.kind, GradState.UNKNOWN), Operand(bias_type.kind, bias_slot.value.grad)]  # type: ignore[union-attr]
    total = infer_axis(combo, Linearity.LINEAR)
    if isinstance(total, AxisError):
        _report_axis_error(interp, total, [_ProductSlot(node), bias_slot], combo, axis, node, Linearity.LINEAR, op_name)
        return FAILED, rank
    if product.is_pending:
        shadow = shadow_partial_check(combo, [True, bias_type.is_pending], Linearity.LINEAR)
        if isinstance(shadow, AxisError):
            _report_pending(
                interp,
                shadow,
                product.pending,
                axis,
                node,
                op_name + " (bias)",  # type: ignore[arg-type]
                [_ProductSlot(node), bias_slot],
                [True, bias_type.is_pending],
                bias_node=bias_slot.node,
            )
            return AxisType(Kind.V), rank
        return product, rank
    if total is Kind.V:
        shard = product.shard if bias_type.kind is not Kind.V or bias_type.shard is not None else None
        return AxisType(Kind.V, shard=shard), rank
    return AxisType(total), rank


class _ProductSlot(Slot):
    """The product inside `F.linear(x, w, b)`, as an operand of the bias add."""

    def __init__(self, node: cst.CSTNode) -> None:
        super().__init__(None, node, "<product>")  # type: ignore[arg-type]


def _equation(
    interp: Analysis, rule: OpRule, bound: Bound, factors: list[Slot], node: cst.CSTNode
) -> tuple[einsum.Equation | None, str]:
    """The op's equation over `factors`, or None when it cannot be known (an operand we could not model)."""
    kind = rule.contraction or ""
    if kind == "einsum":
        first = rule.params[0].name if rule.params else "equation"
        value = bound.get(first)
        if not (isinstance(value, Literal) and isinstance(value.value, str)):
            return None, "?"
        given = sum(len(bound.all(p.name)) for p in rule.params[1:] if p.role is not ParamRole.OTHER)
        try:
            equation = einsum.parse_equation(value.value, given)
        except einsum.EinsumError as exc:
            interp.report(Finding.of(MalformedEinsum(str(exc)), node))
            return None, value.value
        return (equation if given == len(factors) else None), value.value
    ranks = [_operand_rank(s, kind) for s in factors]
    text = einsum.equation_for(kind, ranks)
    if text is None:
        return None, kind
    try:
        return einsum.parse_equation(text, len(factors)), text
    except einsum.EinsumError:
        return None, text


def _operand_rank(slot: Slot, kind: str) -> int | None:
    """An operand's rank; for `@`/matmul an unknown one is taken to be 2 when its shard dims allow it.

    Like `.T`, a matmul operand is in practice a matrix (an activation [tokens, features] or a weight);
    placing a positive shard dim in batch dims of a guessed rank loses the contraction.
    """
    value = slot.value
    if not isinstance(value, TensorValue):
        return None
    if value.rank is not None or kind != "matmul":
        return value.rank
    shards = [t.shard for t in value.type.values() if t.shard is not None]
    return 2 if all(d in (0, 1, -1, -2) for d in shards) else None


def _report_missing(interp: Analysis, slot: Slot, axis: str, node: cst.CSTNode, op_name: str) -> None:
    has = tuple(slot.value.type) if slot.value is not None else ()
    interp.report(Finding.of(MissingAxis(op_name, describe_slot(interp, slot), axis, has), node))


def render_fix_call(interp: Analysis, api: str, operand: str, axis: str, src: str, dst: str) -> str:
    alias = interp.ctx.spmd_alias
    # an opaque group axis `<group>` is spelled by the parameter that holds the group
    spelled = axis[1:-1] if axis.startswith("<") and axis.endswith(">") else repr(axis)
    return f"{alias}.{api}({operand}, {spelled}, src={type_spelling(interp, src)}, dst={type_spelling(interp, dst)})"


def type_spelling(interp: Analysis, letter: str) -> str:
    """How this file can spell a type constant: `R` if imported by name, else `spmd.R`."""
    base = letter.split("(")[0]
    value = interp.lookup(base)
    from spmdcheck.analysis.values import ModuleRef

    if isinstance(value, ModuleRef) and value.qualname.startswith("spmd_types"):
        return letter
    return f"{interp.ctx.spmd_alias}.{letter}"


def megatron_spelling(interp: Analysis, api: str, src: str, dst: str, axis: str, operand: str) -> str | None:
    """A Megatron mapping with this exact typing, if the file uses Megatron and the stubs know one."""
    if not interp.ctx.megatron_names:
        return None
    for rule in interp.ctx.registry.rules.values():
        for m in rule.mappings:
            if m.op == api and str(m.src) == src and str(m.dst) == dst and m.axis == axis and not m.when:
                return f"{_local_spelling(interp, rule.qualname)}({operand})"
    return None


def _local_spelling(interp: Analysis, qualname: str) -> str:
    """How this file can name `qualname`: through its own import of the function or of a module re-exporting it."""
    registry = interp.ctx.registry
    short = qualname.rsplit(".", 1)[-1]
    for imported, local in interp.ctx.megatron_names.items():
        if imported == qualname:
            return local
        if registry.resolve_alias(f"{imported}.{short}") == qualname:
            return f"{local}.{short}"
    return short


def _report_axis_error(
    interp: Analysis,
    err: AxisError,
    slots: list[Slot],
    ops: list[Operand],
    axis: str,
    node: cst.CSTNode,
    linearity: Linearity,
    op_name: str,
) -> None:
    if tp_whole.report(interp, slots, axis, node, op_name):
        return  # a submodule left out of a tensor-parallel plan meets a planned feature shard: a shape error
    operands = tuple(
        (describe_slot(interp, s), "Scalar" if s.value is None else _described_type(s.value, axis))
        for s in slots
        if not isinstance(s, _ProductSlot)
    )
    product = str(ops[0].kind) if any(isinstance(s, _ProductSlot) for s in slots) else None
    violation = AXIS_RULE_VIOLATIONS[err.rule](op_name, axis, operands, product)
    suggestions: list[Suggestion] = []
    for fix in suggest_fixes(ops, linearity):
        slot = slots[fix.operand]
        if isinstance(slot, _ProductSlot) or slot.value is None:
            continue
        operand = interp.ctx.code_of(slot.node)
        cand = fix.candidate
        call = render_fix_call(interp, cand.api, operand, axis, str(cand.src), str(cand.dst))
        title = axis_fix_title(cand.api, cand.src.name, operand, str(cand.forward), str(cand.backward))
        suggestions.append(Suggestion(title, call, slot.node))
        meg = megatron_spelling(interp, cand.api, str(cand.src), str(cand.dst), axis, operand)
        if meg is not None:
            suggestions.append(Suggestion(megatron_fix_title(str(cand.forward), str(cand.backward)), meg, slot.node))
    if err.rule is Rule.INVARIANT_MIX:
        suggestions[:0] = dtensor_fixes(interp, slots, axis)  # the DTensor spelling first: where the I came from
    interp.report(Finding.of(violation, node, suggestions))


def _described_type(value: TensorValue | ScalarValue, axis: str) -> str:
    """An operand's type on `axis` in a message; an Invariant made at a DTensor boundary names it."""
    t = str(value.type[axis])
    entry = next((b for b in getattr(value, "boundary", ()) if b[0] == axis), None)
    if entry is None:
        return t
    return f"{t}, Replicate() with gradient placement Replicate() from `{entry[2]}()` at {{site:{entry[1]}}}"


def _report_pending(
    interp: Analysis,
    err: AxisError,
    origin: Site,
    axis: str,
    node: cst.CSTNode,
    op_name: str,
    slots: list[Slot],
    pending: list[bool],
    bias_node: cst.CSTNode | None = None,
) -> None:
    slot = next(s for s, p in zip(slots, pending) if p)
    of_product = isinstance(slot, _ProductSlot)
    operand = None if of_product else interp.ctx.code_of(slot.node)
    violation = PendingSumMisuse(axis, origin.ref, operand, op_name, err.rule, of_product=of_product)
    suggestions = []
    if operand is not None:
        suggestions.append(
            Suggestion(violation.fix_title, render_fix_call(interp, "all_reduce", operand, axis, "V", "I"), slot.node)
        )
        suggestions.append(
            Suggestion(
                PendingSumMisuse.KEEP_REPLICATE_TITLE,
                render_fix_call(interp, "all_reduce", operand, axis, "V", "R"),
                slot.node,
            )
        )
    elif isinstance(node, cst.Call) and bias_node is not None:
        suggestions.append(
            Suggestion(
                violation.fix_title,
                f"{render_fix_call(interp, 'all_reduce', _without_arg(interp, node, bias_node), axis, 'V', 'I')}"
                f" + {interp.ctx.code_of(bias_node)}",
                node,
            )
        )
    interp.report(Finding.of(violation, node, suggestions))


def _without_arg(interp: Analysis, call: cst.Call, arg_value: cst.CSTNode) -> str:
    args = [a for a in call.args if a.value is not arg_value]
    if args:
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    return interp.ctx.code_of(call.with_changes(args=args))


def _report_layout(
    interp: Analysis,
    issue: einsum.LayoutIssue,
    slots: list[Slot],
    axis: str,
    node: cst.CSTNode,
    op_name: str,
    eq_text: str,
) -> None:
    operands = tuple((describe_slot(interp, s), str(s.value.type[axis])) for s in slots)  # type: ignore[union-attr]
    if issue.kind == "split":
        whole = slots[issue.operand]
        sharded = next(
            s for s in slots if s is not whole and s.value is not None and s.value.type[axis].shard is not None
        )
        violation = ShardedDimMismatch(
            op_name, eq_text, issue.label, axis, describe_slot(interp, sharded), describe_slot(interp, whole), operands
        )
        operand = interp.ctx.code_of(sharded.node)
        shard = sharded.value.type[axis].shard  # type: ignore[union-attr]
        suggestion = Suggestion(
            violation.fix_title,
            render_fix_call(interp, "all_gather", operand, axis, f"S({shard})", "R"),
            sharded.node,
        )
        interp.report(Finding.of(violation, node, [suggestion]))
        return
    labels = () if issue.kind == "diag" else tuple(issue.label.split(","))
    mixed = MixedShardLayout(op_name, eq_text, axis, labels, operands)
    suggestions = []
    first = next((s for s in slots if s.value is not None and s.value.type[axis].shard is not None), None)
    if first is not None and issue.kind == "mixed":
        operand = interp.ctx.code_of(first.node)
        shard = first.value.type[axis].shard  # type: ignore[union-attr]
        suggestions.append(
            Suggestion(
                mixed.fix_title,
                render_fix_call(interp, "all_gather", operand, axis, f"S({shard})", "R"),
                first.node,
            )
        )
    interp.report(Finding.of(mixed, node, suggestions))


def _inplace(interp: Analysis, rule: OpRule, bound: Bound, result: TensorValue, node: cst.CSTNode) -> None:
    targets = []
    if rule.inplace_param is not None:
        targets.append((bound.get(rule.inplace_param), bound.node(rule.inplace_param)))
    out = bound.get("out")
    if out is not None:
        targets.append((out, bound.node("out")))
    for value, target_node in targets:
        if not isinstance(value, TensorValue):
            continue
        check_mutation(interp, value, result, target_node, node, InplaceTypeChange, short_name(rule.qualname))


def check_mutation(
    interp: Analysis,
    old: TensorValue,
    new: TensorValue,
    target_node: cst.CSTNode | None,
    node: cst.CSTNode,
    write: type[TypeChangingWrite],
    op_name: str,
) -> None:
    """An in-place write must keep the destination's type (R/I -> V allowed on a no-grad buffer).

    `write` is the violation a type change is: InplaceTypeChange (an in-place op, out=) or
    SetitemTypeChange (`x[...] = y`).
    """
    merged = dict(old.type)
    for axis in sorted(set(old.type) | set(new.type)):
        before, after = old.type.get(axis), new.type.get(axis)
        if after is None:
            continue
        if before is None or before.kind is after.kind:
            merged[axis] = (
                after
                if before is None or before.kind is not Kind.V
                else AxisType(
                    Kind.V, shard=before.shard if before.shard == after.shard else None, pending=after.pending
                )
            )
            continue
        if before.kind in (Kind.R, Kind.I) and after.kind is Kind.V and old.grad is GradState.NO:
            merged[axis] = after
            continue
        target = interp.ctx.code_of(target_node) if target_node is not None else "the destination"
        interp.report(Finding.of(write(op_name, target, axis, before, after), node))
        # the write is reported once; what the destination holds now is unknown on this axis: no cascade
        merged.pop(axis, None)
    interp.rebind(
        target_node, TensorValue(SpmdType(merged), old.grad if new.grad is GradState.UNKNOWN else new.grad, old.rank)
    )


__all__ = ["apply_op", "check_mutation", "short_name", "render_fix_call", "type_spelling", "ScalarValue"]
