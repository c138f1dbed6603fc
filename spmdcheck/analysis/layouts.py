"""Layouts and module contracts as values: what a @layout or @module_contract call builds, what its fields
state per axis, and the checks made where a contract is written (torchtitan's `SpmdLayout` and
`ShardingConfig`).

What each constructor field means comes from the stub decorator (`rules.model.ContractRule`), never from a
framework's names here. A contract object is checked where it is written: each src -> dst pair by the
conversion the stub names, and a pending sum must have a destination. Everything here needs only the
`Analysis` interface (transfer.py builds these objects); how a contract reaches a module and what it does to
the module's calls is contracts.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

from spmdcheck.analysis import comms
from spmdcheck.analysis.binding import Arg, bind
from spmdcheck.analysis.context import Analysis
from spmdcheck.analysis.findings import Finding
from spmdcheck.analysis.typeexpr import TypeExprError, is_opaque_axis, merge_type_dicts, type_dict
from spmdcheck.analysis.values import (
    UNKNOWN,
    ClassValue,
    ContractValue,
    DictValue,
    InstanceValue,
    LayoutChoice,
    LayoutValue,
    LazyImport,
    Literal,
    ModuleRef,
    Seq,
    TensorValue,
    TypeValue,
    Value,
    layout_options,
)
from spmdcheck.diagnostics.violations.contracts import ContractInputWithoutSource, UnreducedContractOutput
from spmdcheck.lattice import AxisType, GradState, Kind, S, SpmdType
from spmdcheck.rules.model import OpRule

Axes = dict[str, AxisType]


def rule_of(interp: Analysis, func: Value) -> OpRule | None:
    """The @layout / @module_contract rule of a callee (a stub class, or the checked class the stub describes)."""
    if isinstance(func, LazyImport):
        qual = f"{func.module}.{func.name}"
    elif isinstance(func, ModuleRef):
        qual = func.qualname
    elif isinstance(func, ClassValue):
        module = getattr(getattr(func.scope, "ctx", None), "module_file", None)
        if module is None or func.outer is not None:
            return None
        qual = f"{module.name}.{func.name}"
    else:
        return None
    registry = interp.ctx.registry
    rule = registry.lookup(registry.resolve_alias(qual))
    if rule is None or (rule.layout is None and rule.contract is None):
        return None
    return rule


def build(interp: Analysis, rule: OpRule, args: list[Arg], node: cst.CSTNode) -> Value:
    """A call of a @layout or @module_contract class: the object it builds (a contract is checked here)."""
    bound = bind(rule, args)
    if rule.layout is not None:
        parts = [bound.get(rule.layout.types) or UNKNOWN]
        spec = bound.get(rule.layout.partition_spec) if rule.layout.partition_spec else None
        if spec is not None and spec != Literal(None):
            parts.append(_spec_dict(spec, bound.node(rule.layout.partition_spec or "") or node))
        return LayoutValue(tuple(parts), node)
    contract = rule.contract
    assert contract is not None
    fields = []
    for role in ("state", "in_src", "in_dst", "out_src", "out_dst"):
        param = getattr(contract, role)
        value = bound.get(param) if param else None
        if value is not None:
            fields.append((role, value, bound.node(param)))
    built = ContractValue(contract, tuple(fields), node)
    check_written(interp, built)
    return built


def _spec_dict(spec: Value, node: cst.CSTNode) -> Value:
    """A PartitionSpec-like tuple `(DP, (CP, TP), None)`: the axes at position i shard dim i."""
    if isinstance(spec, DictValue):
        return spec  # spmd.PartitionSpec(...) already read as {axis: S(i)}
    if not isinstance(spec, Seq):
        return UNKNOWN
    items = []
    for dim, entry in enumerate(spec.items):
        for name in entry.items if isinstance(entry, Seq) else (entry,):
            if not (isinstance(name, Literal) and name.value is None):
                items.append((name, TypeValue(S(dim)), node))
    return DictValue(tuple(items))


def layout_axes(interp: Analysis, value: Value | None) -> Axes | None:
    """The axes a layout states (those of the mesh; a layout may name more): None when it cannot be read.
    Of a choice of layouts: the axes on which every option states the same type (the others are unknown)."""
    if isinstance(value, LayoutChoice):
        each = [layout_axes(interp, option) for option in value.options]
        if any(axes is None for axes in each):
            return None
        first = each[0]
        agreed = {a: t for a, t in first.items() if all(other.get(a) == t for other in each[1:])}  # type: ignore[union-attr]
        return agreed or None
    if value is None or (isinstance(value, Literal) and value.value is None):
        return None
    parts = value.parts if isinstance(value, LayoutValue) else (value,)
    try:
        merged = merge_type_dicts([type_dict(p) for p in parts])
    except TypeExprError:
        return None
    if merged.bare is not None:
        return None
    known = interp.ctx.known_axes
    axes = {a: t for a, t in merged.axes.items() if not known or a in known or is_opaque_axis(a)}
    return axes or None


def named_layouts(value: Value | None) -> dict[str, Value]:
    """A `{name: layout}` field (state, inputs) with string keys: the entries the checker can read."""
    if not isinstance(value, DictValue):
        return {}
    return {k.value: v for k, v, _ in value.items if isinstance(k, Literal) and isinstance(k.value, str)}


def check_written(interp: Analysis, contract: ContractValue) -> None:
    """Where a contract is written: each src -> dst pair must be a move its redistribution allows, and a
    pending sum must have somewhere to go."""
    registry = interp.ctx.registry
    conversion = registry.lookup(registry.resolve_alias(contract.rule.redistribute))
    coll = conversion.collective if conversion is not None else None
    src_in, dst_in = contract.get("in_src"), contract.get("in_dst")
    if dst_in is not None:
        readable = src_in is None or isinstance(src_in[0], DictValue) or _is_none(src_in[0])
        sources = named_layouts(src_in[0]) if src_in is not None else {}
        for name, dst in named_layouts(dst_in[0]).items():
            if name in sources:
                _check_pair(interp, coll, sources[name], dst, dst_in[1], f"input `{name}`")
            elif contract.rule.dst_needs_src and readable and not _names_unknown_keys(src_in):
                interp.report(Finding.of(ContractInputWithoutSource(name), dst_in[1] or contract.node))
    out_src, out_dst = contract.get("out_src"), contract.get("out_dst")
    if out_src is None:
        return
    src_axes = layout_axes(interp, out_src[0])
    if src_axes is None:
        return
    pending = sorted(a for a, t in src_axes.items() if t.kind is Kind.P)
    # each layout the destination may be (a condition chooses it) must give the pending sum somewhere to go
    for dst in layout_options(out_dst[0]) if out_dst is not None else (None,):
        dst_axes = layout_axes(interp, dst)
        if dst is not None and dst_axes is None and not _is_none(dst):
            continue  # a destination the checker cannot read: it may reduce the sum
        unreduced = [a for a in pending if dst_axes is None or a not in dst_axes]
        for axis in unreduced:
            interp.report(Finding.of(UnreducedContractOutput(axis), out_src[1] or contract.node))
        if unreduced:
            break  # reported once, not once per layout the destination may be
        if out_dst is not None and dst_axes is not None:
            _check_pair(interp, coll, out_src[0], dst, out_dst[1], "output")


def _is_none(value: Value) -> bool:
    return isinstance(value, Literal) and value.value is None


def _names_unknown_keys(field: tuple[Value, object] | None) -> bool:
    """Whether an in_src dict has a key the checker cannot read (it may name the input)."""
    if field is None or not isinstance(field[0], DictValue):
        return False
    return any(not (isinstance(k, Literal) and isinstance(k.value, str)) for k, _, _ in field[0].items)


def _check_pair(interp: Analysis, coll, src: Value, dst: Value, node: cst.CSTNode | None, what: str) -> None:  # noqa: ANN001
    if coll is None or node is None:
        return
    src_axes, dst_axes = layout_axes(interp, src), layout_axes(interp, dst)
    if src_axes is None or dst_axes is None:
        return
    for axis in sorted(src_axes.keys() & dst_axes.keys()):
        comms.check_transition(interp, coll, src_axes[axis], dst_axes[axis], node, f"redistribute of the {what}")


@dataclass
class MethodContract:
    """What a module contract says about its `forward`."""

    params: dict[str, Axes]  # what forward receives (in_dst, else in_src)
    state: dict[str, Axes]
    returns: Axes | None  # out_src
    where: cst.CSTNode | None
    sources: dict[str, Axes] = field(default_factory=dict)  # what the caller must pass (in_src)
    delivered: Axes | None = None  # what the caller receives (out_dst, else out_src)


def method_contract(interp: Analysis, contract: ContractValue) -> MethodContract:
    params: dict[str, Axes] = {}
    sources: dict[str, Axes] = {}
    for role in ("in_src", "in_dst"):  # dst where given, else src
        written = contract.get(role)
        for name, layout in named_layouts(written[0] if written else None).items():
            axes = layout_axes(interp, layout)
            if axes:
                params[name] = axes
                if role == "in_src":
                    sources[name] = axes
    state: dict[str, Axes] = {}
    written = contract.get("state")
    for name, layout in named_layouts(written[0] if written else None).items():
        axes = layout_axes(interp, layout)
        if axes:
            state[name] = axes
    out, dst = contract.get("out_src"), contract.get("out_dst")
    returns = layout_axes(interp, out[0]) if out is not None else None
    delivered = layout_axes(interp, dst[0]) if dst is not None else returns
    return MethodContract(params, state, returns, contract.node, sources, delivered)


def typed_state(
    receiver: Value,
    contract: MethodContract,
    parameters_only: bool = False,
    remember: Callable[[InstanceValue, str], None] | None = None,
) -> None:
    """The module's parameters and buffers (or only its parameters) as its contract lays them out; `remember`
    is told of each write first (a module shared by other checks gets its attributes back afterwards)."""
    if not isinstance(receiver, InstanceValue):
        return
    for name, axes in contract.state.items():
        have = receiver.attrs.get(name)
        if parameters_only and not (isinstance(have, TensorValue) and have.grad is GradState.YES):
            continue
        if have is None or have is UNKNOWN or (isinstance(have, TensorValue) and not have.typed):
            rank = have.rank if isinstance(have, TensorValue) else None
            if remember is not None:
                remember(receiver, name)
            receiver.attrs[name] = TensorValue(SpmdType(axes), GradState.UNKNOWN, rank, leaf=True)


def field(value: ContractValue | LayoutValue, attr: str) -> Value:
    """`config.state_shardings`, `layout.axis_types`: the field as written (a layout's first part is its types)."""
    if isinstance(value, LayoutValue):
        return value.parts[0] if attr == "axis_types" and value.parts else UNKNOWN
    for role in ("state", "in_src", "in_dst", "out_src", "out_dst"):
        if getattr(value.rule, role) == attr:
            found = value.get(role)
            return found[0] if found is not None else Literal(None)
    return UNKNOWN
