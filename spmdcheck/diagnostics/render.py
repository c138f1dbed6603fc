"""Turn findings into diagnostics: positions (resolved only for files with findings), messages.

Suppression comments are applied afterwards (diagnostics/suppression.py).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spmdcheck.diagnostics.codes import CODES
from spmdcheck.diagnostics.violation import Violation

if TYPE_CHECKING:  # libcst is imported where positions are resolved: reading cached results never needs it
    import libcst as cst

    from spmdcheck.analysis.findings import Finding

_SITE = re.compile(r"\{site:(\d+)\}")


@dataclass(frozen=True)
class SuggestionOut:
    message: str
    replacement: str
    # where the replacement goes: (line, column, end_line, end_column), 1-based; None = advice only
    span: tuple[int, int, int, int] | None = field(default=None, compare=False)
    # safe: does not change what the program computes (ruff's fix applicability); `--fix` alone applies these
    safe: bool = field(default=False, compare=False)


@dataclass
class Diagnostic:
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    name: str
    severity: str
    message: str
    suggestions: list[SuggestionOut] = field(default_factory=list)
    # the source lines around `line` as (number, text), for the text report's code frame
    frame: tuple[tuple[int, str], ...] = field(default=(), compare=False, repr=False)
    # a finding inside a function reached through calls: the call sites as (path, line, column), innermost
    # first (the message says them too: "called from ..."); SARIF's relatedLocations and codeFlows, editors'
    # related information, the JSON report's `chain`
    chain: tuple[tuple[str, int, int], ...] = field(default=(), compare=False)

    def attach_frame(self, lines: list[str]) -> None:
        """Keep the lines before, at and after the diagnostic's line (the text it was found in)."""
        if 0 < self.line <= len(lines):
            first, last = max(1, self.line - 1), min(len(lines), self.line + 1)
            self.frame = tuple((n, lines[n - 1]) for n in range(first, last + 1))

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.column, self.code, self.message)

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "message": self.message,
            "suggestions": [{"message": s.message, "replacement": s.replacement} for s in self.suggestions],
        }


def diagnostic_of(
    path: str,
    violation: Violation,
    line: int = 1,
    column: int = 1,
    end_line: int | None = None,
    end_column: int | None = None,
) -> Diagnostic:
    """The diagnostic of a violation found before analysis (a file, a setting, a comment), where positions
    are known already."""
    info = violation.info()
    return Diagnostic(
        path,
        line,
        column,
        end_line or line,
        end_column or column,
        violation.code,
        info.name,
        info.severity,
        violation.message,
    )


class ProgramPositions:
    """Positions of the files of one program, resolved lazily: only files with findings pay for them."""

    def __init__(self) -> None:
        self._files: dict[int, tuple[str, cst.Module]] = {}
        self._positions: dict[int, _FileTable] = {}
        self._wanted: dict[int, set] = {}  # per file, the nodes `want` named before its table was made

    def add(self, origin: object, path: str, module: cst.Module) -> None:
        self._files[id(origin)] = (path, module)

    def _known(self, origin: object) -> int:
        """The key of an origin's file: one added, or a file the analysis read on its own (a stub's model)."""
        key = id(origin)
        if key in self._files:
            return key
        import libcst as cst

        module, path = getattr(origin, "module", None), getattr(origin, "path", None)
        if isinstance(module, cst.Module) and isinstance(path, str):
            self._files[key] = (path, module)
            return key
        return id(None)

    def want(self, findings: list[Finding], sites: list[tuple[cst.CSTNode, object]]) -> None:
        """Name the nodes rendering `findings` will ask positions of (theirs, those their messages cite, their
        suggestions'): each file's positions are then made for those nodes alone (frontend/positions.py)."""
        for f in findings:
            key = id(f.origin) if id(f.origin) in self._files else id(None)
            nodes = self._wanted.setdefault(key, set())
            nodes.add(f.node)
            nodes.update(sites[b.ref][0] for b in f.branches)
            nodes.update(s.target for s in f.suggestions if s.target is not None)
            refs = [int(m.group(1)) for m in _SITE.finditer(f.message)] + list(f.call_chain)
            for ref in refs:
                node, site_origin = sites[ref]
                self._wanted.setdefault(self._known(site_origin), set()).add(node)

    def _table(self, origin: object) -> _FileTable:
        key = id(origin)
        if key not in self._positions:
            self._positions[key] = _FileTable(self._files[key][1], self._wanted.pop(key, None))
        return self._positions[key]

    def render(self, findings: list[Finding], sites: list[tuple[cst.CSTNode, object]]) -> dict[str, list[Diagnostic]]:
        out: dict[str, list[Diagnostic]] = {}
        self.want(findings, sites)
        for f in findings:
            rendered = self.render_one(f, sites)
            if rendered is not None:
                out.setdefault(rendered[0].path, []).append(rendered[0])
        return out

    def render_one(self, f: Finding, sites: list[tuple[cst.CSTNode, object]]) -> tuple[Diagnostic, str] | None:
        """One finding as a diagnostic, with the key two reports of one finding share (its code, node
        and message before the notes of branches and calls: what the program de-duplicates on)."""
        key = id(f.origin) if id(f.origin) in self._files else id(None)
        if key not in self._files:
            return None
        path = self._files[key][0]
        origin = f.origin if key == id(f.origin) else None
        positions = self._table(origin)
        pos = positions.get(f.node)
        if pos is None:
            return None  # a node the analysis made up (never in a module): nothing to point at

        def site(ref: int) -> tuple[str, int, int] | None:
            node, site_origin = sites[ref]
            site_key = self._known(site_origin)
            if site_key not in self._files:
                return None
            site_pos = self._table(site_origin if site_key == id(site_origin) else None).get(node)
            if site_pos is None:
                return self._files[site_key][0], 0, 0
            return self._files[site_key][0], site_pos.start.line, site_pos.start.column + 1

        def where(ref: int, here: str = path) -> str:
            found = site(ref)
            if found is None:
                return "another file"
            site_path, line, _ = found
            return f"line {line}" if site_path == here else f"{display_path(site_path)}:{line}"

        message = _SITE.sub(lambda m: where(int(m.group(1))), f.message)
        same = f"{f.code}\0{type(f.node).__name__}\0{pos.start.line}:{pos.start.column}:{pos.end.line}:{pos.end.column}"
        same += "\0" + message
        if f.branches:
            message += " " + _branch_note(f, [n for n, _ in sites], functools.partial(_line, positions), where)
        if f.call_chain:
            message += " (" + ", ".join(f"called from {where(ref, '')}" for ref in f.call_chain) + ")"
        info = CODES[f.code]
        diag = Diagnostic(
            path,
            pos.start.line,
            pos.start.column + 1,
            pos.end.line,
            pos.end.column + 1,
            f.code,
            info.name,
            f.severity or info.severity,
            message,
            [SuggestionOut(s.message, s.replacement, _span(positions, s.target)) for s in f.suggestions],
        )
        diag.chain = tuple(found for ref in f.call_chain if (found := site(ref)) is not None and found[1])
        return diag, same


class _FileTable:
    """One file's positions: of the nodes wanted (all of them when none were named); a node asked for
    that was not wanted makes them for every node, once."""

    def __init__(self, module: cst.Module, wanted: set | None) -> None:
        from spmdcheck.frontend.positions import positions

        self.module, self.wanted = module, wanted
        self.ranges = positions(module, wanted)

    def get(self, node: cst.CSTNode):  # noqa: ANN201 - a libcst CodeRange, or None (not in the module)
        found = self.ranges.get(node)
        if found is None and self.wanted is not None and node not in self.wanted:
            from spmdcheck.frontend.positions import positions

            self.wanted, self.ranges = None, positions(self.module)
            found = self.ranges.get(node)
        return found


def _line(positions, node: cst.CSTNode) -> int:  # noqa: ANN001
    pos = positions.get(node)
    return pos.start.line if pos is not None else 0


def display_path(path: str) -> str:
    """Relative to the working directory when below it (clickable in terminals and editors), else as given:
    how a file is named in messages and reports."""
    import os

    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _span(positions, node: cst.CSTNode | None) -> tuple[int, int, int, int] | None:  # noqa: ANN001
    pos = positions.get(node) if node is not None else None
    if pos is None:
        return None
    return (pos.start.line, pos.start.column + 1, pos.end.line, pos.end.column + 1)


def _branch_note(f: Finding, sites: list[cst.CSTNode], line_of, where) -> str:  # noqa: ANN001
    import libcst as cst

    parts = []
    for b in f.branches:
        node = sites[b.ref]
        if b.arm not in ("if", "else"):
            # a lookup whose key or index the checker cannot read (analysis/containers.py): the entry it took
            # (in the caller's file, often: `where` names the file when it is another)
            parts.append(f"when the lookup at {where(b.ref)} gives its {b.arm}")
        elif isinstance(node, (cst.For, cst.While)):
            parts.append(
                f"after an iteration of the loop at line {line_of(node)}"
                if b.arm == "else"
                else f"before the loop at line {line_of(node)} runs"
            )
        elif isinstance(node, cst.IfExp):
            parts.append(
                f"when the conditional expression at line {line_of(node)} takes its "
                f"{'first' if b.arm == 'if' else 'else'} value"
            )
        elif isinstance(node, cst.Try):
            parts.append(
                f"when the `try` at line {line_of(node)} completes"
                if b.arm == "if"
                else f"when the `try` at line {line_of(node)} handles an exception"
            )
        else:
            parts.append(f"when the `if` at line {line_of(node)} takes the {'if' if b.arm == 'if' else 'else'} branch")
    return "(" + "; ".join(parts) + ")"
