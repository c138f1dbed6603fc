"""A call's arguments in the gradient walk: `*xs` / `**kw` spread into them, and bound to the parameters of
the program's function it calls (defaults, `*args`, `**kwargs`, a lambda's defaults evaluated with it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import libcst as cst

from spmdcheck.analysis.gradients import engine_values
from spmdcheck.analysis.gradients.state import OPAQUE, ItemList
from spmdcheck.analysis.gradients.walker import as_items

if TYPE_CHECKING:
    from spmdcheck.analysis.gradients.walker import Walker
    from spmdcheck.analysis.values import FunctionValue


def spread(value: Any, star: str, expr: cst.BaseExpression, args: list, kwargs: dict) -> bool:
    """`*xs` / `**kw` of a call: the elements of a tuple or list the walk follows as positional arguments, the
    entries of a dict with string keys as keywords. False: not known (the call is not followed)."""
    if star == "*":
        items = value if isinstance(value, tuple) else as_items(value)
        if items is None or (isinstance(value, ItemList) and value.repeated):
            return False
        args.extend((item, expr) for item in items)
        return True
    if type(value) is not dict or not all(isinstance(key, str) and key not in kwargs for key in value):
        return False
    kwargs.update((key, (item, expr)) for key, item in value.items())
    return True


def bind(walker: Walker, func: FunctionValue, receiver: Any, args: list, kwargs: dict) -> dict[str, Any] | None:
    """The function's parameters bound to a call's arguments (the receiver first); None where Python raises."""
    params = func.node.params
    positional = [*params.posonly_params, *params.params]
    values = [v for v, _ in args]
    if receiver is not None:
        values = [receiver, *values]
    if len(values) > len(positional) and not isinstance(params.star_arg, cst.Param):
        return None
    env: dict[str, Any] = {}
    for param, value in zip(positional, values):
        env[param.name.value] = value
    # a positional-only parameter is never given by keyword
    named = {p.name.value for p in [*params.params, *params.kwonly_params]}
    for param in [*positional, *params.kwonly_params]:
        name = param.name.value
        if name in kwargs and name in named:
            env[name] = kwargs[name][0]
        elif name not in env:
            env[name] = default_value(walker, func, param)
    extra = {name: value for name, (value, _) in kwargs.items() if name not in named}
    if extra and params.star_kwarg is None:
        return None  # a keyword the function does not take: Python raises
    if isinstance(params.star_arg, cst.Param):
        env[params.star_arg.name.value] = tuple(values[len(positional) :])
    if params.star_kwarg is not None:
        env[params.star_kwarg.name.value] = extra
    if func.owner is not None and receiver is not None:
        env["__class__"] = func.owner
    return env


def default_value(walker: Walker, func: FunctionValue, param: cst.Param) -> Any:
    """A parameter's default: a constant, a lambda's default evaluated when it was made; OPAQUE otherwise."""
    if param.default is None:
        return OPAQUE
    if isinstance(func.closure, engine_values.WalkClosure):  # a lambda's, evaluated with it
        return func.closure.defaults.get(param.name.value, OPAQUE)
    if isinstance(param.default, (cst.Integer, cst.Float, cst.SimpleString)):
        return param.default.evaluated_value
    if isinstance(param.default, cst.Name) and param.default.value in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[param.default.value]
    return OPAQUE


def is_generator(fn: cst.FunctionDef) -> bool:
    """Whether `fn` itself yields (not a function or lambda nested in it)."""
    found = []

    class _Yields(cst.CSTVisitor):
        def visit_Yield(self, node: cst.Yield) -> bool:  # noqa: N802 - libcst's visitor naming
            found.append(node)
            return False

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:  # noqa: N802
            return node is fn

        def visit_Lambda(self, node: cst.Lambda) -> bool:  # noqa: N802
            return False

    fn.visit(_Yields())
    return bool(found)
