"""The engine boundary: the state of a run of the interpreter, and the `Engine` interface to it.

As mypy's `checker_shared.py` does for its checker, this module is what the helpers of the engine see:
call dispatch (dispatch.py), parameter binding and declared-type checks (signature.py), inlined calls and
their summaries (inline.py), module contracts and typed config fields (contracts.py, configs.py). They
import this module and never the interpreter (analysis/interp/), which implements `Engine` and imports
them: the dependencies point one way.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

import libcst as cst

from spmdcheck.analysis.binding import Arg
from spmdcheck.analysis.context import Analysis, FileContext
from spmdcheck.analysis.roots import RootLog
from spmdcheck.analysis.values import ClassValue, FunctionValue, InstanceValue, RankValue, Value


@dataclass
class Scope:
    """A module's top level: the file it belongs to and its global names."""

    ctx: FileContext
    globals: dict[str, Value]


_FRAME_SERIALS = itertools.count(1)


@dataclass
class Frame:
    """One scope being interpreted."""

    env: dict[str, Value]
    globals: dict[str, Value]
    returns: list[tuple[Value, cst.CSTNode]] = field(default_factory=list)
    function: cst.FunctionDef | None = None
    owner: ClassValue | None = None  # the class whose method this is (for super())
    exited: bool = False  # a return/raise ended this path: the rest of the block is not reached
    jumped: bool = False  # a break/continue ended this path of the loop body
    # in-place writes to parameters still bound to the caller's object: the call's effects on its arguments
    param_effects: dict[str, Value] = field(default_factory=dict)
    rebound: set[str] = field(default_factory=set)  # parameters reassigned: later writes are local
    top: bool = False  # a module's top level (not a class body, a function or a `__main__` block)
    yields: Any = None  # a generator's body running: its rankflow.YieldLog
    # which run of its scope this is: a condition on a local name is one choice within one run only
    serial: int = field(default_factory=lambda: next(_FRAME_SERIALS), compare=False)

    def ended(self) -> str | None:
        """How the current path ended: "exited" (return/raise), "jumped" (break/continue), or None."""
        return "exited" if self.exited else "jumped" if self.jumped else None


@dataclass
class Summary:
    """What a call of a checked function did, for the same abstract arguments: replayed, not re-run."""

    result: Value
    collectives: list[tuple[str, str | None, cst.CSTNode]]
    param_effects: dict[str, Value]
    instance_states: list[tuple[int, dict[str, Value]]]  # (argument position, -1: receiver) -> attributes after
    units: frozenset = frozenset()  # the function bodies the call ran (roots.RootLog)
    root: tuple | None = None  # the root that ran it


class Importer(Protocol):
    """The program's modules, as the interpreter sees them."""

    def kind(self, name: str) -> str | None:
        """ "checked", "library" (imported, parsed only when used) or None (not part of the program)."""

    def load(self, name: str) -> Scope | None:
        """A module's top-level names, running it first if needed (None: not loadable)."""

    def deferrable(self, importer: str, name: str) -> bool:
        """Whether a top-level import of `name` in `importer` may run it later, when a name of it is read."""


# ----------------------------------------------------------------------------- typed config fields
Slot = tuple[object, str]  # (the parent's slot, or the id of its class when it has none; field name)


@dataclass
class ConfigSlots:
    """What the analysis learnt about typed config fields (configs.py)."""

    fields: dict[tuple[int, str], tuple[InstanceValue, InstanceValue]] = field(default_factory=dict)
    slot_of: dict[int, Slot] = field(default_factory=dict)  # id(config object of a field) -> its slot
    contracts: dict[Slot, object] = field(default_factory=dict)  # slot -> ContractValue (or configs.AMBIGUOUS)
    built: dict[int, tuple[InstanceValue, Slot]] = field(default_factory=dict)  # id(module object) -> its slot
    narrowed: dict[Slot, object] = field(default_factory=dict)  # slot -> the config class asserted for it
    modules: dict[int, tuple[InstanceValue, InstanceValue]] = field(default_factory=dict)  # config -> module
    builders: frozenset[str] | None = None
    version: int = 0  # counts the contracts attached to slots: a call summarised before one attached is stale
    classes: dict[int, ClassValue] = field(default_factory=dict)  # id(class) -> class, for slots' names


# A root waiting in the queue: (function, or a module's `__main__` block; its module; owning class; root key)
QueuedRoot = tuple[cst.FunctionDef | cst.If, Scope, ClassValue | None, tuple | None]


@dataclass
class RunState:
    """What a run learns and keeps across the roots it checks (not undone when a root ends)."""

    # functions to check on their own after the top level ran; a module's `if __name__ == "__main__":` block
    # is queued as one too (interp/branches.py `_defer_main`)
    queue: list[QueuedRoot] = field(default_factory=list)
    summaries: dict[tuple, Summary] = field(default_factory=dict)  # memoised calls (inline.py)
    instances: dict[int, InstanceValue] = field(default_factory=dict)  # class id -> the object its methods see
    contracts: dict[int, Value] = field(default_factory=dict)  # module class id -> the contract that reached it
    tp_plans: dict[int, Any] = field(default_factory=dict)  # module class id -> its tensor-parallel plan (tp_plans.py)
    checked: set[int] = field(default_factory=set)  # functions already checked on their own (ids of their nodes)
    slots: ConfigSlots = field(default_factory=ConfigSlots)
    # id(dict) -> (the dict, entries a top level registered into it since it was made: containers.py): every
    # module that imported the dict sees them, as every importer of a Python dict sees its later writes
    registered: dict[int, tuple[Value, list]] = field(default_factory=dict)

    def recheck(self, forward: FunctionValue, owner: ClassValue) -> None:
        """A module's `forward` learnt something after it was checked (a contract reached it): check it again."""
        if id(forward.node) in self.checked:
            self.queue.append((forward.node, forward.scope, owner, None))  # type: ignore[arg-type]


class Engine(Analysis, Protocol):
    """What the engine's helpers (dispatch, signature, inline, contracts, configs) see of the interpreter.

    Beyond `Analysis` (what transfer functions see): the frame being run and the file it belongs to,
    evaluation and execution, inlined calls, and the state a call saves, replays or compares.
    """

    frame: Frame
    scope: Scope
    importer: Importer | None
    log: RootLog | None  # what each root depends on (a recorded run; roots.py)
    run: RunState
    checking: bool  # False inside spmd.no_typecheck
    loss_parallel: bool  # inside `with loss_parallel():`
    inline_stack: list[cst.FunctionDef]  # the functions being inlined, outermost first
    call_sites: list[tuple[FileContext, cst.CSTNode]]  # the calls being inlined, outermost first
    collectives: list[tuple[str, str | None, cst.CSTNode]]  # collectives issued, in order
    # writes to variables recorded instead of applied, while a call is typed per alternative
    effects: list[tuple[cst.CSTNode | None, Value]] | None
    divergent: list[tuple[RankValue, cst.CSTNode]]  # rank-dependent conditions the code runs under
    rank_branches: int  # arms of rank-dependent `if`s being run
    attr_logs: list  # one per `if` arm and loop pass being run to be joined (interp/branches.py `attr_writes`)
    conditions_taken: list[tuple[object, bool]]  # the conditions of the `if` arms being run, with their truth

    def eval(self, node: cst.BaseExpression) -> Value: ...

    def exec_block(self, body: Sequence[cst.CSTNode]) -> None: ...

    def call(self, func: FunctionValue, args: list[Arg], node: cst.CSTNode, receiver: Value | None = None) -> Value:
        """Inline a call of a checked function (inline.py `call_function`)."""

    def entered(self, frame: Frame, scope: Scope | None = None) -> AbstractContextManager[Frame]:
        """`with`: run in `frame` (and in `scope`'s file and globals, if given); the frame, grad mode, mesh,
        checking mode, file and scope are restored after."""

    def join_effects(self, per_alternative: list[tuple[list[tuple[cst.CSTNode | None, Value]], tuple]]) -> None: ...

    def set_attr(self, owner: InstanceValue, name: str, value: Value | None) -> None: ...

    def remember_attr(self, owner: InstanceValue, name: str) -> None: ...

    def resolve_lazy(self, value: Value) -> Value: ...

    def settle(self, value: Value) -> Value: ...

    def instance_for(self, cls: ClassValue) -> InstanceValue:
        """The object a class's methods are checked on (interp/modules.py)."""


__all__ = [
    "ConfigSlots",
    "Engine",
    "Frame",
    "Importer",
    "QueuedRoot",
    "RunState",
    "Scope",
    "Slot",
    "Summary",
]
