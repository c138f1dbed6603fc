"""Lambdas as the program's own functions (issue 21/20).

A `lambda` is a function whose body is one `return`: `lambda x, k=2, *a, **kw: f(x)` is the `def` that
returns `f(x)`. So it evaluates to the same `FunctionValue` a nested `def` does (its parameters, defaults,
`*args` / `**kwargs`, the enclosing names as a closure), and calls, summaries, pass-through forwarding
(decorators.py `forwarded`) and the gradient walk need nothing of their own: each lambda node is given, once,
a `FunctionDef` whose parameters are the lambda's own `Parameters` node and whose one statement returns the
lambda's own body expression. Every expression inside is the program's node, so a finding in a lambda's body
is reported at its line and column as in a `def`; the few nodes made here (the `def`, its block, the
`return`) have no place in the file, and a finding at one of them is moved to the lambda (`origin`).
"""

from __future__ import annotations

import libcst as cst

from spmdcheck.analysis import decorators
from spmdcheck.analysis.frames import Engine
from spmdcheck.analysis.memo import NodeMemo
from spmdcheck.analysis.values import FunctionValue

# the name of every lambda's `def`: a keyword, so never a name of the program its closure could hold
NAME = "lambda"


def _as_def(node: cst.Lambda) -> cst.FunctionDef:
    ret = cst.Return(node.body)
    line = cst.SimpleStatementLine([ret])
    fn = cst.FunctionDef(cst.Name(NAME), node.params, cst.IndentedBlock([line]))
    for made in (fn, line, ret):
        _origins.get(made, lambda _: node)
    return fn


# lambda -> its `def` (one per node: its summaries, recursion guard and unit are keyed by the def's identity)
_defs: NodeMemo[cst.Lambda, cst.FunctionDef] = NodeMemo(_as_def)
# a node made for a lambda's `def` -> the lambda (filled when the def is made, read by `origin`)
_origins: NodeMemo[cst.CSTNode, cst.Lambda] = NodeMemo()


def as_def(node: cst.Lambda) -> cst.FunctionDef:
    """The `def` a lambda stands for (the same node each time)."""
    return _defs(node)


def function_value(engine: Engine, node: cst.Lambda) -> FunctionValue:
    """What evaluating `node` gives: a function, as a `def` there would bind (a closure over the enclosing
    function's names as they are now; at a module's top level, its globals as they are at call time)."""
    fn = _defs(node)
    frame = engine.frame
    owner = frame.owner if frame.function is None else None  # in a class body, a method (`act = lambda self: ...`)
    # the names it can see besides the globals: a function's locals, or a comprehension's variables at a
    # module's top level (its env a copy of the globals there; a class body's names are no closure in Python)
    local = frame.function is not None or (frame.env is not frame.globals and owner is None)
    closure = decorators.Closure(dict(frame.env)) if local else None
    if engine.log is not None:
        engine.log.defined(fn)  # its body is part of the body it is written in (roots.py)
    return FunctionValue(fn, NAME, engine.scope, owner, closure)


def origin(node: cst.CSTNode) -> cst.CSTNode:
    """Where a finding at `node` is shown: the lambda, for a node made for one's `def`; else `node`."""
    return _origins.peek(node) or node
