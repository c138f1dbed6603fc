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

import libcst as cst

from spmdcheck.analysis.binding import Arg
from spmdcheck.analysis.frames import Engine, Frame
from spmdcheck.analysis.values import FunctionValue, Value


class Closure:
    """The names of the function a function was defined in, as they were when its `def` ran (a decorator's
    `fn` parameter, a factory's arguments). Compared by identity: a memoised call of the function it belongs
    to is a call of this one definition."""

    __slots__ = ("names",)

    def __init__(self, names: dict[str, Value]) -> None:
        self.names = names


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
    return interp.call(current, passed, node)  # type: ignore[arg-type]
