"""Whether a function steps an optimizer: the statement scan that decides where the gradient walk starts.

Kept apart from the walk (step.py and the modules it imports, about 0.1 s to import) so that the engine
can ask it of every function it runs and import the walk only for a function that steps one: most programs
(and every warm run that re-runs a few roots) have none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import libcst as cst

_MAX_SCAN = 400  # statements looked at for a `.step()` in one function


def steps_optimizer(fn: cst.FunctionDef) -> bool:
    """Whether `fn` has a statement `<something>.step()`, or one through a lambda (statements only: cheap for
    every function)."""
    budget = [_MAX_SCAN]
    return _scan(block_statements(fn), budget)


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
            if _scan(block_statements(stmt), budget):
                return True
            orelse = getattr(stmt, "orelse", None)
            if orelse is not None and _scan(block_statements(orelse), budget):
                return True
    return False


def _steps(value: cst.BaseExpression) -> bool:
    """`<x>.step()`, also through a lambda called at once: `(lambda: opt.step())()`, `(lambda fn=opt.step: fn())()`."""
    if type(value) is not cst.Call:
        return False
    func = value.func
    if type(func) is cst.Attribute:
        return func.attr.value == "step"
    if type(func) is cst.Call and _names_step(func):  # `getattr(optimizer, "step")()`
        return True
    if type(func) is not cst.Lambda:
        return False
    params = func.params
    defaults = [p.default for p in (*params.posonly_params, *params.params, *params.kwonly_params)]
    return _steps(func.body) or any(type(d) is cst.Attribute and d.attr.value == "step" for d in defaults)


def _names_step(call: cst.Call) -> bool:
    """`getattr(x, "step")`: the attribute named by a constant."""
    if type(call.func) is not cst.Name or call.func.value != "getattr" or len(call.args) != 2:
        return False
    name = call.args[1].value
    return type(name) is cst.SimpleString and name.evaluated_value == "step"


def block_statements(node: Any) -> Sequence[cst.CSTNode]:
    """The statements of a compound statement's block (an `elif`: the `If` itself)."""
    body = getattr(node, "body", None)
    if isinstance(body, cst.IndentedBlock):
        return body.body
    if isinstance(node, cst.If):
        return [node]
    return ()
