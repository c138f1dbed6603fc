"""Decorators and closures of the checked program.

A function defined inside another keeps the values of the enclosing names it reads (its closure), so the
`wrapper` a decorator returns still knows the function it wraps. A call of a function whose decorators are
the program's own functions (or stub @models, like Lightning's `rank_zero_only`) runs as Python runs it: each
decorator is called with the function as a value, bottom-up, and the call goes to what the last one returned
(`functools.wraps` wrappers, decorator factories `@retry(3)`, a `rank_zero_only` that calls the function
under `if dist.get_rank() == 0:`, whose collectives are then reached on rank 0 only). Decorators the program
does not define (`torch.no_grad()`, `functools.lru_cache`, `staticmethod`) leave the function as it is: the
body reads what it needs of them itself (signature.py `function_decorations`).
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from spmdcheck.analysis.binding import Arg
from spmdcheck.analysis.frames import Engine, Frame
from spmdcheck.analysis.interp.loopreads import names_in
from spmdcheck.analysis.memo import NodeMemo
from spmdcheck.analysis.values import FunctionValue, InstanceValue, Value


class Closure:
    """The names of the function a function was defined in, as they were when its `def` ran (a decorator's
    `fn` parameter, a factory's arguments). A memoised call of the function it belongs to is keyed by the
    names of it that function's body can read (`key`), not by the closure's identity: an inner helper defined
    again by each run of its enclosing function is the same helper when what it reads is the same."""

    __slots__ = ("names", "_read")

    def __init__(self, names: dict[str, Value]) -> None:
        self.names = names
        self._read: tuple[str, ...] | None = None  # the names of it its function mentions, once known

    def key(self, fn: cst.FunctionDef, abstract: Callable[[Value], object]) -> tuple:
        """What of this closure a call of `fn` can depend on: each name `fn` mentions, with its value (by
        `abstract`, as a call's arguments are), except objects, which stay themselves (by identity): a
        summary's writes to an object it reached through the closure are not replayed onto another one."""
        if self._read is None:  # a closure belongs to the one definition whose `def` made it
            self._read = tuple(name for name in _names_mentioned(fn) if name in self.names)
        names = self.names
        return tuple(
            (name, value if isinstance(value, InstanceValue) else abstract(value))
            for name in self._read
            if (value := names.get(name)) is not None
        )


# every name a function's text mentions (its nested functions' too), sorted
_names_mentioned: NodeMemo[cst.FunctionDef, tuple[str, ...]] = NodeMemo(lambda fn: tuple(sorted(names_in(fn))))


class Undecorated(FunctionValue):
    """The function a decorator is given: calling it runs its own body, its decorators already applied.
    Never equal to the decorated function's value (a memoised call of one is not a call of the other)."""


def enclosing_names(func: FunctionValue) -> dict[str, Value]:
    """The starting names of a call of `func`: those of the function it was defined in (a fresh copy)."""
    return dict(func.closure.names) if func.closure is not None else {}


def call_decorated(
    interp: Engine, func: FunctionValue, args: list[Arg], node: cst.CSTNode, receiver: Value | None
) -> Value | None:
    """A call of `func` through the decorators the program defines; None when it has none (or one gives back
    something the checker cannot call): the body then runs as it is."""
    fn = func.node
    globals_ = func.scope.globals if func.scope is not None else interp.frame.globals
    found: list[tuple[Value, cst.Decorator]] = []
    with interp.entered(Frame(enclosing_names(func), globals_, owner=func.owner), func.scope):
        for dec in fn.decorators:
            value = interp.eval(dec.decorator)
            if isinstance(value, FunctionValue):
                found.append((value, dec))
    if not found:
        return None
    current: Value = Undecorated(fn, func.qualname, func.scope, func.owner, func.closure)
    for decorator, dec in reversed(found):  # the decorator nearest the `def` applies first
        current = interp.call(decorator, [(None, current, dec.decorator)], dec.decorator)  # type: ignore[arg-type]
        if not isinstance(current, FunctionValue):
            return None
    if isinstance(current, Undecorated) and current.node is fn:
        return interp.call(current, args, node, receiver)  # a decorator that returns the function (a registry)
    passed = args if receiver is None else [(None, receiver, node), *args]  # a method's wrapper gets `self` first
    through = forwarded(current, passed)  # a `functools.wraps` pass-through: the function called right here
    if through is not None and isinstance(through[0], FunctionValue):
        return interp.call(through[0], through[1], node)
    return interp.call(current, passed, node)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- pass-through forwarders
# the name each function forwards its arguments to ("": its first parameter; None: not a forwarder)
_forwarded_names: NodeMemo[cst.FunctionDef, str | None] = NodeMemo(lambda fn: _forwarded_name(fn))


def forwarded(func: Value, args: list[Arg]) -> tuple[Value, list[Arg]] | None:
    """A call of a pass-through forwarder: the call it makes, checked at this call with this call's arguments
    as the direct call is (a finding about an argument names the caller's expression, on the caller's line).

    - `def call(fn, /, *args, **kwargs): return fn(*args, **kwargs)` (a retry or timing helper, an
      executor's `submit`): its first argument called with the others;
    - `def wrapper(*args, **kwargs): return fn(*args, **kwargs)`, `fn` an enclosing or a module's name (the
      wrapper a `functools.wraps` decorator returns, `lambda *args, **kwargs: fn(*args, **kwargs)`): `fn` called
      with the arguments.

    None: not such a function, its callee is passed by keyword, or a `*xs` could not be expanded."""
    if not isinstance(func, FunctionValue) or any(keyword == "*" for keyword, _, _ in args):
        return None
    callee = forwarded_name(func.node)
    if callee is None:
        return None
    if callee == "":  # the first parameter
        if not args or args[0][0] is not None:
            return None
        return args[0][1], args[1:]
    closure = func.closure.names if func.closure is not None else {}
    target = closure.get(callee)
    if target is None and func.scope is not None:
        # a name no enclosing function binds is the module's, as Python looks it up (a module-level forwarder:
        # `CALLS = {"row": lambda *args, **kwargs: row_parallel(*args, **kwargs)}`)
        target = func.scope.globals.get(callee)
    return (target, args) if isinstance(target, FunctionValue) else None


def forwarded_name(fn: cst.FunctionDef) -> str | None:
    """The name a pass-through forwarder calls ("": its one positional parameter); None: not one (memoised)."""
    return _forwarded_names(fn)


def _forwarded_name(fn: cst.FunctionDef) -> str | None:
    """The name a pass-through forwarder calls ("": its one positional parameter); None: not one."""
    params = fn.params
    positional = [*params.posonly_params, *params.params]
    star, kwargs = params.star_arg, params.star_kwarg
    if not all(_wraps(d.decorator) for d in fn.decorators):
        return None
    if len(positional) > 1 or params.kwonly_params or any(p.default for p in positional):
        return None
    if not isinstance(star, cst.Param) or kwargs is None:
        return None
    body = fn.body.body if isinstance(fn.body, cst.IndentedBlock) else ()
    statements = [s for s in body if not _docstring(s)]
    if len(statements) != 1 or not isinstance(statements[0], cst.SimpleStatementLine):
        return None
    line = statements[0].body
    if len(line) != 1 or not isinstance(line[0], cst.Return) or not isinstance(line[0].value, cst.Call):
        return None
    call = line[0].value
    if not isinstance(call.func, cst.Name) or len(call.args) != 2:
        return None
    first, second = call.args
    passes_all = (
        first.star == "*"
        and isinstance(first.value, cst.Name)
        and first.value.value == star.name.value
        and second.star == "**"
        and isinstance(second.value, cst.Name)
        and second.value.value == kwargs.name.value
    )
    if not passes_all:
        return None
    if positional:
        return "" if call.func.value == positional[0].name.value else None
    own = {star.name.value, kwargs.name.value}
    return call.func.value if call.func.value not in own else None


def _wraps(decorator: cst.BaseExpression) -> bool:
    """`@functools.wraps(fn)`, `@wraps(fn)`: a copy of the wrapped function's name and docstring."""
    if not isinstance(decorator, cst.Call):
        return False
    func = decorator.func
    return (isinstance(func, cst.Name) and func.value == "wraps") or (
        isinstance(func, cst.Attribute) and func.attr.value == "wraps"
    )


def _docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )
