"""The engine's values of the program's globals as the gradient walk sees them (exprs.py `lookup`): its own
functions, classes and modules as they are, library names as `Qual`, constants, process groups, and the
idioms the engine reads (issue 20): registries (a dict literal, the entries a `@register` decorator stored),
config objects (dataclass, SimpleNamespace), `functools.partial` bound at a module's top level."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import libcst as cst

from spmdcheck.analysis import containers, decorators, lambdas
from spmdcheck.analysis.gradients.state import OPAQUE, DeclaredKind, Group, Mesh, Partial, Qual
from spmdcheck.analysis.gradients.walker import MAX_ITEMS
from spmdcheck.analysis.objects import NAMESPACE_CLASS, PartialValue, dataclass_fields
from spmdcheck.analysis.values import (
    ClassValue,
    DictValue,
    FunctionValue,
    GroupValue,
    InstanceValue,
    LazyImport,
    Literal,
    MeshValue,
    ModuleRef,
    ModuleValue,
    PendingImport,
    TypeValue,
)

if TYPE_CHECKING:
    from spmdcheck.analysis.gradients.walker import Walker

CONSTANTS = (str, int, float, bool, type(None))


def from_engine(walker: Walker, value: Any) -> Any:
    """A value of the engine's module globals, as the walk sees it."""
    if isinstance(value, PendingImport):
        value = walker.engine.settle(value)
    if isinstance(value, (FunctionValue, ClassValue, ModuleValue)):
        return value
    if isinstance(value, ModuleRef):
        return module_or_name(walker, value.qualname)
    if isinstance(value, LazyImport):
        importer = getattr(walker.engine, "importer", None)
        if importer is not None and importer.kind(f"{value.module}.{value.name}") is None:
            if importer.kind(value.module) == "checked":
                return from_engine(walker, walker.engine.module_attribute(value.module, value.name))
        return module_or_name(walker, f"{value.module}.{value.name}")
    if isinstance(value, GroupValue):
        return Group(value.axis)
    if isinstance(value, MeshValue):
        return Mesh(value.axes)
    if isinstance(value, Literal) and isinstance(value.value, CONSTANTS):
        return value.value
    if isinstance(value, DictValue):  # a registry the program filled (`BUILDERS["gpt"]`), a dict of constants
        return _engine_dict(walker, value)
    if isinstance(value, PartialValue):  # `bound = partial(f, k=v)` at a module's top level
        return _engine_partial(walker, value)
    if isinstance(value, TypeValue):  # a type constant the engine read (`NORM = {"tp": R}`)
        return DeclaredKind("S" if value.type.shard is not None or value.type.some_dim else value.type.kind.value)
    if isinstance(value, InstanceValue) and _is_record(value):
        return value  # a config object (dataclass, SimpleNamespace): its fields read by `attribute`
    return OPAQUE


def _engine_dict(walker: Walker, value: DictValue) -> Any:
    """A dict of the engine's values with constant keys, as the walk sees it (OPAQUE: a key is not constant)."""
    items = containers.entries(walker.engine, value)  # its literal's entries, and those registered since
    if len(items) > MAX_ITEMS:
        return OPAQUE
    out: dict[Any, Any] = {}
    for key, item, _ in items:
        if not isinstance(key, Literal) or not isinstance(key.value, CONSTANTS):
            return OPAQUE
        out[key.value] = from_engine(walker, item)
    return out


def _engine_partial(walker: Walker, value: PartialValue) -> Any:
    args: list[tuple[Any, Any]] = []
    kwargs: dict[str, tuple[Any, Any]] = {}
    for keyword, item, expr in value.args:
        if keyword is None:
            args.append((from_engine(walker, item), expr))
        elif keyword in ("*", "**"):
            return OPAQUE
        else:
            kwargs[keyword] = (from_engine(walker, item), expr)
    return Partial(from_engine(walker, value.func), args, kwargs)


def _is_record(obj: InstanceValue) -> bool:
    """An object of a dataclass or a SimpleNamespace: its fields are what was given (no module, no methods
    the walk would have to run to read them)."""
    return obj.cls is NAMESPACE_CLASS or dataclass_fields(obj.cls) is not None


def module_or_name(walker: Walker, qualname: str) -> Any:
    """A module of the program (its functions are walked), or a library name."""
    importer = getattr(walker.engine, "importer", None)
    if importer is not None and importer.kind(qualname) == "checked":
        return ModuleValue(qualname)
    return Qual(qualname)


class WalkClosure(decorators.Closure):
    """The names a lambda the walk evaluated sees besides the globals: the walked function's, as the walk
    knew them there (values of the walk, not the engine's); and its parameters' defaults, evaluated when the
    lambda was (`lambda fn=optimizer.step: fn()`), as Python evaluates them."""

    __slots__ = ("defaults",)

    def __init__(self, names: dict[str, Any], defaults: dict[str, Any]) -> None:
        super().__init__(names)
        self.defaults = defaults


def lambda_value(walker: Walker, node: cst.Lambda, evaluate: Callable[[Walker, cst.BaseExpression], Any]) -> Any:
    """A lambda the walk meets (`hooks.append(lambda g: g / world)`): a function, as the engine makes it
    (lambdas.py), over the walked function's names as they are now."""
    frame = walker.frame
    assert frame is not None
    params = node.params
    defaults = {
        p.name.value: evaluate(walker, p.default)
        for p in (*params.posonly_params, *params.params, *params.kwonly_params)
        if p.default is not None
    }
    closure = WalkClosure(dict(frame.env), defaults)
    return FunctionValue(lambdas.as_def(node), lambdas.NAME, frame.scope, None, closure)


def closure_names(walker: Walker, func: FunctionValue) -> dict[str, Any]:
    """The enclosing names a call of `func` starts with: a walk lambda's own, or an engine function's as the
    walk sees them (a function defined in another and stored in the program's globals)."""
    closure = func.closure
    if closure is None:
        return {}
    if isinstance(closure, WalkClosure):
        return dict(closure.names)
    return {name: from_engine(walker, value) for name, value in closure.names.items()}


def forwarded(walker: Walker, func: FunctionValue, args: list) -> tuple[Any, list] | None:
    """A call of a pass-through forwarder (decorators.py `forwarded`: `call(fn, *args, **kwargs)`, a
    `functools.wraps` wrapper): the callee and the arguments it is called with, so that the walk makes that call
    right at the forwarder's call, as the engine does (a finding names the caller's line). None: not one."""
    callee = decorators.forwarded_name(func.node)
    if callee is None:
        return None
    if callee == "":  # its first parameter
        return (args[0][0], args[1:]) if args else None
    names = closure_names(walker, func)
    if callee in names:
        return names[callee], args
    if func.scope is not None and callee in func.scope.globals:  # a module's name, as Python looks it up
        return from_engine(walker, func.scope.globals[callee]), args
    return None
