"""Where the gradient walk starts: a function that steps an optimizer (`<x>.step()` as a statement), checked
on its own by the engine (interp/modules.py calls `check_training_step` after its body ran).

Its parameters come from a builder of the same module when they are unknown: a function returning a tuple
of names that the step function takes by the same names (`build()` returning `model, optimizer, batch` for
`step(model, optimizer, batch)`, as a training script's setup hands its objects to its loop).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import libcst as cst

from spmdcheck.analysis.frames import Scope
from spmdcheck.analysis.gradients import exprs, statements
from spmdcheck.analysis.gradients.state import OPAQUE
from spmdcheck.analysis.gradients.walker import GiveUp, Walker

_MAX_SCAN = 400  # statements looked at for a `.step()` in one function


def steps_optimizer(fn: cst.FunctionDef) -> bool:
    """Whether `fn` has a statement `<something>.step()`, or one through a lambda (statements only: cheap for
    every function)."""
    budget = [_MAX_SCAN]
    return _scan(_block(fn), budget)


_COMPOUND = frozenset((cst.If, cst.For, cst.While, cst.With, cst.Try))


def _scan(body: Sequence[cst.CSTNode], budget: list[int]) -> bool:
    for stmt in body:
        budget[0] -= 1
        if budget[0] < 0:
            return False
        kind = type(stmt)  # exact types: every function of every file is scanned, and an ABC check is slow
        if kind is cst.SimpleStatementLine:
            for small in stmt.body:
                small_kind = type(small)
                if small_kind is cst.Expr and _steps(small.value):
                    return True
                if small_kind is cst.Assign and type(small.value) is cst.Lambda and _steps(small.value.body):
                    return True  # `step_fn = lambda: optimizer.step()`, called later
        elif kind in _COMPOUND:
            if _scan(_block(stmt), budget):
                return True
            orelse = getattr(stmt, "orelse", None)
            if orelse is not None and _scan(_block(orelse), budget):
                return True
    return False


def _steps(value: cst.BaseExpression) -> bool:
    """`<x>.step()`, also through a lambda called at once: `(lambda: opt.step())()`, `(lambda fn=opt.step: fn())()`."""
    if type(value) is not cst.Call:
        return False
    func = value.func
    if type(func) is cst.Attribute:
        return func.attr.value == "step"
    if type(func) is not cst.Lambda:
        return False
    params = func.params
    defaults = [p.default for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
    return _steps(func.body) or any(type(d) is cst.Attribute and d.attr.value == "step" for d in defaults)


def _block(node: Any) -> Sequence[cst.CSTNode]:
    body = getattr(node, "body", None)
    if isinstance(body, cst.IndentedBlock):
        return body.body
    if isinstance(node, cst.If):
        return [node]
    return ()


def check_training_step(engine: Any, fn: cst.FunctionDef, scope: Scope) -> None:
    """Walk `fn` from its start with its parameters (from a builder, see the module docstring) and report
    the gradient synchronisation findings of its optimizer steps."""
    walker = Walker(engine, tuple(engine.mesh or scope.ctx.options.mesh))
    walker.exec_block = statements.exec_block
    walker.call_function = exprs.call_function
    try:
        env = _parameters(walker, fn, scope)
        walker.run_function(fn, scope, env)
    except (GiveUp, RecursionError):
        return
    except Exception:  # noqa: BLE001 - a walk is best effort: a construct it mishandles must not cost the file
        # every other finding (the engine reports a crash as SPMD000 and drops the file's findings)
        return


def _parameters(walker: Walker, fn: cst.FunctionDef, scope: Scope) -> dict[str, Any]:
    names = [p.name.value for p in fn.params.params]
    env: dict[str, Any] = {name: OPAQUE for name in names}
    if not names:
        return env
    builder = _builder(scope.ctx.module, fn, names)
    if builder is None:
        return env
    built = walker.run_function(builder, scope, {p.name.value: OPAQUE for p in builder.params.params})
    returned = _returned_names(builder)
    if isinstance(built, tuple) and returned is not None and len(built) == len(returned):
        for name, value in zip(returned, built):
            if name in env:
                env[name] = value
    return env


def _builder(module: cst.Module, fn: cst.FunctionDef, names: list[str]) -> cst.FunctionDef | None:
    """The module's function returning a tuple of at least two of `fn`'s parameter names."""
    for stmt in module.body:
        if isinstance(stmt, cst.FunctionDef) and stmt is not fn:
            returned = _returned_names(stmt)
            if returned is not None and len(set(returned) & set(names)) >= 2:
                return stmt
    return None


def _returned_names(fn: cst.FunctionDef) -> list[str] | None:
    body = _block(fn)
    if not body or not isinstance(body[-1], cst.SimpleStatementLine):
        return None
    last = body[-1].body[0]
    if not isinstance(last, cst.Return) or not isinstance(last.value, cst.Tuple):
        return None
    names = [e.value.value for e in last.value.elements if isinstance(e.value, cst.Name)]
    return names if len(names) == len(last.value.elements) else None
