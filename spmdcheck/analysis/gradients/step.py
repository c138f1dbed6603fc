"""Where the gradient walk starts: a function that steps an optimizer (`<x>.step()` as a statement), checked
on its own by the engine (interp/modules.py calls `check_training_step` after its body ran).

Its parameters come from a builder of the same module when they are unknown: a function returning a tuple
of names that the step function takes by the same names (`build()` returning `model, optimizer, batch` for
`step(model, optimizer, batch)`, as a training script's setup hands its objects to its loop).
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from spmdcheck.analysis.frames import Scope
from spmdcheck.analysis.gradients import exprs, statements
from spmdcheck.analysis.gradients.state import OPAQUE
from spmdcheck.analysis.gradients.trigger import block_statements
from spmdcheck.analysis.gradients.walker import GiveUp, Walker


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
    body = block_statements(fn)
    if not body or not isinstance(body[-1], cst.SimpleStatementLine):
        return None
    last = body[-1].body[0]
    if not isinstance(last, cst.Return) or not isinstance(last.value, cst.Tuple):
        return None
    names = [e.value.value for e in last.value.elements if isinstance(e.value, cst.Name)]
    return names if len(names) == len(last.value.elements) else None
