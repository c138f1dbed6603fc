"""State of an analysis: what one file knows (spellings, axes, options) and what the program shares.

A program is one or more files analysed together. Findings and sites are program-wide,
each tagged with the file it belongs to, so a finding can point into any file (a bug in a
helper of layers.py reached from model.py is reported in layers.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import libcst as cst

from spmdcheck.analysis.findings import Finding
from spmdcheck.analysis.values import Value
from spmdcheck.rules.stubs import Registry


@dataclass
class Options:
    mesh: tuple[str, ...] = ()  # the configured mesh (current mesh by default)
    strict: bool = False
    max_inline_depth: int = 8


BindObserver = Callable[[str, Value, cst.CSTNode, "FileContext"], None]


@dataclass
class ProgramState:
    """What every file of one analysis shares: findings, and the sites messages refer to."""

    findings: list[Finding] = field(default_factory=list)
    sites: list[tuple[cst.CSTNode, FileContext]] = field(default_factory=list)
    site_ids: dict[int, int] = field(default_factory=dict)
    seen: set[tuple[str, int, str]] = field(default_factory=set)
    # An observer of name bindings (--show-types, editor hovers): called with the name, its new value,
    # the node that binds it and the file's context. It only watches: the analysis never depends on it.
    on_bind: BindObserver | None = None
    log: Any = None  # the roots.RootLog of a recorded run: every finding is logged with its root

    def checkpoint(self) -> tuple[int, set[tuple[str, int, str]], object]:
        """A mark to withdraw what is reported after it (`withdraw`)."""
        logged = self.log.mark() if self.log is not None else None
        return len(self.findings), set(self.seen), logged

    def withdraw(self, mark: tuple[int, set[tuple[str, int, str]], object]) -> list[Finding]:
        """Take back the findings reported since `mark`, as if never reported (a call typed once per
        alternative reports each finding again, with the alternatives it holds in): they are returned. The
        running root's record forgets them too, so a selective run replays only what was kept."""
        count, seen, logged = mark
        taken = self.findings[count:]
        del self.findings[count:]
        self.seen = seen
        if self.log is not None and logged is not None:
            self.log.withdraw(logged)
        return taken


@dataclass
class FileContext:
    registry: Registry
    options: Options
    module: cst.Module
    path: str = "<string>"
    module_file: Any = None  # its program.graph.ModuleFile: name and package, for relative imports
    library: bool = False  # imported by the checked files but unable to hold a finding by itself
    stub: bool = False  # a stub's @model code: its findings are reported at the user's call into it
    program: ProgramState = field(default_factory=ProgramState)
    known_axes: set[str] = field(default_factory=set)  # every axis name valid in this file
    spmd_alias: str = "spmd_types"  # how the file spells the spmd_types module
    megatron_names: dict[str, str] = field(default_factory=dict)  # qualname -> local spelling
    _imports_spmd_types: bool | None = None

    @property
    def imports_spmd_types(self) -> bool:
        """Whether the file imports spmd_types (at top level, or in a top-level if/try block)."""
        if self._imports_spmd_types is None:
            self._imports_spmd_types = _imports_module(self.module.body, "spmd_types")
        return self._imports_spmd_types

    def bound(self, name: str, value: Value, node: cst.CSTNode) -> None:
        """Tell the program's observer (if any) that `node` in this file bound `name` to `value`."""
        if self.program.on_bind is not None:
            self.program.on_bind(name, value, node, self)

    @property
    def findings(self) -> list[Finding]:
        return self.program.findings

    @property
    def sites(self) -> list[cst.CSTNode]:
        return [node for node, _ in self.program.sites]

    def site(self, node: cst.CSTNode) -> int:
        key = id(node)
        ref = self.program.site_ids.get(key)
        if ref is None:
            ref = len(self.program.sites)
            self.program.sites.append((node, self))
            self.program.site_ids[key] = ref
        return ref

    def report(self, finding: Finding) -> None:
        if finding.origin is None:
            finding.origin = self
        if self.program.log is not None:
            self.program.log.found(finding)
        key = finding.key()
        if key in self.program.seen:
            return
        self.program.seen.add(key)
        self.program.findings.append(finding)

    @property
    def observed(self) -> bool:
        """Whether an observer watches the bindings (what it is told may then cost more to make)."""
        return self.program.on_bind is not None

    def code_of(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def text_of(self, node: cst.CSTNode) -> str:
        """`code_of`, without libcst's code generator for the common case of a plain dotted name."""
        return _plain_dotted(node) or self.module.code_for_node(node)


def _imports_module(body: Any, name: str, depth: int = 0) -> bool:
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.Import) and any(_dotted(a.name).split(".")[0] == name for a in small.names):
                    return True
                if isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
                    if _dotted(small.module).split(".")[0] == name:
                        return True
        elif depth < 2 and isinstance(stmt, (cst.If, cst.Try)):
            inner = stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else ()
            if _imports_module(inner, name, depth + 1):
                return True
    return False


def _plain_dotted(node: cst.CSTNode) -> str | None:
    """`a.b.c` written without parentheses, spaces or comments (exactly its source text); else None."""
    parts: list[str] = []
    while type(node) is cst.Attribute:
        dot = node.dot
        if node.lpar or node.rpar or node.attr.lpar or node.attr.rpar or not _tight(dot):
            return None
        parts.append(node.attr.value)
        node = node.value
    if type(node) is not cst.Name or node.lpar or node.rpar:
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def _tight(dot: cst.Dot) -> bool:
    before, after = dot.whitespace_before, dot.whitespace_after
    plain = type(before) is cst.SimpleWhitespace and type(after) is cst.SimpleWhitespace
    return plain and not (before.value or after.value)


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


class Analysis(Protocol):
    """What a transfer function (an op, collective or spmd_types rule) may see and do.

    Transfer functions never rebind variables or join states themselves: they return a value and
    announce effects (`rebind`, `note_collective`, `report`), which the interpreter applies, records
    per branch alternative and joins. This is the whole interface: they do not know the interpreter.
    """

    ctx: FileContext  # the file being interpreted: registry, options, axes, spellings, sites
    mesh: tuple[str, ...]  # the mesh in scope
    grad_enabled: bool

    def report(self, finding: Finding) -> None: ...

    def rebind(self, node: cst.CSTNode | None, value: Any) -> None:
        """The tensor `node` names now has this value (an in-place op, assert_type)."""

    def note_collective(self, api: str, axis: str | None, node: cst.CSTNode) -> None: ...

    def lookup(self, name: str) -> Any:
        """What a name denotes in the current scope (for spellings in suggestions)."""

    def result_grad(self, grads: Sequence[Any]) -> Any: ...

    def factory_tensor(self, rank: int | None, grad: Any, typed: bool) -> Any: ...
