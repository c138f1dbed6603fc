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

from collections.abc import Callable
from dataclasses import dataclass, field
from dataclasses import field as _dc_field
from typing import TYPE_CHECKING

import libcst as cst

from spmdcheck.analysis import comms, writes
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


def check_written(interp: Interpreter, contract: ContractValue) -> None:
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
                interp.report(
                    Finding(
                        "SPMD406",
                        dst_in[1] or contract.node,
                        f"input `{name}` has a destination layout (in_dst) but no source layout (in_src): the "
                        "module's wrapper cannot redistribute it and refuses the call",
                    )
                )
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
            interp.report(
                Finding(
                    "SPMD405",
                    out_src[1] or contract.node,
                    f"the module's output is a pending sum on axis {axis!r} (out_src) and the contract gives it no "
                    f"destination on that axis: nothing reduces it",
                    severity="warning",
                )
            )
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
    if isinstance(owner, InstanceValue) and id(owner) in _slots(interp).slot_of:
        _attach_slot(interp, owner, value)  # the config of one field: its module only, not every one of its class
        return
    cls = owner.cls if isinstance(owner, InstanceValue) else owner
    if not isinstance(cls, ClassValue):
        return
    module = cls.outer if cls.outer is not None and cls.lookup("forward") is None else cls
    contracts: dict[int, ContractValue] = interp.contracts
    if contracts.get(id(module)) == value:
        return
    contracts[id(module)] = value
    if interp.log is not None:  # every root checked later sees the contract
        interp.log.wrote_shared(("contract", writes.class_name(module), writes.describe(value)))
    forward = module.lookup("forward")
    if isinstance(forward, FunctionValue) and id(forward.node) in interp.checked_nodes:
        # already checked without its contract: check it again, now that the contract is known
        interp.functions.append((forward.node, forward.scope, module, None))


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
    return method_contract(interp, contract)


def method_contract(interp: Interpreter, contract: ContractValue) -> MethodContract:
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
    from spmdcheck.analysis import calls

    from_slot = slot_contract(interp, module) if forward.node.name.value == "forward" else None
    if from_slot is not None:
        contract: MethodContract | None = method_contract(interp, from_slot)
    else:
        contract = for_forward(interp, module.cls, forward.node)
    if contract is None:
        return None
    # a field's module gets its parameters typed, not its buffers: torchtitan's RoPE cache, typed R by its
    # contract, reaches `local_map(out_types={dp: S(0), ...})` returns (spmd_types 0.3.1 itself rejects that R
    # there, so the cache cannot be typed so at run time by the path the checker follows)
    typed_state(module, contract, parameters_only=from_slot is not None, remember=interp.remember_attr)
    names = [p.name.value for p in (*forward.node.params.posonly_params, *forward.node.params.params)][1:]
    routed: list[Arg] = []
    position = 0
    for keyword, value, arg_node in args:
        name = keyword if keyword not in (None, "*") else None
        if keyword is None:
            name = names[position] if position < len(names) else None
            position += 1
        _check_source(interp, contract, name, value, arg_node)
        if name in contract.params and (value is UNKNOWN or isinstance(value, TensorValue)):
            grad = value.grad if isinstance(value, TensorValue) else GradState.UNKNOWN
            rank = value.rank if isinstance(value, TensorValue) else None
            value = TensorValue(SpmdType(contract.params[name]), grad, rank)
        routed.append((keyword, value, arg_node))
    result = calls.call_function(interp, forward, routed, node, receiver=module)
    if from_slot is not None and contract.returns:
        calls.check_declared(interp, result, contract.returns, node, "SPMD402", "returned value (out_src)")
    if contract.delivered and (result is UNKNOWN or isinstance(result, TensorValue)):
        grad = result.grad if isinstance(result, TensorValue) else GradState.UNKNOWN
        return TensorValue(SpmdType(contract.delivered), grad, None)
    return result


def call_opaque_module(interp: Interpreter, module: InstanceValue, args: list[Arg]) -> Value | None:
    """A call of a module built from a typed config field whose `forward` the checked code does not define
    (it comes from a library base: `class Linear(nn.Linear, Module)`): its contract alone says what it takes
    and gives. The arguments are checked against in_src (by keyword, or the only positional argument when
    in_src names one input), the caller gets out_dst (else out_src). None: no contract reached the module."""

    found = slot_contract(interp, module)
    if found is None:
        return None
    contract = method_contract(interp, found)
    positional = [a for a in args if a[0] is None]
    only = next(iter(contract.sources)) if len(contract.sources) == 1 and len(positional) == 1 else None
    for keyword, value, arg_node in args:
        _check_source(interp, contract, keyword if keyword not in (None, "*") else only, value, arg_node)
    if not contract.delivered:
        return None
    return TensorValue(SpmdType(contract.delivered), GradState.UNKNOWN, None)  # its weights decide the gradient


def _check_source(
    interp: Interpreter, contract: MethodContract, name: str | None, value: Value, node: cst.CSTNode
) -> None:
    """An argument the caller passes must be the contract's in_src layout for it (SPMD403 at the argument)."""
    from spmdcheck.analysis import spmd_api

    if name in contract.sources and isinstance(value, TensorValue):
        spmd_api.refine(
            interp, value, contract.sources[name], node, "SPMD403", f"argument `{name}` (the contract's in_src)"
        )


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


# ----------------------------------------------------------------------------- typed config fields
#
# A module's nested config class (`FeedForward.Config`) is an object the checker can follow statically when its
# fields are typed: `w1: Linear.Config` says that `cfg.w1` configures a `Linear`, and that the module built
# from it (`config.w1.build()`, a builder the contract's stub names) is the one `self.w1` holds. A parameter
# annotated with a config class (also through a class imported only `if TYPE_CHECKING:`) is an object of that
# class; a contract set on `cfg.w1.sharding_config` is recorded for the slot (class of `cfg`, "w1"), and the
# module built from that slot carries it. `assert isinstance(cfg.attention, GQAttention.Config)` narrows a field
# annotated with a base config class. Two different contracts (or classes) for one slot leave it without one.

Slot = tuple[object, str]  # (the parent's slot, or the id of its class when it has none; field name)
_AMBIGUOUS = object()


@dataclass
class ConfigSlots:
    """What the analysis learnt about typed config fields (one per interpreter)."""

    fields: dict[tuple[int, str], tuple[InstanceValue, InstanceValue]] = _dc_field(default_factory=dict)
    slot_of: dict[int, Slot] = _dc_field(default_factory=dict)  # id(config object of a field) -> its slot
    contracts: dict[Slot, object] = _dc_field(default_factory=dict)  # slot -> ContractValue (or _AMBIGUOUS)
    built: dict[int, tuple[InstanceValue, Slot]] = _dc_field(default_factory=dict)  # id(module object) -> its slot
    narrowed: dict[Slot, object] = _dc_field(default_factory=dict)  # slot -> the config class asserted for it
    modules: dict[int, tuple[InstanceValue, InstanceValue]] = _dc_field(default_factory=dict)  # config -> module
    builders: frozenset[str] | None = None
    version: int = 0  # counts the contracts attached to slots: a call summarised before one attached is stale
    classes: dict[int, ClassValue] = _dc_field(default_factory=dict)  # id(class) -> class, for slots' names


def _slots(interp: Interpreter) -> ConfigSlots:
    state = getattr(interp, "config_slots", None)
    if state is None:
        state = ConfigSlots()
        interp.config_slots = state  # type: ignore[attr-defined]
    return state


def is_config_class(cls: Value) -> bool:
    """A class nested in a module class (the module's `Config`), or one deriving from such a class."""
    return isinstance(cls, ClassValue) and any(c.outer is not None for c in cls.mro())


def _class_in(interp: Interpreter, value: Value) -> ClassValue | None:
    if isinstance(value, ClassValue) and is_config_class(value):
        return value
    return None


def annotated_class(interp: Interpreter, ann: cst.BaseExpression, owner: ClassValue | None = None) -> ClassValue | None:
    """The config class an annotation names: `Linear.Config`, `"Llama3Model.Config"`, `Config` (in a method of
    the module), `FeedForward.Config | None`. None when it names something else or several classes."""
    if isinstance(ann, (cst.SimpleString, cst.ConcatenatedString)):
        text = ann.evaluated_value
        if not isinstance(text, str):
            return None
        try:
            ann = cst.parse_expression(text)
        except cst.ParserSyntaxError:
            return None
    if isinstance(ann, cst.BinaryOperation) and isinstance(ann.operator, cst.BitOr):
        parts = [p for p in (ann.left, ann.right) if not (isinstance(p, cst.Name) and p.value == "None")]
        return annotated_class(interp, parts[0], owner) if len(parts) == 1 else None
    if isinstance(ann, cst.Name) and owner is not None:
        found = owner.lookup(ann.value)
        if found is not None:
            return _class_in(interp, found)
    if not isinstance(ann, (cst.Name, cst.Attribute)):
        return None
    value = interp.eval(ann)
    if value is UNKNOWN:
        qualname = _annotation_import(interp, ann)
        value = ModuleRef(qualname) if qualname is not None else UNKNOWN
    if isinstance(value, ModuleRef):
        value = _checked_class(interp, value.qualname)
    return _class_in(interp, value) if value is not None else None


def _annotation_import(interp: Interpreter, ann: cst.BaseExpression) -> str | None:
    """`Llama3Model.Config` where `Llama3Model` is imported only for annotations (`if TYPE_CHECKING:`, a branch
    the run does not take): the qualified name that import gives it."""
    from spmdcheck.program.graph import resolve_import

    parts: list[str] = []
    while isinstance(ann, cst.Attribute):
        parts.insert(0, ann.attr.value)
        ann = ann.value
    if not isinstance(ann, cst.Name):
        return None
    importer = interp.ctx.module_file
    for stmt in interp.ctx.module.body:
        if not isinstance(stmt, cst.If):
            continue
        for line in stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else ():
            for small in line.body if isinstance(line, cst.SimpleStatementLine) else ():
                if not isinstance(small, cst.ImportFrom) or isinstance(small.names, cst.ImportStar):
                    continue
                for alias in small.names:
                    bound = alias.asname.name if alias.asname is not None else alias.name
                    if isinstance(bound, cst.Name) and bound.value == ann.value and isinstance(alias.name, cst.Name):
                        source = interp.ctx.code_of(small.module) if small.module is not None else None
                        module = resolve_import(importer, source, len(small.relative)) if importer else source
                        if module:
                            return ".".join([module, alias.name.value, *parts])
    return None


def _checked_class(interp: Interpreter, qualname: str) -> Value | None:
    """A class of a module of the program named by an import the run did not follow (`if TYPE_CHECKING:` imports, which
    exist for annotations): that module is loaded as its import would load it, and the name looked up in it."""
    importer = interp.importer
    parts = qualname.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:cut])
        if importer is None or importer.kind(module) not in ("checked", "library"):
            continue
        scope = importer.load(module)
        if interp.log is not None:
            interp.log.read(parts[cut])
        found = scope.globals.get(parts[cut]) if scope is not None else None
        value: Value | None = interp.settle(found) if found is not None else None
        for attr in parts[cut + 1 :]:
            value = value.lookup(attr) if isinstance(value, ClassValue) else None
        return value
    return None


def config_parameter(
    interp: Interpreter, ann: cst.Annotation | None, receiver: Value | None, owner: ClassValue | None
) -> Value | None:
    """A parameter annotated with a module's config class and given no value the checker knows: an object of
    that class, its fields typed by their annotations (None: not such a parameter)."""
    if ann is None:
        return None
    cls = receiver.cls if isinstance(receiver, InstanceValue) else owner
    found = annotated_class(interp, ann.annotation, cls)
    if found is None and cls is not owner:
        found = annotated_class(interp, ann.annotation, owner)
    return InstanceValue(found) if found is not None else None


def _field_annotation(cls: ClassValue, name: str) -> tuple[ClassValue, cst.BaseExpression] | None:
    for c in cls.mro():
        for stmt in c.node.body.body if isinstance(c.node.body, cst.IndentedBlock) else ():
            for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                target = small.target if isinstance(small, cst.AnnAssign) else None
                if isinstance(target, cst.Name) and target.value == name:
                    return c, small.annotation.annotation  # type: ignore[union-attr]
    return None


def config_field(interp: Interpreter, base: InstanceValue, attr: str) -> Value | None:
    """`cfg.w1` on a config object whose class types the field as another module's config class: one object
    per (object, field), tagged with its slot. None: not such a field (the attribute reads as before)."""
    if attr in base.attrs or not is_config_class(base.cls):
        return None
    state = _slots(interp)
    if attr in _builders(interp) and id(base) in state.slot_of:
        return ConfigBuilder(base)
    memo = state.fields.get((id(base), attr))
    if memo is not None:
        return memo[1]
    declared = _field_annotation(base.cls, attr)
    if declared is None:
        return None
    declaring, ann = declared
    # the field's path from a config object known by its class: `layer_cfg.feed_forward.w1` is not the `w1`
    # of an MoE's shared experts, though both are `FeedForward.Config.w1`
    parent = state.slot_of.get(id(base))
    if parent is None:
        state.classes[id(base.cls)] = base.cls
    slot = (parent if parent is not None else id(base.cls), attr)
    narrowed = state.narrowed.get(slot)
    if isinstance(narrowed, ClassValue):
        child = InstanceValue(narrowed)
        state.fields[(id(base), attr)] = (base, child)
        state.slot_of[id(child)] = slot
        return child
    scope = declaring.scope
    saved = interp.frame
    restore = interp.enter_scope(scope) if scope is not None else None
    try:
        from spmdcheck.analysis.interpreter import Frame

        interp.frame = Frame({}, scope.globals if scope is not None else saved.globals)
        cls = annotated_class(interp, ann, declaring)
    finally:
        interp.frame = saved
        if restore is not None:
            interp.ctx, interp.scope = restore
    if cls is None:
        return None
    child = InstanceValue(cls)
    state.fields[(id(base), attr)] = (base, child)
    state.slot_of[id(child)] = slot
    return child


def _slot_name(state: ConfigSlots, slot: Slot) -> str | None:
    """A slot as text, the same in every run: its class's name and the path of field names."""
    parent, attr = slot
    base = _slot_name(state, parent) if isinstance(parent, tuple) else writes.class_name(state.classes.get(parent))
    return None if base is None else f"{base}.{attr}"


def narrow_config(interp: Interpreter, test: cst.BaseExpression) -> None:
    """`assert isinstance(cfg, Sub.Config)` on a config object of a typed field whose annotation names a base
    class: the field holds a `Sub.Config`, and the module built from it is a `Sub`. A field narrowed to two
    different classes keeps its annotation."""
    if not (isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "isinstance"):
        return
    if len(test.args) != 2 or any(a.keyword is not None or a.star for a in test.args):
        return
    obj, cls = interp.eval(test.args[0].value), interp.eval(test.args[1].value)
    state = _slots(interp)
    slot = state.slot_of.get(id(obj)) if isinstance(obj, InstanceValue) else None
    if slot is None or not isinstance(cls, ClassValue) or cls is obj.cls or obj.cls not in cls.mro():  # type: ignore[union-attr]
        return
    have = state.narrowed.get(slot)
    if have is cls or have is _AMBIGUOUS:
        return
    state.narrowed[slot] = cls if have is None else _AMBIGUOUS
    if interp.log is not None:
        narrowed = writes.class_name(cls) if have is None else "ambiguous"
        interp.log.wrote_shared(("narrow", _slot_name(state, slot), narrowed))
    if have is None:
        obj.cls = cls  # type: ignore[union-attr]
    # modules already built from this slot were built from the annotation's class: build them again
    for key, built in list(interp._instances.items()):
        if _holds(state, built, slot):
            del interp._instances[key]
            forward = built.cls.lookup("forward")
            if isinstance(forward, FunctionValue) and id(forward.node) in interp.checked_nodes:
                interp.functions.append((forward.node, forward.scope, built.cls, None))


def _attach_slot(interp: Interpreter, owner: InstanceValue, value: ContractValue) -> None:
    state = _slots(interp)
    slot = state.slot_of.get(id(owner))
    if slot is None:
        return
    have = state.contracts.get(slot)
    if have is _AMBIGUOUS or have == value:
        return
    state.contracts[slot] = value if have is None else _AMBIGUOUS
    state.version += 1
    if interp.log is not None:
        attached = writes.describe(value) if have is None else "ambiguous"
        interp.log.wrote_shared(("slot", _slot_name(state, slot), attached))
    # modules already checked with an object built from this slot: check their forward again
    for built in list(interp._instances.values()):
        if _holds(state, built, slot):
            forward = built.cls.lookup("forward")
            if isinstance(forward, FunctionValue) and id(forward.node) in interp.checked_nodes:
                interp.functions.append((forward.node, forward.scope, built.cls, None))


def _holds(state: ConfigSlots, obj: InstanceValue, slot: Slot, depth: int = 4) -> bool:
    """Whether a module object holds (in its attributes, nested) a module built from `slot`."""
    for value in obj.attrs.values():
        if isinstance(value, InstanceValue) and id(value) in state.built:
            if state.built[id(value)][1] == slot or (depth > 0 and _holds(state, value, slot, depth - 1)):
                return True
    return False


def _builders(interp: Interpreter) -> frozenset[str]:
    state = _slots(interp)
    if state.builders is None:
        names: set[str] = set()
        for rule in interp.ctx.registry.rules.values():
            if rule.contract is not None:
                names.update(rule.contract.build)
        state.builders = frozenset(names)
    return state.builders


@dataclass(frozen=True, eq=False)
class ConfigBuilder(Value):
    """`config.w1.build`: the builder of the module a typed config field configures."""

    config: InstanceValue


def build_module(interp: Interpreter, method: Value) -> Value | None:
    """`config.w1.build()` on a config object of a typed field: the module its class configures (its outer
    class), built as its methods are checked, and tagged with the field's slot. None: not such a call."""
    if not isinstance(method, ConfigBuilder):
        return None
    config = method.config
    module_cls = next((c.outer for c in config.cls.mro() if c.outer is not None), None)
    # a module whose `forward` a library base gives (torchtitan's `Linear(nn.Linear, Module)`) is built too:
    # its calls go through its contract alone (`call_opaque_module`)
    if not isinstance(module_cls, ClassValue):
        return None
    slot = _slots(interp).slot_of.get(id(config))
    if slot is None:
        return None
    state = _slots(interp)
    built = state.modules.get(id(config))
    if built is not None:
        return built[1]
    # built from this config object (its `__init__` reads the object's own fields: their slots extend this one)
    module = InstanceValue(module_cls)
    state.modules[id(config)] = (config, module)
    state.built[id(module)] = (module, slot)
    init = module_cls.lookup("__init__")
    if isinstance(init, FunctionValue):
        from spmdcheck.analysis import calls

        calls.call_function(interp, init, [(None, config, init.node)], init.node, receiver=module)
    return module


def slot_key(interp: Interpreter, obj: InstanceValue) -> tuple[Slot, int] | None:
    """What a call summary must know of an object beyond its attributes: the typed-field path of a config
    object (or of a module built from one; two fields' configs build different modules), and how many
    contracts had attached when it was used (a module called before its contract attached is called
    again after). None: neither kind of object."""
    state = _slots(interp)
    slot = state.slot_of.get(id(obj))
    if slot is None and id(obj) in state.built:
        slot = state.built[id(obj)][1]
    return (slot, state.version) if slot is not None else None


def slot_contract(interp: Interpreter, module: InstanceValue) -> ContractValue | None:
    """The contract of the slot a module object was built from (None when none or several reached it)."""
    state = _slots(interp)
    entry = state.built.get(id(module))
    if entry is None:
        return None
    found = state.contracts.get(entry[1])
    return found if isinstance(found, ContractValue) else None
