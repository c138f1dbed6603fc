"""Typed config fields: a module's nested config class (`FeedForward.Config`) followed statically.

When a config class types its fields, `w1: Linear.Config` says that `cfg.w1` configures a `Linear`, and that
the module built from it (`config.w1.build()`, a builder the contract's stub names) is the one `self.w1`
holds. A parameter annotated with a config class (also through a class imported only `if TYPE_CHECKING:`)
is an object of that class; a contract set on `cfg.w1.sharding_config` is recorded for the slot (class of
`cfg`, "w1"), and the module built from that slot carries it. `assert isinstance(cfg.attention,
GQAttention.Config)` narrows a field annotated with a base config class. Two different contracts (or
classes) for one slot leave it without one. What is learnt is the run's (`RunState.slots`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from spmdcheck.analysis import writes
from spmdcheck.analysis.frames import ConfigSlots, Engine, Frame, Slot
from spmdcheck.analysis.memo import NodeMemo
from spmdcheck.analysis.values import (
    UNKNOWN,
    ClassValue,
    ContractValue,
    FunctionValue,
    InstanceValue,
    ModuleRef,
    Value,
    library_base,
)
from spmdcheck.program.graph import resolve_import

AMBIGUOUS = object()  # a slot given two different contracts (or narrowed to two classes): it keeps none


def is_config_class(cls: Value) -> bool:
    """A class nested in a module class (the module's `Config`), or one deriving from such a class."""
    return isinstance(cls, ClassValue) and any(c.outer is not None for c in cls.mro())


def is_module_class(cls: Value) -> bool:
    """A module class of the program: one deriving from a `torch.nn` class (through the program's own
    classes) or defining `forward` (`model(x)` runs it)."""
    if not isinstance(cls, ClassValue):
        return False
    return isinstance(cls.lookup("forward"), FunctionValue) or (library_base(cls) or "").startswith("torch.nn.")


def _class_in(value: Value, kind: Callable[[Value], bool]) -> ClassValue | None:
    if isinstance(value, ClassValue) and kind(value):
        return value
    return None


_PARSED: dict[str, cst.BaseExpression | None] = {}


def parsed_annotation(text: object) -> cst.BaseExpression | None:
    """A string annotation's expression (None: not text, or not one we can parse), parsed once per text: the
    annotation is read at every call of its function."""
    if not isinstance(text, str):
        return None
    if text not in _PARSED:
        if len(_PARSED) > 4096:
            _PARSED.clear()
        try:
            _PARSED[text] = cst.parse_expression(text)
        except Exception:  # noqa: BLE001 - a string annotation we cannot parse is not ours
            _PARSED[text] = None
    return _PARSED[text]


def annotated_class(
    interp: Engine,
    ann: cst.BaseExpression,
    owner: ClassValue | None = None,
    kind: Callable[[Value], bool] = is_config_class,
    optional: bool = True,
) -> ClassValue | None:
    """The class of `kind` (a config class unless told) an annotation names: `Linear.Config`,
    `"Llama3Model.Config"`, `Config` (in a method of the module), `FeedForward.Config | None`. None when it
    names something else or several classes (or `X | None`, unless `optional`)."""
    if isinstance(ann, (cst.SimpleString, cst.ConcatenatedString)):
        parsed = parsed_annotation(ann.evaluated_value)
        if parsed is None:
            return None
        ann = parsed
    if isinstance(ann, cst.BinaryOperation) and isinstance(ann.operator, cst.BitOr):
        if not optional:
            return None
        parts = [p for p in (ann.left, ann.right) if not (isinstance(p, cst.Name) and p.value == "None")]
        return annotated_class(interp, parts[0], owner, kind) if len(parts) == 1 else None
    if isinstance(ann, cst.Name) and owner is not None:
        found = owner.lookup(ann.value)
        if found is not None:
            return _class_in(found, kind)
    if not isinstance(ann, (cst.Name, cst.Attribute)):
        return None
    value = interp.eval(ann)
    if value is UNKNOWN:
        qualname = _annotation_import(interp, ann)
        value = ModuleRef(qualname) if qualname is not None else UNKNOWN
    if isinstance(value, ModuleRef):
        value = _checked_class(interp, value.qualname)
    return _class_in(value, kind) if value is not None else None


def _annotation_import(interp: Engine, ann: cst.BaseExpression) -> str | None:
    """`Llama3Model.Config` where `Llama3Model` is imported only for annotations (`if TYPE_CHECKING:`, a branch
    the run does not take): the qualified name that import gives it."""
    parts: list[str] = []
    while isinstance(ann, cst.Attribute):
        parts.insert(0, ann.attr.value)
        ann = ann.value
    if not isinstance(ann, cst.Name):
        return None
    module = _guarded_imports(interp).get(ann.value)
    return ".".join([module, *parts]) if module is not None else None


_guarded_by_module: NodeMemo[cst.Module, dict[str, str]] = NodeMemo()


def _guarded_imports(interp: Engine) -> dict[str, str]:
    """The names the current module imports in its top-level `if` blocks, each with the qualified name it
    stands for: read once per module (an annotation is looked up at every call of its function)."""
    return _guarded_by_module.get(interp.ctx.module, lambda tree: _read_guarded_imports(interp, tree))


def _read_guarded_imports(interp: Engine, tree: cst.Module) -> dict[str, str]:
    importer = interp.ctx.module_file
    found: dict[str, str] = {}
    for stmt in tree.body:
        if type(stmt) is not cst.If:
            continue
        for line in stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else ():
            for small in line.body if isinstance(line, cst.SimpleStatementLine) else ():
                if not isinstance(small, cst.ImportFrom) or isinstance(small.names, cst.ImportStar):
                    continue
                for alias in small.names:
                    bound = alias.asname.name if alias.asname is not None else alias.name
                    if not (isinstance(bound, cst.Name) and isinstance(alias.name, cst.Name)):
                        continue
                    source = interp.ctx.code_of(small.module) if small.module is not None else None
                    module = resolve_import(importer, source, len(small.relative)) if importer else source
                    if module:
                        found.setdefault(bound.value, f"{module}.{alias.name.value}")  # the first import wins
    return found


def _checked_class(interp: Engine, qualname: str) -> Value | None:
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
    interp: Engine, ann: cst.Annotation | None, receiver: Value | None, owner: ClassValue | None
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


def module_parameter(
    interp: Engine, ann: cst.Annotation | None, receiver: Value | None, owner: ClassValue | None
) -> Value | None:
    """A parameter annotated with a module class of the program (`def step(model: RMSNorm, batch)`) and given
    no value the checker knows: the object that class's methods are checked on (built by its `__init__`, with
    the run's tensor-parallel plans of its class), so `model(x)` runs its `forward` on `x`. None: not such a
    parameter, or one that may be None (`model: RMSNorm | None`: taking it as a module would decide the
    `if model is None` the code asks)."""
    if ann is None:
        return None
    cls = receiver.cls if isinstance(receiver, InstanceValue) else owner
    found = annotated_class(interp, ann.annotation, cls, is_module_class, optional=False)
    if found is None and cls is not owner:
        found = annotated_class(interp, ann.annotation, owner, is_module_class, optional=False)
    return interp.instance_for(found) if found is not None else None


def _field_annotation(cls: ClassValue, name: str) -> tuple[ClassValue, cst.BaseExpression] | None:
    for c in cls.mro():
        for stmt in c.node.body.body if isinstance(c.node.body, cst.IndentedBlock) else ():
            for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
                target = small.target if isinstance(small, cst.AnnAssign) else None
                if isinstance(target, cst.Name) and target.value == name:
                    return c, small.annotation.annotation  # type: ignore[union-attr]
    return None


def config_field(interp: Engine, base: InstanceValue, attr: str) -> Value | None:
    """`cfg.w1` on a config object whose class types the field as another module's config class: one object
    per (object, field), tagged with its slot. None: not such a field (the attribute reads as before)."""
    if attr in base.attrs or not is_config_class(base.cls):
        return None
    state = interp.run.slots
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
    with interp.entered(Frame({}, scope.globals if scope is not None else interp.frame.globals), scope):
        cls = annotated_class(interp, ann, declaring)
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


def narrow_config(interp: Engine, test: cst.BaseExpression) -> None:
    """`assert isinstance(cfg, Sub.Config)` on a config object of a typed field whose annotation names a base
    class: the field holds a `Sub.Config`, and the module built from it is a `Sub`. A field narrowed to two
    different classes keeps its annotation."""
    if not (isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "isinstance"):
        return
    if len(test.args) != 2 or any(a.keyword is not None or a.star for a in test.args):
        return
    obj, cls = interp.eval(test.args[0].value), interp.eval(test.args[1].value)
    state = interp.run.slots
    slot = state.slot_of.get(id(obj)) if isinstance(obj, InstanceValue) else None
    if slot is None or not isinstance(cls, ClassValue) or cls is obj.cls or obj.cls not in cls.mro():  # type: ignore[union-attr]
        return
    have = state.narrowed.get(slot)
    if have is cls or have is AMBIGUOUS:
        return
    state.narrowed[slot] = cls if have is None else AMBIGUOUS
    if interp.log is not None:
        narrowed = writes.class_name(cls) if have is None else "ambiguous"
        interp.log.wrote_shared(("narrow", _slot_name(state, slot), narrowed))
    if have is None:
        obj.cls = cls  # type: ignore[union-attr]
    # modules already built from this slot were built from the annotation's class: build them again
    instances = interp.run.instances
    for key, built in list(instances.items()):
        if _holds(state, built, slot):
            del instances[key]
            forward = built.cls.lookup("forward")
            if isinstance(forward, FunctionValue):
                interp.run.recheck(forward, built.cls)


def attach_slot(interp: Engine, owner: InstanceValue, value: ContractValue) -> None:
    state = interp.run.slots
    slot = state.slot_of.get(id(owner))
    if slot is None:
        return
    have = state.contracts.get(slot)
    if have is AMBIGUOUS or have == value:
        return
    state.contracts[slot] = value if have is None else AMBIGUOUS
    state.version += 1
    if interp.log is not None:
        attached = writes.describe(value) if have is None else "ambiguous"
        interp.log.wrote_shared(("slot", _slot_name(state, slot), attached))
    # modules already checked with an object built from this slot: check their forward again
    for built in list(interp.run.instances.values()):
        if _holds(state, built, slot):
            forward = built.cls.lookup("forward")
            if isinstance(forward, FunctionValue):
                interp.run.recheck(forward, built.cls)


def _holds(state: ConfigSlots, obj: InstanceValue, slot: Slot, depth: int = 4) -> bool:
    """Whether a module object holds (in its attributes, nested) a module built from `slot`."""
    for value in obj.attrs.values():
        if isinstance(value, InstanceValue) and id(value) in state.built:
            if state.built[id(value)][1] == slot or (depth > 0 and _holds(state, value, slot, depth - 1)):
                return True
    return False


def _builders(interp: Engine) -> frozenset[str]:
    state = interp.run.slots
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


def build_module(interp: Engine, method: Value) -> Value | None:
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
    slot = interp.run.slots.slot_of.get(id(config))
    if slot is None:
        return None
    state = interp.run.slots
    built = state.modules.get(id(config))
    if built is not None:
        return built[1]
    # built from this config object (its `__init__` reads the object's own fields: their slots extend this one)
    module = InstanceValue(module_cls)
    state.modules[id(config)] = (config, module)
    state.built[id(module)] = (module, slot)
    init = module_cls.lookup("__init__")
    if isinstance(init, FunctionValue):
        interp.call(init, [(None, config, init.node)], init.node, receiver=module)
    return module


def slot_key(interp: Engine, obj: InstanceValue) -> tuple[Slot, int] | None:
    """What a call summary must know of an object beyond its attributes: the typed-field path of a config
    object (or of a module built from one; two fields' configs build different modules), and how many
    contracts had attached when it was used (a module called before its contract attached is called
    again after). None: neither kind of object."""
    state = interp.run.slots
    slot = state.slot_of.get(id(obj))
    if slot is None and id(obj) in state.built:
        slot = state.built[id(obj)][1]
    return (slot, state.version) if slot is not None else None


def slot_contract(interp: Engine, module: InstanceValue) -> ContractValue | None:
    """The contract of the slot a module object was built from (None when none or several reached it)."""
    state = interp.run.slots
    entry = state.built.get(id(module))
    if entry is None:
        return None
    found = state.contracts.get(entry[1])
    return found if isinstance(found, ContractValue) else None
