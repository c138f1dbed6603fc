"""Config objects: dataclasses, `SimpleNamespace`, `dataclasses.replace`, `functools.partial` and `dict(...)`.

Axes, groups and flags are often held by config objects rather than written at the call: a dataclass
(`ParallelConfig(axis="dp")`, nested through `field(default_factory=...)`), a `SimpleNamespace(axis="tp")`,
a copy with one field changed (`dataclasses.replace(cfg, sequence_parallel=True)`), keyword arguments
gathered in a dict (`kw = dict(group=cfg.tp_group)`, then `f(x, **kw)`) or bound in advance
(`reduce_tp = partial(all_reduce, axis="tp")`). Each is followed as the direct form is: an object of a
dataclass gets its fields from the call's arguments and the class's defaults, as its generated `__init__`
gives them (before, an argument was dropped and the class default read instead); a partial is called
with its bound arguments first.

The calls these objects need (a factory, the wrapped function) go through the dispatcher given as
`call`: this module does not import dispatch.py, which imports it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from spmdcheck.analysis.binding import Arg
from spmdcheck.analysis.configs import is_config_class
from spmdcheck.analysis.frames import Engine
from spmdcheck.analysis.values import (
    UNKNOWN,
    ClassValue,
    DictValue,
    FunctionValue,
    InstanceValue,
    Literal,
    ModuleRef,
    Seq,
    Value,
)

Dispatch = Callable[[Engine, Value, list[Arg], cst.Call], Value]


@dataclass(frozen=True, eq=False)
class FieldSpec(Value):
    """`field(default=..., default_factory=...)` in a dataclass body: how its generated `__init__` fills
    the field when the call does not (None: no such default)."""

    default: Value | None
    factory: Value | None
    init: bool = True


@dataclass(frozen=True)
class PartialValue(Value):
    """`functools.partial(func, *args, **keywords)`: `func` called with these arguments first."""

    func: Value
    args: tuple[Arg, ...]


def _namespace_class() -> ClassValue:
    node = cst.ClassDef(
        name=cst.Name("SimpleNamespace"), body=cst.IndentedBlock([cst.SimpleStatementLine([cst.Pass()])])
    )
    return ClassValue("SimpleNamespace", node, None, (), {}, {})


# the class of every `types.SimpleNamespace(...)` object: its attributes are what the call gives
NAMESPACE_CLASS = _namespace_class()


# ----------------------------------------------------------------------------- dataclasses
def _decorator_name(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Call):
        expr = expr.func
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return None


# bases whose subclasses get the generated `__init__` of a dataclass over their annotated fields
_FIELD_BASES = frozenset({"typing.NamedTuple", "typing_extensions.NamedTuple"})


def _dataclass_options(cls: ClassValue) -> dict[str, bool] | None:
    """The options of a class's own `@dataclass` decorator (`init`), None when it has none. A class deriving
    from `typing.NamedTuple` is built the same way."""
    if any(isinstance(base, ModuleRef) and base.qualname in _FIELD_BASES for base in cls.bases):
        return {"init": True}
    for decorator in cls.node.decorators:
        if _decorator_name(decorator.decorator) != "dataclass":
            continue
        options = {"init": True}
        call = decorator.decorator
        for arg in call.args if isinstance(call, cst.Call) else ():
            if arg.keyword is not None and isinstance(arg.value, cst.Name) and arg.value.value in ("True", "False"):
                options[arg.keyword.value] = arg.value.value == "True"
        return options
    return None


def _own_fields(cls: ClassValue) -> list[str]:
    """The fields a dataclass's own body declares, in order (`x: int = 0`; not ClassVar, not `_: KW_ONLY`)."""
    names: list[str] = []
    body = cls.node.body
    for stmt in body.body if isinstance(body, cst.IndentedBlock) else ():
        for small in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if not isinstance(small, cst.AnnAssign) or not isinstance(small.target, cst.Name):
                continue
            ann = small.annotation.annotation
            head = ann.value if isinstance(ann, cst.Subscript) else ann
            kind = head.attr.value if isinstance(head, cst.Attribute) else getattr(head, "value", None)
            if kind in ("ClassVar", "KW_ONLY", "InitVar"):
                continue
            names.append(small.target.value)
    return names


_FIELDS: weakref.WeakKeyDictionary[ClassValue, tuple[str, ...] | None] = weakref.WeakKeyDictionary()


def dataclass_fields(cls: ClassValue) -> tuple[str, ...] | None:
    """The parameters of the `__init__` a dataclass generates, in order, when that `__init__` is the one its
    objects are built with (no class before it in the MRO defines one); None otherwise. The config classes
    nested in modules (configs.py) are left to their typed fields."""
    if cls in _FIELDS:
        return _FIELDS[cls]
    found: tuple[str, ...] | None = None
    if not is_config_class(cls):
        for c in cls.mro():
            if "__init__" in c.namespace:
                break
            options = _dataclass_options(c)
            if options is None:
                continue
            if options["init"]:
                names: list[str] = []
                for base in reversed(c.mro()):
                    if _dataclass_options(base) is not None:
                        names.extend(n for n in _own_fields(base) if n not in names)
                found = tuple(names)
            break
    _FIELDS[cls] = found
    return found


def build_dataclass(
    interp: Engine, cls: ClassValue, fields: tuple[str, ...], args: list[Arg], node: cst.Call, call: Dispatch
) -> InstanceValue:
    """`Config(...)` of a dataclass: its fields from the arguments, else from their defaults (a factory is
    called anew for each object), then its `__post_init__`. A field the call may give through an argument
    the checker cannot read (`*args`, `**kwargs`) and does not give by name is unknown."""
    obj = InstanceValue(cls)
    given: dict[str, Value] = {}
    settable = [name for name in fields if not (isinstance(spec := cls.lookup(name), FieldSpec) and not spec.init)]
    positional = [value for keyword, value, _ in args if keyword is None]
    given.update(zip(settable, positional))
    for keyword, value, _ in args:
        if keyword is not None and keyword != "*" and keyword in fields:
            given[keyword] = value
    hidden = not _all_expanded(interp, args, node)
    for name in fields:
        if name in given:
            value = given[name]
        elif hidden and name in settable:
            value = UNKNOWN
        else:
            value = _default(interp, cls, name, node, call)
        interp.set_attr(obj, name, value)
    post_init = cls.lookup("__post_init__")
    if isinstance(post_init, FunctionValue):
        interp.call(post_init, [], node, receiver=obj)
    return obj


def _default(interp: Engine, cls: ClassValue, name: str, node: cst.Call, call: Dispatch) -> Value:
    declared = cls.lookup(name)
    if declared is None:
        return UNKNOWN  # a field without a default the call did not give: a TypeError the checker leaves
    if not isinstance(declared, FieldSpec):
        return declared
    if declared.factory is not None:
        return call(interp, declared.factory, [], node)
    return declared.default if declared.default is not None else UNKNOWN


# ----------------------------------------------------------------------------- library calls
def call_library(interp: Engine, qualname: str, args: list[Arg], node: cst.Call, call: Dispatch) -> Value | None:
    """A call of `dataclasses.field`, `dataclasses.replace`, `types.SimpleNamespace`, `functools.partial` or
    `copy.copy`: its value (None: not one of these)."""
    handler = _LIBRARY.get(qualname)
    return handler(interp, args, node, call) if handler is not None else None


def _field(interp: Engine, args: list[Arg], node: cst.Call, call: Dispatch) -> Value:
    keywords = {keyword: value for keyword, value, _ in args if keyword is not None}
    init = keywords.get("init")
    return FieldSpec(
        keywords.get("default"),
        keywords.get("default_factory"),
        not (isinstance(init, Literal) and init.value is False),
    )


def _replace(interp: Engine, args: list[Arg], node: cst.Call, call: Dispatch) -> Value:
    """`dataclasses.replace(cfg, field=value)`: a new object with the fields of `cfg` and the changes (its
    `__post_init__` runs again)."""
    if not args or args[0][0] is not None or not isinstance(args[0][1], InstanceValue):
        return UNKNOWN
    base = args[0][1]
    if not _all_expanded(interp, args, node):
        return UNKNOWN
    obj = InstanceValue(base.cls)
    for name, value in base.attrs.items():
        interp.set_attr(obj, name, value)
    for keyword, value, _ in args[1:]:
        if keyword is not None:
            interp.set_attr(obj, keyword, value)
    post_init = base.cls.lookup("__post_init__")
    if isinstance(post_init, FunctionValue):
        interp.call(post_init, [], node, receiver=obj)
    return obj


def _copy(interp: Engine, args: list[Arg], node: cst.Call, call: Dispatch) -> Value:
    """`copy.copy(obj)`: a new object holding the same attribute values."""
    if len(args) != 1 or args[0][0] is not None or not isinstance(args[0][1], InstanceValue):
        return UNKNOWN
    obj = InstanceValue(args[0][1].cls)
    for name, value in args[0][1].attrs.items():
        interp.set_attr(obj, name, value)
    return obj


def _namespace(interp: Engine, args: list[Arg], node: cst.Call, call: Dispatch) -> Value:
    """`SimpleNamespace(axis="tp")`: an object whose attributes are the call's keywords. One whose keywords the
    checker cannot all read is unknown."""
    if any(keyword is None for keyword, _, _ in args) or not _all_expanded(interp, args, node):
        return UNKNOWN
    obj = InstanceValue(NAMESPACE_CLASS)
    for keyword, value, _ in args:
        if keyword is not None:
            interp.set_attr(obj, keyword, value)
    return obj


def _partial(interp: Engine, args: list[Arg], node: cst.Call, call: Dispatch) -> Value:
    if not args or args[0][0] is not None or not _all_expanded(interp, args, node):
        return UNKNOWN
    return PartialValue(args[0][1], tuple(args[1:]))


def _all_expanded(interp: Engine, args: list[Arg], node: cst.Call) -> bool:
    """Whether the call passes no `*sequence` and every `**mapping` of it is a dict the checker reads whole
    (a dict display, or a name holding a dict with string keys): its keys are among the keyword arguments."""
    if any(keyword == "*" for keyword, _, _ in args):
        return False
    for arg in node.args:
        if arg.star != "**":
            continue
        if isinstance(arg.value, cst.Dict):
            if not all(
                isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString) for e in arg.value.elements
            ):
                return False
        elif isinstance(arg.value, (cst.Name, cst.Attribute)):
            mapping = interp.eval(arg.value)  # a name or attribute read: no side effect, and read already
            if not isinstance(mapping, DictValue) or not all(
                isinstance(key, Literal) and isinstance(key.value, str) for key, _, _ in mapping.items
            ):
                return False
        else:
            return False
    return True


_LIBRARY: dict[str, Callable[[Engine, list[Arg], cst.Call, Dispatch], Value]] = {
    "dataclasses.field": _field,
    "dataclasses.replace": _replace,
    "types.SimpleNamespace": _namespace,
    "argparse.Namespace": _namespace,
    "functools.partial": _partial,
    "copy.copy": _copy,
}


def call_partial(interp: Engine, func: PartialValue, args: list[Arg], node: cst.Call, call: Dispatch) -> Value:
    """`reduce_tp(x)` for `reduce_tp = partial(all_reduce, axis="tp")`: the bound positional arguments first,
    the call's keywords overriding the bound ones."""
    keywords = {keyword for keyword, _, _ in args if keyword is not None and keyword != "*"}
    bound = [a for a in func.args if a[0] is None or a[0] not in keywords]
    positional = [a for a in bound if a[0] is None]
    named = [a for a in bound if a[0] is not None]
    return call(interp, func.func, [*positional, *args, *named], node)


def call_dict(interp: Engine, args: list[Arg], node: cst.Call) -> Value:
    """`dict(group=cfg.tp_group, async_op=False)`, `dict(base, axis="tp")` of a known dict, `dict(zip(names,
    values))` of known pairs: a dict with those keys (an argument the checker cannot read leaves it unknown)."""
    items: list[tuple[Value, Value, cst.CSTNode]] = []
    for keyword, value, where in args:
        if keyword is None and isinstance(value, DictValue) and not items:
            items.extend(value.items)
        elif keyword is None and isinstance(value, Seq) and not items and _pairs(value):
            for key, item in (pair.items for pair in value.items):  # type: ignore[attr-defined]
                items = [entry for entry in items if entry[0] != key]  # a later pair replaces the key
                items.append((key, item, where))
        elif keyword is None or keyword == "*":
            return UNKNOWN
        else:
            items = [item for item in items if item[0] != Literal(keyword)]
            items.append((Literal(keyword), value, where))
    if not _all_expanded(interp, args, node):
        return UNKNOWN
    return DictValue(tuple(items))


def _pairs(value: Seq) -> bool:
    """Key-value pairs (`zip(keys, values)`, `[("a", x)]`) whose keys are constants."""
    return all(isinstance(p, Seq) and len(p.items) == 2 and isinstance(p.items[0], Literal) for p in value.items)
