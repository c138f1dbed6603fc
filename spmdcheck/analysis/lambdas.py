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
from spmdcheck.analysis.interp.loopreads import names_in
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
# a lambda's `def` -> the function whose body holds the lambda (None: a module's or a class's top level)
_enclosing: NodeMemo[cst.FunctionDef, cst.FunctionDef | None] = NodeMemo()


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
    _enclosing.get(fn, lambda _: frame.function)  # the same function at every evaluation: the one it is written in
    if engine.log is not None:
        engine.log.defined(fn)  # its body is part of the body it is written in (roots.py)
    return FunctionValue(fn, NAME, engine.scope, owner, closure)


def origin(node: cst.CSTNode) -> cst.CSTNode:
    """Where a finding at `node` is shown: the lambda, for a node made for one's `def`; else `node`."""
    return _origins.peek(node) or node


def written_in(functions: list[cst.FunctionDef | None]) -> list[cst.FunctionDef | None]:
    """`functions` (those being run), and the function each lambda among them is written in: code inside a
    lambda is inside that function too (`Cls.apply(...)` in a lambda of `typecheck_forward`, spmd_api.py)."""
    out = list(functions)
    for fn in functions:
        while fn is not None and (fn := _enclosing.peek(fn)) is not None:
            out.append(fn)
    return out


def applied(call: cst.BaseExpression) -> cst.BaseExpression:
    """A lambda called where it is written, `(lambda p, fn=f: fn(p, k=2))(x)`, read as the call it makes,
    `f(x, k=2)`, for the scans that read calls by their syntax before anything runs (group_inference.py's
    `new_group(ranks)`). Anything else, or a lambda whose parameters its call does not name whole, is `call`."""
    lam = call.func if type(call) is cst.Call else None
    if type(lam) is not cst.Lambda or type(lam.body) is not cst.Call:
        return call
    params, body = lam.params, lam.body
    if params.posonly_params or params.kwonly_params or any(a.star for a in call.args):  # type: ignore[union-attr]
        return call
    star = params.star_arg.name.value if isinstance(params.star_arg, cst.Param) else None
    kwargs = params.star_kwarg.name.value if params.star_kwarg is not None else None
    bound: dict[str, cst.BaseExpression] = {p.name.value: p.default for p in params.params if p.default is not None}
    positional = [a for a in call.args if a.keyword is None]  # type: ignore[union-attr]
    extra, named = positional[len(params.params) :], []
    for param, arg in zip(params.params, positional):
        bound[param.name.value] = arg.value
    for arg in call.args:  # type: ignore[union-attr]
        if arg.keyword is not None and arg.keyword.value in bound or arg.keyword is not None and kwargs is None:
            return call  # (a keyword naming a parameter, or one with nowhere to go: left to the analysis)
        if arg.keyword is not None:
            named.append(arg)
    if (extra and star is None) or any(p.name.value not in bound for p in params.params):
        return call
    args: list[cst.Arg] = []
    for arg in body.args:
        name = arg.value.value if type(arg.value) is cst.Name else None
        if arg.star == "*" and name == star:
            args.extend(cst.Arg(a.value) for a in extra)
        elif arg.star == "**" and name == kwargs:
            args.extend(named)
        elif not arg.star and name in bound:
            args.append(arg.with_changes(value=bound[name]))  # type: ignore[index]
        else:
            args.append(arg)
    func = bound.get(body.func.value, body.func) if type(body.func) is cst.Name else body.func
    made = cst.Call(func, args)
    own = set(bound) | {star, kwargs}
    return call if own & names_in(made.func) or any(own & names_in(a.value) for a in args if a not in named) else made
