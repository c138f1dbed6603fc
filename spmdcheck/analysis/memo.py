"""Facts read from a syntax node once and kept for the next time the analysis meets the same node."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

N = TypeVar("N")  # the kind of node
T = TypeVar("T")  # the fact


class NodeMemo(Generic[N, T]):
    """`compute(node)`, once per node: keyed by the node's identity, and the node kept with its fact so its id
    is never another node's (libcst nodes take no weak references). Bounded: past `limit` nodes it starts
    again (a fact is only ever recomputed, never wrong)."""

    def __init__(self, compute: Callable[[N], T], limit: int = 4096) -> None:
        self._compute = compute
        self._limit = limit
        self._kept: dict[int, tuple[N, T]] = {}

    def __call__(self, node: N) -> T:
        kept = self._kept.get(id(node))
        if kept is not None and kept[0] is node:
            return kept[1]
        fact = self._compute(node)
        if len(self._kept) >= self._limit:
            self._kept.clear()
        self._kept[id(node)] = (node, fact)
        return fact
