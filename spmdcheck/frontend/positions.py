"""Source positions of chosen nodes of a libcst module, at a fraction of libcst's cost.

libcst's `MetadataWrapper(module).resolve(PositionProvider)` visits the whole tree once for nothing (a
batched visit with no visitor, which rebuilds every node and throws it away), then generates the code
again while it builds a `CodeRange` (three frozen dataclasses) for every node and splits every token on
newlines: on a 1 MB file that is twice the parse, and a position table as big as the tree. A report needs
the positions of a few nodes (the findings', the lines their messages cite).

`positions(module, wanted)` generates the code once with a state that notes, for the wanted nodes only,
the index of the token where each starts and ends (libcst's rules: the range a node records with
`record_syntactic_position`, whose `start_node` / `end_node` it borrows, else the whole code it
generates), then turns those indices into lines and columns in one pass over the tokens. The ranges are
libcst's `CodeRange`s, equal to what `PositionProvider` gives (tests/test_robust_cost.py compares them).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from libcst import CSTNode, Module
    from libcst.metadata import CodeRange

_NEWLINE = re.compile(r"\r\n?|\n")


class _Nothing:
    """The context of a node whose position nobody asked for."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NOTHING = _Nothing()


class _Syntactic:
    """`record_syntactic_position` of a wanted node: its range once its code is generated."""

    __slots__ = ("state", "node", "start_node", "end_node", "start")

    def __init__(self, state: Any, node: CSTNode, start_node: CSTNode | None, end_node: CSTNode | None) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node
        self.start = 0

    def __enter__(self) -> None:
        self.start = self.state.index()

    def __exit__(self, *exc: object) -> None:
        state = self.state
        start = state.ranges[self.start_node][0] if self.start_node is not None else self.start
        end = state.ranges[self.end_node][1] if self.end_node is not None else state.index()
        state.ranges[self.node] = (start, end)


def _index_state_class() -> type:
    """The code generation state (made on first use: libcst is imported lazily)."""
    from libcst._nodes.internal import CodegenState

    class IndexState(CodegenState):
        # the token indices of wanted nodes; `wanted` None: every node
        __slots__ = ("wanted", "ranges", "starts")

        def __init__(self, default_indent: str, default_newline: str, wanted: set | None) -> None:
            super().__init__(default_indent=default_indent, default_newline=default_newline)
            self.wanted = wanted
            self.ranges: dict = {}
            self.starts: dict = {}

        def index(self) -> int:
            return len(self.tokens)

        def _wants(self, node: object) -> bool:
            return self.wanted is None or node in self.wanted

        def before_codegen(self, node: CSTNode) -> None:
            if self._wants(node) and node not in self.starts:
                self.starts[node] = self.index()

        def after_codegen(self, node: CSTNode) -> None:
            # a range recorded already (the syntactic one, or a node generated twice) is kept, as libcst does
            if self._wants(node) and node not in self.ranges:
                self.ranges[node] = (self.starts[node], self.index())

        def pop_trailing_newline(self) -> None:
            # libcst drops the token but not the position it reached (the module's range ends past it)
            pass

        def record_syntactic_position(  # type: ignore[override]
            self, node: CSTNode, *, start_node: CSTNode | None = None, end_node: CSTNode | None = None
        ) -> object:
            if not self._wants(node):
                return _NOTHING
            if self.wanted is not None:  # their ranges are borrowed: note them too (generated inside)
                for borrowed in (start_node, end_node):
                    if borrowed is not None:
                        self.wanted.add(borrowed)
            return _Syntactic(self, node, start_node, end_node)

    return IndexState


_state_class: type | None = None


def positions(module: Module, wanted: Collection[CSTNode] | None = None) -> dict[CSTNode, CodeRange]:
    """The `CodeRange` (libcst's `PositionProvider` range) of each wanted node of `module` (None: every
    node); a node not in the module has none."""
    global _state_class
    if _state_class is None:
        _state_class = _index_state_class()
    asked = None if wanted is None else set(wanted)
    state = _state_class(module.default_indent, module.default_newline, None if asked is None else set(asked))
    module._codegen(state)
    ranges = state.ranges if asked is None else {n: r for n, r in state.ranges.items() if n in asked}
    points = sorted({i for r in ranges.values() for i in r})
    where = dict(zip(points, _line_columns(state.tokens, points)))
    from libcst.metadata import CodePosition, CodeRange

    made: dict[tuple[int, int], CodePosition] = {}

    def position(index: int) -> CodePosition:
        line_column = where[index]
        found = made.get(line_column)
        if found is None:
            found = made[line_column] = CodePosition(*line_column)
        return found

    return {node: CodeRange(position(start), position(end)) for node, (start, end) in ranges.items()}


def _line_columns(tokens: list[str], points: list[int]) -> Iterator[tuple[int, int]]:
    """(line, column) after the first `p` tokens, for each `p` of the sorted `points` (one pass, joined
    between points: lines as libcst counts them, `\\r\\n`, `\\r` and `\\n`)."""
    line, column, done = 1, 0, 0
    for point in points:
        if point > done:
            chunk = "".join(tokens[done:point])
            breaks = _NEWLINE.findall(chunk)
            if breaks:
                line += len(breaks)
                column = len(chunk) - max(chunk.rfind("\n"), chunk.rfind("\r")) - 1
            else:
                column += len(chunk)
            done = point
        yield line, column
