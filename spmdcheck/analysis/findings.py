"""What the analysis produces: findings tied to CST nodes, rendered later with positions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from spmdcheck.analysis.values import Branch
from spmdcheck.diagnostics.violation import Violation


@dataclass(frozen=True)
class Suggestion:
    message: str
    replacement: str  # the code that replaces `target`
    target: cst.CSTNode | None = None


@dataclass
class Finding:
    """One diagnostic before positions are known.

    `message` may contain `{site:N}` placeholders: the renderer replaces each
    with `line L` of the node registered as site N.
    """

    code: str
    node: cst.CSTNode
    message: str
    suggestions: list[Suggestion] = field(default_factory=list)
    branches: tuple[Branch, ...] = ()
    severity: str | None = None  # overrides the code's default when set
    origin: Any = None  # the FileContext whose module holds `node` (set when reported)
    call_chain: tuple[int, ...] = ()  # site refs of the calls that brought the types here, innermost first

    @classmethod
    def of(cls, violation: Violation, node: cst.CSTNode, suggestions: list[Suggestion] | None = None) -> Finding:
        """The finding of `violation` at `node`: its code and its message, as the violation words it."""
        return cls(violation.code, node, violation.message, suggestions or [])

    def at_library_call(self, call: cst.CSTNode, function: str, origin: Any) -> Finding:
        """This finding, made inside library model `function`, moved to the user's `call` into it."""
        moved = Finding(self.code, call, f"in library code `{function}`: {self.message}")
        moved.origin = origin
        moved.severity = self.severity
        return moved

    def key(self) -> tuple[str, int, str]:
        return (self.code, id(self.node), self.message)
