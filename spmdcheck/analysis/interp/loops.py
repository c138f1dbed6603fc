"""Loops: a loop body runs to a fixed point (bounded), stopping after one pass when a second would only
repeat it (loopreads.py); a rank-dependent trip count makes what the body issues reached only on some ranks.
A part of the engine."""

from __future__ import annotations

import libcst as cst

from spmdcheck.analysis import rankflow
from spmdcheck.analysis.context import FileContext
from spmdcheck.analysis.frames import Frame
from spmdcheck.analysis.interp.branches import joined
from spmdcheck.analysis.interp.loopreads import exposed_reads
from spmdcheck.analysis.interp.syntax import block_body, names_written
from spmdcheck.analysis.interp.unrolling import run_unrolled
from spmdcheck.analysis.values import (
    UNKNOWN,
    Alternatives,
    RankValue,
    Value,
    is_tensor,
    made_mark,
    widen,
)

_ABSENT = object()  # a name a dict does not hold


class LoopRunner:
    """Runs `for` and `while` loops (a part of `Interpreter`, interp/engine.py)."""

    # the engine's state this part reads and writes (interp/engine.py `Interpreter.__init__`)
    ctx: FileContext
    frame: Frame
    collectives: list[tuple[str, str | None, cst.CSTNode]]
    divergent: list[tuple[RankValue, cst.CSTNode]]
    rank_specific: tuple[cst.CSTNode, list[str]] | None
    loop_reads: dict[int, tuple[cst.CSTNode, frozenset[str] | None]]
    inline_stack: list[cst.FunctionDef]

    def exec_loop(self, node: cst.For | cst.While) -> None:
        if isinstance(node, cst.For):
            iterable = rankflow.iterated(self, self.eval(node.iter), node.iter)
            if run_unrolled(self, node, iterable):  # type: ignore[arg-type]
                return  # a few known items: one pass each, in order (unrolling.py)
            item = rankflow.item_of(iterable)
            bound = iterable
        else:
            bound = self.eval(node.test)
            item = UNKNOWN
        depth = len(self.divergent)
        if isinstance(bound, RankValue):
            self.divergent.append((bound, node))  # a rank-dependent trip count
        entry = dict(self.frame.env)
        try:
            self._exec_loop(node, item)
        finally:
            del self.divergent[depth:]
        if isinstance(bound, RankValue) and not bound.invariant:
            # (preview, SPMD502) tensors the loop body writes went through it a rank-dependent number of times
            written = names_written(block_body(node))
            names = [n for n in sorted(written) if is_tensor(self.frame.env.get(n, entry.get(n, UNKNOWN)))]
            self.rank_specific = (node, names)

    def _exec_loop(self, node: cst.For | cst.While, item: Value) -> None:
        ref = self.ctx.site(node)
        # Iterate to a fixed point (bounded): a loop body may run zero or more times.
        for pass_number in range(4):
            before = dict(self.frame.env)
            first_collective = len(self.collectives)
            mark = made_mark()
            if isinstance(node, cst.For):
                self.assign(node.target, item, None)
            with self.attr_writes() as writes:
                self.exec_block(block_body(node))
            if self.frame.exited:  # the body returned: after the loop is the path where it did not
                self.frame.env = before
            self.frame.exited = self.frame.jumped = False
            after = self.frame.env
            merged = {n: _loop_widen(joined(before, after, n, ref)) for n in set(before) | set(after)}
            self.frame.env = merged
            # the objects the body wrote: their attributes joined with the values before this pass (an object
            # the pass made is new in every pass: the next pass reaches it only through what is compared)
            attrs_changed = self.join_attrs([], {}, writes, ref, _loop_widen, made_after=mark)
            if attrs_changed:
                continue
            if merged == before:
                break
            if pass_number == 0 and self._repeats(node, before, merged):
                # the second pass the loop would run reads what this one read: it would repeat it (its
                # collectives are counted twice, as that pass would call them again: `_check_rank_branch`)
                self.collectives.extend(self.collectives[first_collective:])
                break
        if node.orelse is not None:
            self.exec_block(block_body(node.orelse))

    def _repeats(self, node: cst.For | cst.While, before: dict[str, Value], merged: dict[str, Value]) -> bool:
        """Whether another pass of a loop body that ran once from `before` would run as that pass did: every
        name whose value the pass changed is written before it is read (loopreads.py). Only in a function:
        at a module's top level, the functions the body calls read its variables as globals."""
        if self.frame.function is None:
            return False
        key = id(node)
        cached = self.loop_reads.get(key)
        if cached is None or cached[0] is not node:
            cached = self.loop_reads[key] = (node, exposed_reads(node))
        exposed = cached[1]
        if exposed is None:
            return False
        return not any(name in exposed for name, value in merged.items() if before.get(name, _ABSENT) != value)


def _loop_widen(value: Value) -> Value:
    # Alternatives created by a loop's back edge describe iterations, not user branches:
    # keep them bounded by widening to what all iterations agree on.
    if type(value) is Alternatives and len(value.options) > 2:  # exact type: asked of every name of every pass
        return widen([t for t, _ in value.options])
    return value
