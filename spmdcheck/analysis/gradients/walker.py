"""The gradient walk: a small interpreter of the statements around a training step, over the values of state.py.

It follows what the engine's type interpreter does not: which parameters a model has and the attributes set
on them, loops over `parameters()` / `named_parameters()` / param groups / lists of gradients (one pass per
element, so a filter on an attribute or a name is decided per parameter), flattened buckets, and the calls of
the program's own functions (inlined). Everything else is `OPAQUE`; a call it cannot follow that receives a
model, a parameter or a gradient forgets what is known of those gradients, so the walk never guesses.
Expressions are in exprs.py, calls of library names in library.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from spmdcheck.analysis.context import FileContext
from spmdcheck.analysis.findings import Finding, Suggestion
from spmdcheck.analysis.frames import Scope
from spmdcheck.analysis.gradients.state import OPAQUE, GradientState, ItemList, Param
from spmdcheck.diagnostics.violation import Violation

MAX_STEPS = 20000  # statements and expressions one walk evaluates before it gives up (silently)
MAX_DEPTH = 12  # nested calls inlined
MAX_ITEMS = 512  # elements a loop is walked for one by one


class GiveUp(Exception):  # noqa: N818 - a signal, not an error
    """The walk left what it can follow (too long, too deep): it reports nothing more."""


class Return(Exception):  # noqa: N818
    def __init__(self, value: Any) -> None:
        self.value = value


class Break(Exception):  # noqa: N818
    pass


class Continue(Exception):  # noqa: N818
    pass


@dataclass
class Yields:
    """What a generator function of the program yields, run to its end when called (exprs.py)."""

    items: list[Any] = field(default_factory=list)
    unknown: bool = False  # a `yield from` of what the walk does not follow, a yield on a path it cannot decide
    first: GradientState | None = None  # the gradient state at the first yield


@dataclass
class WalkFrame:
    """One function (or module) being walked: its names, and the module whose globals it reads."""

    env: dict[str, Any]
    scope: Scope
    receiver: Any = None  # `self` of a method (for super())
    cls: Any = None  # the ClassValue whose method this is
    yields: Yields | None = None  # a generator's (exprs.py `run_generator`)


@dataclass
class Walker:
    """One walk of a training step (step.py starts it). See the package docstring for the interface."""

    engine: Any  # the interpreter (interp/engine.py): module globals, imports, settle
    mesh: tuple[str, ...]
    state: GradientState = field(default_factory=GradientState)
    tested_attrs: set[str] = field(default_factory=set)  # parameter attributes the walked filters test
    params_made: list[Param] = field(default_factory=list)
    steps: int = 0
    depth: int = 0
    frame: WalkFrame | None = None
    call_stack: list[int] = field(default_factory=list)
    reported: bool = False
    accumulation: Any = None  # accumulation.Accumulation: hooks, contexts entered (SPMD604)
    clipping: Any = None  # norms.Clipping: conditions of the undecided `if` arms, counted gradients (SPMD605)
    node_files: dict[int, tuple[cst.CSTNode, FileContext]] = field(default_factory=dict)
    # the walk's statements and calls (statements.py, exprs.py), given by step.py: they call back into this
    exec_block: Callable[[Walker, Sequence[cst.CSTNode]], None] = field(default=lambda w, body: None)
    call_function: Callable[..., Any] = field(default=lambda *a: None)

    # -- reports -------------------------------------------------------------------------------------------
    @property
    def ctx(self) -> FileContext:
        assert self.frame is not None
        return self.frame.scope.ctx

    def ctx_of(self, node: cst.CSTNode) -> FileContext:
        """The file holding `node`: the one it was remembered in (`remember`), or the running frame's."""
        held = self.node_files.get(id(node))
        return held[1] if held is not None else self.ctx

    def remember(self, node: cst.CSTNode) -> cst.CSTNode:
        """`node` (of the running frame's file) will be reported or cited later, maybe from another file."""
        if id(node) not in self.node_files:
            self.node_files[id(node)] = (node, self.ctx)
        return node

    def site(self, node: cst.CSTNode) -> int:
        return self.ctx_of(node).site(node)

    def report(self, violation: Violation, node: cst.CSTNode, advice: str | None = None) -> None:
        """Report `violation` at `node`; `advice`: code shown with its fix title (never applied: no span)."""
        ctx = self.ctx_of(node)
        title = violation.fix_title
        suggestions = [Suggestion(title, advice, None)] if advice is not None and title is not None else []
        ctx.report(Finding.of(violation, node, suggestions))
        self.reported = True

    def text(self, node: cst.CSTNode) -> str:
        return self.ctx_of(node).code_of(node).strip()

    def all_params(self) -> list[Param]:
        return self.params_made

    # -- frames -----------------------------------------------------------------------------------------------
    def tick(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise GiveUp

    def run_function(
        self,
        fn: cst.FunctionDef,
        scope: Scope,
        env: dict[str, Any],
        receiver: Any = None,
        cls: Any = None,
        yields: Yields | None = None,
    ) -> Any:
        """Walk `fn`'s body with its parameters bound in `env`; its return value (OPAQUE when it has none)."""
        if id(fn) in self.call_stack or self.depth >= MAX_DEPTH:
            return OPAQUE
        saved = self.frame
        self.frame = WalkFrame(env, scope, receiver, cls, yields)
        self.call_stack.append(id(fn))
        self.depth += 1
        log = getattr(self.engine, "log", None)
        if log is not None:
            log.enter_body(fn)  # the root's findings depend on this body (roots.py): an edit to it runs it again
        try:
            self.exec_block(self, _body(fn))
            return None
        except Return as ret:
            return ret.value
        finally:
            if log is not None:
                log.exit_body()
            self.depth -= 1
            self.call_stack.pop()
            self.frame = saved

    @property
    def env(self) -> dict[str, Any]:
        assert self.frame is not None
        return self.frame.env


def _body(fn: cst.FunctionDef) -> Sequence[cst.CSTNode]:
    body = fn.body
    if isinstance(body, cst.IndentedBlock):
        return body.body
    return [body]  # type: ignore[list-item]


def as_items(value: Any) -> list[Any] | None:
    if isinstance(value, ItemList) and not value.spoiled:
        return value.items if len(value.items) <= MAX_ITEMS else None
    return None
