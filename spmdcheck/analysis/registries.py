"""Registries a program fills itself: `@register("gpt")` over a class or function, where `register` (a function
of the program, or a method of a registry object) returns a decorator that stores its argument in a dict under
a key and returns it unchanged:

    def register(name):
        def deco(cls):
            MODEL_REGISTRY[name] = cls
            return cls
        return deco

Applied where the class or function is defined (a module's top level, a class body), the entry is registered
into the dict itself (containers.py `entries`): every module that imported the dict sees it, as in Python.
Only decorators that return their argument are read here; one that wraps it is not a registry.
"""

from __future__ import annotations

import libcst as cst

from spmdcheck.analysis import containers
from spmdcheck.analysis.frames import Engine, Frame
from spmdcheck.analysis.values import (
    UNKNOWN,
    DictValue,
    FunctionValue,
    Literal,
    MethodValue,
    Value,
)


def register_decorated(interp: Engine, stmt: cst.FunctionDef | cst.ClassDef, value: Value) -> None:
    """Apply the registering decorators of a class or function just defined, innermost first."""
    if interp.frame.function is not None or interp.inline_stack:
        return  # a definition inside a function: what it registers would outlive the check that ran it
    for decorator in reversed(stmt.decorators):
        expr = decorator.decorator
        callee = interp.eval(expr.func) if type(expr) is cst.Call else interp.eval(expr)
        if not isinstance(callee, (FunctionValue, MethodValue)):
            continue
        factory = callee.func if isinstance(callee, MethodValue) else callee
        log = interp.log
        if log is not None:
            log.enter_body(factory.node)  # the top level reads the decorator's body (a selective run needs it)
        try:
            _apply(interp, expr, factory, callee, stmt, value)
        finally:
            if log is not None:
                log.exit_body()


def _apply(
    interp: Engine,
    expr: cst.BaseExpression,
    factory: FunctionValue,
    callee: Value,
    stmt: cst.FunctionDef | cst.ClassDef,
    value: Value,
) -> None:
    """Register `value` if `expr` is a registering decorator (a factory called, or the decorator itself)."""
    if type(expr) is cst.Call:
        inner = _returned_decorator(factory.node)
        if inner is None:
            return
        env = _bind(interp, factory, callee, expr)
    else:
        inner, env = factory.node, {}
    stores = _stores(inner)
    if stores is None:
        return
    param, targets = stores
    env[param] = value
    _store(interp, factory, inner, env, targets, stmt, value, expr)


def _returned_decorator(factory: cst.FunctionDef) -> cst.FunctionDef | None:
    """The function a decorator factory defines and returns (`def deco(cls): ...; return deco`)."""
    body = factory.body.body if isinstance(factory.body, cst.IndentedBlock) else ()
    defined = {s.name.value: s for s in body if type(s) is cst.FunctionDef}
    last = body[-1] if body else None
    if type(last) is cst.SimpleStatementLine and type(last.body[0]) is cst.Return:
        returned = last.body[0].value
        if type(returned) is cst.Name and returned.value in defined:
            return defined[returned.value]
    return None


def _stores(fn: cst.FunctionDef) -> tuple[str, list[cst.Subscript]] | None:
    """A decorator that stores its one argument under a key and returns it: (its parameter, the targets
    `REGISTRY[key]` it assigns the argument to). None: another kind of decorator."""
    params = fn.params.params
    if len(params) != 1 or fn.params.posonly_params or not isinstance(fn.body, cst.IndentedBlock):
        return None
    param = params[0].name.value
    body = fn.body.body
    last = body[-1] if body else None
    if not (type(last) is cst.SimpleStatementLine and type(last.body[0]) is cst.Return):
        return None
    returned = last.body[0].value
    if not (type(returned) is cst.Name and returned.value == param):
        return None
    targets: list[cst.Subscript] = []
    for stmt in _statements(body):
        for small in stmt.body if type(stmt) is cst.SimpleStatementLine else ():
            if type(small) is not cst.Assign or type(small.value) is not cst.Name or small.value.value != param:
                continue
            for target in small.targets:
                sub = target.target
                if type(sub) is cst.Subscript and len(sub.slice) == 1 and type(sub.slice[0].slice) is cst.Index:
                    targets.append(sub)
    return (param, targets) if targets else None


def _statements(body: tuple | list) -> list[cst.CSTNode]:
    """The statements of a block and of the `if`/`try`/`with` blocks in it (not of nested definitions)."""
    out: list[cst.CSTNode] = []
    for stmt in body:
        out.append(stmt)
        for block in _blocks(stmt):
            out.extend(_statements(block))
    return out


def _blocks(stmt: cst.CSTNode) -> list[list[cst.CSTNode]]:
    """The statement lists an `if`, `try` or `with` holds (an `elif` is a list of one `if`)."""
    kind = type(stmt)
    if kind not in (cst.If, cst.Try, cst.With):
        return []
    blocks = [stmt.body.body, *(handler.body.body for handler in getattr(stmt, "handlers", ()))]
    orelse = getattr(stmt, "orelse", None)
    if type(orelse) is cst.If:
        blocks.append([orelse])
    elif orelse is not None:
        blocks.append(orelse.body.body)
    return blocks


def _bind(interp: Engine, factory: FunctionValue, callee: Value, call: cst.Call) -> dict[str, Value]:
    """The decorator factory's parameters, bound to the decorator's arguments (its defaults where not given)."""
    params = [*factory.node.params.posonly_params, *factory.node.params.params]
    env: dict[str, Value] = {}
    if isinstance(callee, MethodValue) and params:
        env[params[0].name.value] = callee.receiver
        params = params[1:]
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    for param, arg in zip(params, positional):
        env[param.name.value] = interp.eval(arg.value)
    for arg in call.args:
        if arg.keyword is not None:
            env[arg.keyword.value] = interp.eval(arg.value)
    for param in [*params, *factory.node.params.kwonly_params]:
        if param.name.value not in env:
            env[param.name.value] = interp.eval(param.default) if param.default is not None else UNKNOWN
    return env


def _store(
    interp: Engine,
    factory: FunctionValue,
    inner: cst.FunctionDef,
    env: dict[str, Value],
    targets: list[cst.Subscript],
    stmt: cst.FunctionDef | cst.ClassDef,
    value: Value,
    where: cst.CSTNode,
) -> None:
    scope = factory.scope
    frame = Frame(env, scope.globals if scope is not None else interp.frame.globals, function=inner)
    param = inner.params.params[0].name.value
    with interp.entered(frame, scope):
        for target in targets:
            registry = interp.eval(target.value)
            if not isinstance(registry, DictValue):
                continue
            key = _key(interp, target.slice[0].slice.value, param, stmt)  # type: ignore[union-attr]
            containers.register(interp, registry, key, value, where)


def _key(interp: Engine, expr: cst.BaseExpression, param: str, stmt: cst.FunctionDef | cst.ClassDef) -> Value:
    """The key an entry is stored under: `name`, `cls.__name__`, `name or cls.__name__`."""
    if type(expr) is cst.Attribute and expr.attr.value == "__name__":
        if type(expr.value) is cst.Name and expr.value.value == param:
            return Literal(stmt.name.value)
    if type(expr) is cst.BooleanOperation and type(expr.operator) is cst.Or:
        left = _key(interp, expr.left, param, stmt)
        if isinstance(left, Literal):
            return left if left.value else _key(interp, expr.right, param, stmt)
        return UNKNOWN
    return interp.eval(expr)
