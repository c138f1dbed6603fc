"""What each *root* of a program run depended on, so an edit re-runs only the roots it can change.

A program run has two phases: every module's top level (one root, `TOP`), then every function and
method checked on its own (one root each, in queue order). A root's findings depend on the state the
top level left (the same in every run whose top level and the function bodies it executed are the
same) and on the function bodies the root executed: its *units* (a unit is the body of a module-level
function or of a method of a module-level class, numbered per file as the pre-pass cuts them; a
nested function counts as the unit it is written in), and on the module-level names it read (each
recorded as a unit `(NAME_UNIT, name)`, whichever module's it was). Memoised calls and objects built once for
every method are shared between roots: the root that computed one is its *provider*, and a root that
reused it records the provider and the units the computation executed.

Roots are named by their place in the queue, which an edit inside function bodies does not change:
the k-th function the top level queued is `(0, k)`, and the j-th nested function a root of key
`(d, *path)` queued while it ran is `(d + 1, *path, j)`; these keys sort in queue order. A root that
runs again has all its nested functions run again (`parent` names the root that queued one).

A root that changes state other roots read (attaches a module contract, narrows a config field, teaches a
file an axis name) is a *writer*: a selective run runs every writer of the recorded run again, in queue order
with the roots it runs (so each sees the state it saw), and a skipped root counts as checked as it did (a
contract that reaches a checked `forward` queues it again, as `("again", *its first key, m)`); a run where an
edit reaches a writer, or a new writer appears, is the whole program's. (What a root writes to objects others
made is undone when it ends: interp/modules.py.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spmdcheck.analysis.values import Generation

TOP: tuple = ()  # the top-level phase of every module, as one root
Unit = tuple[int, int]  # (file index in the program, body index in the file), or (NAME_UNIT, a name read)
NAME_UNIT = -1  # the "file" of a module-level name a root read
UNKNOWN_UNIT: Unit = (-2, -2)  # the place of a function whose body is not numbered


class ElidedBody(BaseException):  # noqa: N818 - a signal, like budget.BudgetExceeded: no `except Exception` stops it
    """A selective run reached a function body it had left out, queued a root the record does not name, could
    not parse a deferred file, or did not run again a root it had to: the whole program must run instead (the
    reason, when given, is its message)."""


@dataclass
class RootRecord:
    units: set[Unit] = field(default_factory=set)
    providers: set[tuple] = field(default_factory=set)
    findings: list[Any] = field(default_factory=list)  # the Finding objects it reported, before de-duplication


class RootLog:
    """The recorder the interpreter reports to while a program runs (None when nothing records)."""

    def __init__(
        self,
        unit_of: dict[int, Unit] | None = None,
        run_only: set[tuple] | None = None,
        known: frozenset[tuple] | set[tuple] = frozenset(),
    ) -> None:
        self.unit_of = {} if unit_of is None else unit_of  # id(FunctionDef node) -> its unit
        self.run_only = run_only  # a selective run: the recorded roots to run again (None: all of them)
        self.known = known  # a selective run: the roots of the recorded run (any other is new, and runs)
        self.current: tuple = TOP
        # Which file's top level queued each top-level root (`top_files[k]` for root (0, k), -1: unknown), and
        # the files in the order their top levels started: a run on a part of the top levels (`top_only`, the
        # files whose top levels run; None: all) names its roots and orders its modules after a full run's.
        self.top_files: list[int] = []
        self.top_order: list[int] = []
        self.top_only: set[int] | None = None
        self.recorded_order: list[int] = []
        self.recorded_top_files: list[int] | None = None  # a selective run: `top_files` of the recorded run
        self.top_units: list[Unit] = []  # the body of each top-level root (0, k), UNKNOWN_UNIT when not numbered
        self.recorded_top_units: list | None = None  # a selective run: `top_units` of the recorded run
        self._top_keys: dict[int, list[int]] = {}  # with `top_only`: file -> the keys its top level queued
        self._file_queued: dict[int, int] = {}
        self.records: dict[tuple, RootRecord] = {TOP: RootRecord()}
        self.order: list[tuple] = [TOP]  # the roots in the order they ran
        self._stack: list[set[Unit]] = []  # units executed by the calls being computed, innermost last
        self._bodies: list[Unit | None] = []  # the unit of each function body being run, innermost last
        self._queued: dict[tuple, int] = {}  # root -> nested functions it queued so far
        self._top_queued = 0
        self.writers: set[tuple] = set()  # the roots that wrote state later roots read (see the module docstring)
        self.writes: dict[tuple, list] = {}  # writer -> what it wrote, in order (analysis/writes.py), None: unknown
        self.checked: set[tuple] = set()  # the roots whose function counts as checked (a contract re-queues it)
        self.recorded_checked: frozenset[tuple] = frozenset()  # a selective run: `checked` of the recorded run
        self._first_key: dict[int, tuple] = {}  # id(function node) -> the key of its first check
        self._again: dict[int, int] = {}  # id(function node) -> how often it was queued again
        self.top_writers: set[int] = set()  # files whose top level wrote to what another file's top level made
        self.built: dict[int, tuple[tuple, frozenset[Unit]]] = {}  # class id -> (builder root, units)
        self.unmapped: set[int] = set()  # files whose function bodies could not be numbered

    # ------------------------------------------------------------------ roots
    def run_part(self, top_only: set[int], top_files: list[int], top_order: list[int]) -> None:
        """Run the top levels of the files `top_only` only, in the order `top_order` (the recorded run's), the
        roots they queue named as `top_files` names them: a file's k-th queued function has the key it had then."""
        self.top_only = top_only
        self.recorded_order = top_order
        self._top_keys = {}
        for k, file in enumerate(top_files):
            self._top_keys.setdefault(file, []).append(k)

    def queue_key(self, node: Any = None) -> tuple:
        """The key of a function (`node`) the running code queues to be checked on its own."""
        if self.current == TOP:
            unit = self.unit_of.get(id(node))
            file = unit[0] if unit is not None else -1
            place = unit if unit is not None else UNKNOWN_UNIT
            if self.top_only is not None:
                n = self._file_queued.get(file, 0)
                self._file_queued[file] = n + 1
                keys = self._top_keys.get(file, ())
                if file < 0 or n >= len(keys) or not self._recorded_unit(keys[n], place):
                    raise ElidedBody  # not a function the recorded run queued: only the whole program knows
                return (0, keys[n])
            k = self._top_queued
            recorded = self.recorded_top_files
            moved = recorded is not None and (k >= len(recorded) or recorded[k] != file)
            if moved or not self._recorded_unit(k, place):
                raise ElidedBody  # the top levels queue in another order (an import moved): the keys name others
            self.top_files.append(file)
            self.top_units.append(place)
            self._top_queued += 1
            return (0, k)
        n = self._queued.get(self.current, 0)
        self._queued[self.current] = n + 1
        if self.current[0] in ("again", "in"):  # in a function checked again: named after it
            return ("in", *self.current, n)
        return (self.current[0] + 1, *self.current[1:], n)

    def _recorded_unit(self, k: int, place: Unit) -> bool:
        """Whether the recorded run's k-th top-level function is the body `place` (as a selective run numbers
        bodies: incremental.rekey renumbers the record after bodies were added or removed)."""
        units = self.recorded_top_units
        return units is None or (k < len(units) and tuple(units[k]) == tuple(place))

    def root_key(self, node: Any, key: tuple | None) -> tuple:
        """The key of a root about to run (or be skipped): its queue key, or for a function queued again (a
        contract reached it after its check) `("again", *its first key, m)`, the same in every run."""
        if key is not None:
            self._first_key.setdefault(id(node), key)
            return key
        first = self._first_key.get(id(node))
        m = self._again.get(id(node), 0)
        self._again[id(node)] = m + 1
        return ("again", *(first if first is not None else ("?",)), m)

    def skipped(self, key: tuple) -> bool:
        """A recorded root a selective run does not run: whether its function counts as checked (as it did)."""
        return key in self.recorded_checked

    def wants(self, key: tuple | None) -> bool:
        """Whether a queued root runs: in a selective run, a recorded root named to run again, a new root,
        and every nested function (only a root that runs again queues one, and its nested functions may
        not be the ones it queued before)."""
        if self.run_only is None or key is None or (key[0] != 0 and key[0] != "again"):
            return True
        return key in self.run_only or key not in self.known

    def enter(self, key: tuple) -> None:
        self.current = key
        self.records[key] = RootRecord()
        self.order.append(key)
        self._stack, self._bodies = [], []

    def leave(self) -> None:
        self._stack, self._bodies = [], []

    # ------------------------------------------------------------------ what a root executes
    def enter_body(self, node: Any) -> None:
        """A function body starts running (checked on its own or called): its unit is executed."""
        if self.run_only is not None and _elided(node):
            raise ElidedBody
        unit = self.unit_of.get(id(node))
        self._bodies.append(unit)
        self._stack.append({unit} if unit is not None else set())

    def exit_body(self) -> frozenset[Unit]:
        self._bodies.pop()
        return self.pop()

    def defined(self, node: object) -> None:
        """A function defined while another body runs counts as the unit it is written in."""
        if id(node) not in self.unit_of and self._bodies and self._bodies[-1] is not None:
            self.unit_of[id(node)] = self._bodies[-1]

    def read(self, name: str) -> None:
        """The running code read a module-level name (of any module, or one no module had): the root depends
        on it as on a unit, `(NAME_UNIT, name)` (an edit outside bodies changing only some names runs only the
        roots that read them: incremental.py)."""
        (self._stack[-1] if self._stack else self.records[self.current].units).add((NAME_UNIT, name))

    def push(self) -> None:
        self._stack.append(set())

    def pop(self) -> frozenset[Unit]:
        units = frozenset(self._stack.pop())
        (self._stack[-1] if self._stack else self.records[self.current].units).update(units)
        return units

    def reuse(self, provider: tuple | None, units: frozenset[Unit]) -> None:
        """A memoised result (or a shared object) computed by `provider` was used by the running root."""
        (self._stack[-1] if self._stack else self.records[self.current].units).update(units)
        if provider is not None and provider != self.current:
            self.records[self.current].providers.add(provider)

    # ------------------------------------------------------------------ findings and writes
    def found(self, finding: object) -> None:
        self.records[self.current].findings.append(finding)

    def mark(self) -> tuple[object, int]:
        """Where the running root's findings stand (`withdraw` takes back those found after it)."""
        return self.current, len(self.records[self.current].findings)

    def withdraw(self, mark: object) -> None:
        """Forget the findings the running root found since `mark` (analysis/context.py `withdraw`)."""
        root, count = mark  # type: ignore[misc]
        if root == self.current:
            del self.records[root].findings[count:]

    def wrote_shared(self, what: tuple | None = None) -> None:
        """The running root changed state later roots read; `what` describes it the same in every run
        (analysis/writes.py; None: it cannot be described)."""
        if self.current != TOP:
            self.writers.add(self.current)
            self.writes.setdefault(self.current, []).append(what)
        else:
            self.top_wrote()

    def top_wrote(self, owner_born: int | None = None) -> None:
        """A module's top level changed state another module's top level made (an attribute of its object,
        a contract of its class): an edit outside the bodies of that file then has everything run again."""
        here = Generation.current
        if here < 0 and owner_born != here:
            self.top_writers.add(-here - 1)


# The text of the string literal a selective run leaves in place of a body it does not need (incremental.elide)
ELIDED = "__spmdcheck_elided__"


def _elided(node: Any) -> bool:
    """Whether a function's body is the statement a selective run left in place of it."""
    statements = getattr(getattr(node, "body", None), "body", None)
    if not isinstance(statements, (list, tuple)) or len(statements) != 1:
        return False
    small = getattr(statements[0], "body", None)
    if not isinstance(small, (list, tuple)) or len(small) != 1:
        return False
    literal = getattr(getattr(small[0], "value", None), "value", None)
    return isinstance(literal, str) and literal.lstrip("\"").startswith(ELIDED)


def parent(key: tuple) -> tuple | None:
    """The root that queued a nested function's root (None for the top level's)."""
    if not key or key[0] == "again" or key[0] == 0:
        return None
    if key[0] == "in":
        return key[1:-1]  # a function queued by one checked again
    return (key[0] - 1, *key[1:-1])


def descends(key: tuple, roots: set[tuple]) -> bool:
    """Whether `key` or a root that (transitively) queued it is among `roots`."""
    node: tuple | None = key
    while node is not None:
        if node in roots:
            return True
        node = parent(node)
    return False
