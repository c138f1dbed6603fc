"""Branches: an `if` runs both arms from the same state and joins them (variables and object attributes);
a rank-dependent condition is checked for collectives only some ranks reach (SPMD501) and tensors computed
differently on some ranks (SPMD502). A part of the engine."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import libcst as cst

from spmdcheck.analysis.context import FileContext
from spmdcheck.analysis.findings import Finding
from spmdcheck.analysis.frames import Frame, RunState, Scope
from spmdcheck.analysis.interp.loopreads import attr_path
from spmdcheck.analysis.interp.syntax import block_body, is_main_guard, names_used
from spmdcheck.analysis.roots import RootLog
from spmdcheck.analysis.values import (
    UNKNOWN,
    Assumed,
    InstanceValue,
    Literal,
    PyNumber,
    RankValue,
    Unknown,
    Value,
    is_tensor,
    join,
)
from spmdcheck.diagnostics.violations.control_flow import CollectiveInRankBranch, RankSpecificGraph


class BranchRunner:
    """Runs `if` statements (a part of `Interpreter`, interp/engine.py)."""

    # the engine's state this part reads and writes (interp/engine.py `Interpreter.__init__`)
    ctx: FileContext
    frame: Frame
    scope: Scope
    log: RootLog | None
    run: RunState
    inline_stack: list[cst.FunctionDef]
    collectives: list[tuple[str, str | None, cst.CSTNode]]
    last_test: Value
    rank_branches: int
    attr_logs: list[list[tuple[InstanceValue, str, Value | None]]]
    rank_specific: tuple[cst.CSTNode, list[str]] | None
    conditions_taken: list[tuple[object, bool]]

    def exec_if(self, node: cst.If) -> None:
        if self.frame.top and is_main_guard(node.test):
            self._defer_main(node)
            return
        test = self.eval(node.test)
        self._exec_if(node, test)
        self.last_test = test

    def _defer_main(self, node: cst.If) -> None:
        """`if __name__ == "__main__":` at a module's top level: what runs when the file is the script, after its
        top level, never when another module imports it. Its block is checked as a root of its own after the top
        levels (`analyze_main`), on a copy of the module's names; its `else` is what an import runs."""
        library = self.scope.ctx.library  # a library is never the script: its block never runs
        if not library:
            log = self.log
            self.run.queue.append((node, self.scope, None, log.queue_key(node) if log is not None else None))
        if isinstance(node.orelse, cst.If):
            self.exec_if(node.orelse)
        elif node.orelse is not None:
            self.exec_block(block_body(node.orelse))

    def _exec_if(self, node: cst.If, test: Value) -> None:
        if isinstance(test, Literal) and (self.inline_stack or isinstance(test, Assumed)):
            # In a call with known arguments a constant condition picks its branch (a `reduce_results=True`
            # default selects the reduction). Functions checked on their own keep both branches: there a
            # module constant stands for a setting that may change.
            taken = node.body if test.value else node.orelse
            if isinstance(taken, cst.If):
                self.exec_if(taken)
            elif taken is not None:
                self.exec_block(block_body(taken))
            return
        ref = self.ctx.site(node)
        before = dict(self.frame.env)
        start = len(self.collectives)
        ranked = int(isinstance(test, RankValue))
        self.rank_branches += ranked
        try:
            self._exec_arms(node, test, ref, before, start, self.condition_key(node.test))
        finally:
            self.rank_branches -= ranked

    def condition_key(self, test: cst.BaseExpression) -> tuple[object, bool] | None:
        """What an `if` tests and its truth in the `if` arm, when two `if`s testing it see one value: a name or
        attribute chain (`sp`, `self.sequence_parallel`, `not cfg.sp`) or a comparison of such with
        constants, in this run of the function (an object's attribute: on that object). None: any other
        test (a call may answer differently each time)."""
        truth = True
        while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:  # exact types: no ABC check
            test, truth = test.expression, not truth
        if type(test) is cst.Name:
            return ("name", self.frame.serial, test.value), truth
        path = attr_path(test)
        if path is not None:
            root, _, rest = path.partition(".")
            owner = self.frame.env.get(root, self.frame.globals.get(root))
            if isinstance(owner, InstanceValue):
                return ("attr", owner.made, rest), truth
            return ("attr", self.frame.serial, path), truth
        if type(test) is cst.Comparison:
            parts = [_stable_key(test.left)]
            for c in test.comparisons:
                parts += [type(c.operator).__name__, _stable_key(c.comparator)]
            if None not in parts:
                return ("compare", self.frame.serial, tuple(parts)), truth
        return None

    def _exec_arms(
        self,
        node: cst.If,
        test: Value,
        ref: int,
        before: dict[str, Value],
        start: int,
        condition: tuple[object, bool] | None = None,
    ) -> None:
        on_path = self.conditions_taken
        if condition is not None:
            on_path.append(condition)
        try:
            with self.attr_writes() as if_writes:
                self.exec_block(block_body(node))
        finally:
            if condition is not None:
                on_path.pop()
        in_if = self.collectives[start:]
        after_if, if_ended = self.frame.env, self.frame.ended()
        attrs_after_if = {(id(o), n): o.attrs.get(n) for o, n, _ in if_writes}
        for owner, name, previous in reversed(if_writes):  # the else arm starts from the objects before the `if`
            put_attr(owner, name, previous)
        self.frame.env = dict(before)
        self.frame.exited = self.frame.jumped = False
        middle = len(self.collectives)
        if condition is not None:
            on_path.append((condition[0], not condition[1]))
        try:
            with self.attr_writes() as else_writes:
                if node.orelse is not None:
                    if isinstance(node.orelse, cst.If):
                        self.exec_if(node.orelse)
                    else:
                        self.exec_block(block_body(node.orelse))
        finally:
            if condition is not None:
                on_path.pop()
        self.join_attrs(if_writes, attrs_after_if, else_writes, ref, condition=condition)
        in_else = self.collectives[middle:]
        if isinstance(test, RankValue):
            self._check_rank_branch(node, test, in_if, in_else)
        after_else, else_ended = self.frame.env, self.frame.ended()
        if if_ended and else_ended:
            # nothing after the `if` runs on either path (return/raise, or break/continue in a loop)
            self.frame.exited = if_ended == "exited" and else_ended == "exited"
            self.frame.jumped = not self.frame.exited
            return
        self.frame.exited = self.frame.jumped = False
        if if_ended or else_ended:
            # only the arm that falls through reaches the code after the `if`
            self.frame.env = after_else if if_ended else after_if
            return
        if isinstance(test, RankValue):
            self.rank_specific = (node, self._rank_specific_tensors(test, after_if, after_else))
        merged: dict[str, Value] = {}
        for name in set(after_if) | set(after_else):
            a, b = after_if.get(name, UNKNOWN), after_else.get(name, UNKNOWN)
            if a is b:
                merged[name] = a  # what `join` gives (most names: neither arm wrote them)
            elif isinstance(test, RankValue) and a != b and _plain(a) and _plain(b):
                # set differently on the two sides of a rank-dependent condition: the number now
                # differs across ranks as the condition does (`if last_rank: n -= 1`, then `range(n)`)
                merged[name] = test
            else:
                merged[name] = join(a, b, ref, condition)
        self.frame.env = merged

    def join_attrs(
        self,
        if_writes: list[tuple[InstanceValue, str, Value | None]],
        after_if: dict[tuple[int, str], Value | None],
        else_writes: list[tuple[InstanceValue, str, Value | None]],
        ref: int,
        widen: Callable[[Value], Value] | None = None,
        made_after: int | None = None,
        condition: tuple[object, bool] | None = None,
    ) -> bool:
        """Each attribute an arm wrote: the join of its values after the two arms (the current values
        are the second arm's). An arm that ended (return/raise) is joined too: its writes may reach a
        caller, and a join only loses precision. Whether any attribute now differs from before."""
        before: dict[tuple[int, str], tuple[InstanceValue, str, Value | None]] = {}
        for owner, name, previous in if_writes + else_writes:
            before.setdefault((id(owner), name), (owner, name, previous))
        changed = False
        for key, (owner, name, previous) in before.items():
            a = after_if.get(key, previous)
            b = owner.attrs.get(name)
            # an attribute set on one path only: unknown after the `if` (reading it may fail on the other)
            merged = b if a is b else join(a, b, ref, condition) if a is not None and b is not None else UNKNOWN
            if widen is not None and merged is not None:
                merged = widen(merged)
            if merged is not b:
                self.set_attr(owner, name, merged)
            if merged != previous and (made_after is None or owner.made < made_after):
                changed = True
        return changed

    def _rank_specific_tensors(self, test: RankValue, after_if: dict, after_else: dict) -> list[str]:
        """(preview, SPMD502) Tensors computed differently on the two sides of a rank-dependent `if`.

        A membership guard (`rank in ranks_of(g)`) is left alone: whether a rank belongs to a group is
        not a computation that differs between the ranks running it."""
        if test.invariant:
            return []
        names = []
        for name in sorted(set(after_if) | set(after_else)):
            a, b = after_if.get(name, UNKNOWN), after_else.get(name, UNKNOWN)
            if a is not b and (is_tensor(a) or is_tensor(b)) and "." not in name:
                names.append(name)
        return names

    def report_rank_specific(
        self, node: cst.If | cst.For | cst.While, names: list[str], rest: Sequence[cst.CSTNode]
    ) -> None:
        """Only a tensor used after the `if` continues into the computation: logging and saving inside the
        branch (the rank-0 patterns compiled programs keep) end there."""
        used = names_used(rest)
        live = [n for n in names if n in used]
        if not live:
            return
        site = self.ctx.site(node)
        loop = isinstance(node, (cst.For, cst.While))
        self.report(
            Finding.of(
                RankSpecificGraph(live[0], site, loop=loop), node.iter if isinstance(node, cst.For) else node.test
            )
        )

    def _check_rank_branch(self, node: cst.If, test: RankValue, in_if: list, in_else: list) -> None:
        """Collectives must be called by every rank of their group: a rank-dependent branch may not differ.

        Only collectives whose group the condition splits count: a condition on the tp rank is the same
        on every rank of a dp group, and `rank in ranks_of(g)` is the same on every member of g.
        """
        in_if = [c for c in in_if if test.diverges_along(c[1])]
        in_else = [c for c in in_else if test.diverges_along(c[1])]
        if_keys = [(api, axis) for api, axis, _ in in_if]
        else_keys = [(api, axis) for api, axis, _ in in_else]
        if if_keys == else_keys:
            return
        only_if = [c for c in in_if if (c[0], c[1]) not in else_keys]
        only_else = [c for c in in_else if (c[0], c[1]) not in if_keys]
        if only_if or only_else:
            (api, axis, call), in_true_arm = (only_if[0], True) if only_if else (only_else[0], False)
        else:  # the same collectives in another order
            (api, axis, call), in_true_arm = in_if[0], True
        site = self.ctx.site(node)
        self.report(Finding.of(CollectiveInRankBranch(api, axis, "branch", site, arm=in_true_arm), call))

    def attr_writes(self) -> _AttrWriteLog:
        """The attribute writes made within the block (each with the value it replaced)."""
        return _AttrWriteLog(self.attr_logs)


class _AttrWriteLog:
    """`with`: a log of the attribute writes made in the block, on the interpreter's stack of logs while it
    runs (a plain class: cheaper than a generator context manager, and entered for every `if` arm)."""

    __slots__ = ("logs", "writes")

    def __init__(self, logs: list[list[tuple[InstanceValue, str, Value | None]]]) -> None:
        self.logs = logs
        self.writes: list[tuple[InstanceValue, str, Value | None]] = []

    def __enter__(self) -> list[tuple[InstanceValue, str, Value | None]]:
        self.logs.append(self.writes)
        return self.writes

    def __exit__(self, *exc: object) -> None:
        self.logs.pop()


def put_attr(owner: InstanceValue, name: str, value: Value | None) -> None:
    """Write an object's attribute (None: remove it), unlogged."""
    if value is None:
        owner.attrs.pop(name, None)
    else:
        owner.attrs[name] = value


def joined(a: dict[str, Value], b: dict[str, Value], name: str, ref: int | None) -> Value:
    """`join` of a name's values in two environments; the value itself when both hold the same object."""
    x, y = a.get(name, UNKNOWN), b.get(name, UNKNOWN)
    return x if x is y else join(x, y, ref)


def _plain(value: Value) -> bool:
    """A Python value (a number, a flag), not a tensor, object or container the analysis tracks."""
    return isinstance(value, (Literal, Unknown, PyNumber, RankValue))


def _stable_key(node: cst.BaseExpression) -> str | None:
    """A name, an attribute chain or a constant (reading it twice gives the same value), spelled; else None."""
    kind = type(node)
    if kind is cst.Integer or kind is cst.Float or kind is cst.SimpleString:
        return f"{kind.__name__}:{node.value}"  # type: ignore[attr-defined]
    return attr_path(node)
