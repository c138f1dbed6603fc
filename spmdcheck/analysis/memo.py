"""Facts read from a syntax node once and kept for the next time the analysis meets the same node.

A fact lives as long as the program whose node it was read from: `forget_program_facts` (called when an
analysis ends) drops every memo's facts, so no memo keeps a finished program's syntax trees alive (a
run's later programs, and the cycle collector's catch-up between programs, would pay for them)."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

N = TypeVar("N")  # the kind of node
T = TypeVar("T")  # the fact

_MEMOS: weakref.WeakSet[NodeMemo] = weakref.WeakSet()


class NodeMemo(Generic[N, T]):
    """`compute(node)`, once per node of the running program: keyed by the node's identity, and the node
    kept with its fact so its id is never another node's (libcst nodes take no weak references)."""

    def __init__(self, compute: Callable[[N], T] | None = None) -> None:
        self._compute = compute
        self._kept: dict[int, tuple[N, T]] = {}
        _MEMOS.add(self)

    def __call__(self, node: N) -> T:
        assert self._compute is not None, "a NodeMemo made without `compute` is read with `get`"
        return self.get(node, self._compute)

    def get(self, node: N, compute: Callable[[N], T]) -> T:
        """The fact of `node`, computed by `compute(node)` the first time (for a fact that needs more than
        the node: the caller's context, which is the same for the node throughout its program)."""
        kept = self._kept.get(id(node))
        if kept is not None and kept[0] is node:
            return kept[1]
        fact = compute(node)
        self._kept[id(node)] = (node, fact)
        return fact

    def peek(self, node: N) -> T | None:
        """The fact of `node` if one was computed (None: none yet; nothing is computed)."""
        kept = self._kept.get(id(node))
        return kept[1] if kept is not None and kept[0] is node else None

    def forget(self) -> None:
        self._kept.clear()


def forget_program_facts() -> None:
    """Drop the facts of every memo: the program they were read from has been analysed."""
    for memo in list(_MEMOS):
        memo.forget()
