"""Module contracts declared as data: a @layout class is a per-axis type, a @module_contract class a module's
sharding contract (torchtitan's `SpmdLayout` and `ShardingConfig`).

What each constructor field means comes from the stub decorator (`rules.model.ContractRule`), never from a
framework's names here. A contract object is checked where it is written (each src -> dst pair by the
conversion the stub names; a pending sum with no destination), and once it reaches a module class (through an
attribute the stub names, on the module or its nested config class) that module's `forward` is checked on it:
its arguments typed by the dst layouts (src where no dst is given), its parameters and buffers by the state
layouts, its returned value against out_src.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from spmdcheck.analysis import comms
from spmdcheck.analysis.binding import Arg, bind
from spmdcheck.analysis.findings import Finding
from spmdcheck.analysis.typeexpr import TypeExprError, is_opaque_axis, merge_type_dicts, type_dict
from spmdcheck.analysis.values import (
    UNKNOWN,
    ClassValue,
    ContractValue,
    DictValue,
    FunctionValue,
    InstanceValue,
    LayoutValue,
    LazyImport,
    Literal,
    ModuleRef,
    Seq,
    TensorValue,
    TypeValue,
    Value,
)
from spmdcheck.lattice import AxisType, GradState, Kind, S, SpmdType
from spmdcheck.rules.model import OpRule

if TYPE_CHECKING:
    from spmdcheck.analysis.interpreter import Interpreter

Axes = dict[str, AxisType]


def rule_of(interp: Interpreter, func: Value) -> OpRule | None:
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


def build(interp: Interpreter, rule: OpRule, args: list[Arg], node: cst.CSTNode) -> Value:
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


def layout_axes(interp: Interpreter, value: Value | None) -> Axes | None:
    """The axes a layout states (those of the mesh; a layout may name more): None when it cannot be read."""
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


def check_written(interp: Interpreter, contract: ContractValue) -> None:
    """Where a contract is written: each src -> dst pair must be a move its redistribution allows, and a
    pending sum must have somewhere to go."""
    registry = interp.ctx.registry
    conversion = registry.lookup(registry.resolve_alias(contract.rule.redistribute))
    coll = conversion.collective if conversion is not None else None
    src_in, dst_in = contract.get("in_src"), contract.get("in_dst")
    if src_in is not None and dst_in is not None:
        sources = named_layouts(src_in[0])
        for name, dst in named_layouts(dst_in[0]).items():
            if name in sources:
                _check_pair(interp, coll, sources[name], dst, dst_in[1], f"input `{name}`")
    out_src, out_dst = contract.get("out_src"), contract.get("out_dst")
    if out_src is None:
        return
    src_axes = layout_axes(interp, out_src[0])
    if src_axes is None:
        return
    dst_axes = layout_axes(interp, out_dst[0]) if out_dst is not None else None
    if out_dst is not None and dst_axes is None and not (isinstance(out_dst[0], Literal) and out_dst[0].value is None):
        return  # a destination the checker cannot read: it may reduce the sum
    for axis, t in sorted(src_axes.items()):
        if t.kind is Kind.P and (dst_axes is None or axis not in dst_axes):
            interp.report(
                Finding(
                    "SPMD405",
                    out_src[1] or contract.node,
                    f"the module's output is a pending sum on axis {axis!r} (out_src) and the contract gives it no "
                    f"destination on that axis: nothing reduces it",
                    severity="warning",
                )
            )
    if out_dst is not None and dst_axes is not None:
        _check_pair(interp, coll, out_src[0], out_dst[0], out_dst[1], "output")


def _check_pair(interp: Interpreter, coll, src: Value, dst: Value, node: cst.CSTNode | None, what: str) -> None:  # noqa: ANN001
    if coll is None or node is None:
        return
    src_axes, dst_axes = layout_axes(interp, src), layout_axes(interp, dst)
    if src_axes is None or dst_axes is None:
        return
    for axis in sorted(src_axes.keys() & dst_axes.keys()):
        comms.check_transition(interp, coll, src_axes[axis], dst_axes[axis], node, f"redistribute of the {what}")


# ----------------------------------------------------------------------------- reaching a module


def attach(interp: Interpreter, owner: Value, attr: str, value: Value) -> None:
    """`obj.<attr> = contract`, `Cls.Config(<attr>=contract)`, `<attr> = contract` in a class body."""
    if not isinstance(value, ContractValue) or attr not in value.rule.attach:
        return
    cls = owner.cls if isinstance(owner, InstanceValue) else owner
    if not isinstance(cls, ClassValue):
        return
    module = cls.outer if cls.outer is not None and cls.lookup("forward") is None else cls
    contracts: dict[int, ContractValue] = interp.contracts
    if contracts.get(id(module)) == value:
        return
    contracts[id(module)] = value
    forward = module.lookup("forward")
    if isinstance(forward, FunctionValue) and id(forward.node) in interp.checked_nodes:
        # already checked without its contract: check it again, now that the contract is known
        interp.functions.append((forward.node, forward.scope, module))


def attach_from_call(interp: Interpreter, cls: ClassValue, args: list[Arg]) -> None:
    """`Linear.Config(..., sharding_config=ShardingConfig(...))`."""
    for keyword, value, _ in args:
        if keyword is not None and isinstance(value, ContractValue):
            attach(interp, cls, keyword, value)


def attach_from_body(interp: Interpreter, cls: ClassValue) -> None:
    for name, value in cls.namespace.items():
        if isinstance(value, ContractValue):
            attach(interp, cls, name, value)


@dataclass
class MethodContract:
    """What a module contract says about its `forward`."""

    params: dict[str, Axes]  # what forward receives (in_dst, else in_src)
    state: dict[str, Axes]
    returns: Axes | None  # out_src
    where: cst.CSTNode | None
    sources: dict[str, Axes] = field(default_factory=dict)  # what the caller must pass (in_src)
    delivered: Axes | None = None  # what the caller receives (out_dst, else out_src)


def for_forward(interp: Interpreter, owner: ClassValue | None, fn: cst.FunctionDef) -> MethodContract | None:
    if owner is None or fn.name.value != "forward":
        return None
    contract = next((interp.contracts[id(c)] for c in owner.mro() if id(c) in interp.contracts), None)
    if contract is None:
        return None
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


def call_module(
    interp: Interpreter, module: InstanceValue, forward: FunctionValue, args: list[Arg], node: cst.CSTNode
) -> Value | None:
    """`self.w2(h)` on a module with a contract, as its `parallelize` wrapper runs it: each argument must be
    its in_src layout (SPMD403 here), forward receives the in_dst layout, the caller gets out_dst. None: the
    module has no contract the checker knows."""
    from spmdcheck.analysis import calls, spmd_api

    contract = for_forward(interp, module.cls, forward.node)
    if contract is None:
        return None
    typed_state(module, contract)
    names = [p.name.value for p in (*forward.node.params.posonly_params, *forward.node.params.params)][1:]
    routed: list[Arg] = []
    position = 0
    for keyword, value, arg_node in args:
        name = keyword if keyword not in (None, "*") else None
        if keyword is None:
            name = names[position] if position < len(names) else None
            position += 1
        if name in contract.sources and isinstance(value, TensorValue):
            spmd_api.refine(
                interp, value, contract.sources[name], arg_node, "SPMD403", f"argument `{name}` (the contract's in_src)"
            )
        if name in contract.params and (value is UNKNOWN or isinstance(value, TensorValue)):
            grad = value.grad if isinstance(value, TensorValue) else GradState.UNKNOWN
            rank = value.rank if isinstance(value, TensorValue) else None
            value = TensorValue(SpmdType(contract.params[name]), grad, rank)
        routed.append((keyword, value, arg_node))
    result = calls.call_function(interp, forward, routed, node, receiver=module)
    if contract.delivered and (result is UNKNOWN or isinstance(result, TensorValue)):
        grad = result.grad if isinstance(result, TensorValue) else GradState.UNKNOWN
        return TensorValue(SpmdType(contract.delivered), grad, None)
    return result


def typed_state(receiver: Value, contract: MethodContract) -> None:
    """The module's parameters and buffers as its contract lays them out."""
    if not isinstance(receiver, InstanceValue):
        return
    for name, axes in contract.state.items():
        have = receiver.attrs.get(name)
        if have is None or have is UNKNOWN or (isinstance(have, TensorValue) and not have.typed):
            rank = have.rank if isinstance(have, TensorValue) else None
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
