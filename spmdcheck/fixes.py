"""Apply suggested fixes to source text (`check --fix --unsafe-fixes`).

Every suggestion inserts or changes a collective, which changes what the
program computes: all fixes are unsafe in ruff's sense, so `--fix` alone
applies none and says how many `--unsafe-fixes` would. A file is written only
if the fixed text still parses; otherwise it is left as it was and reported.
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass

import libcst as cst

from spmdcheck.diagnostics.render import Diagnostic


@dataclass
class FixOutcome:
    path: str
    applied: int
    error: str | None = None


def _offsets(text: str) -> list[int]:
    starts, pos = [0], 0
    for line in text.splitlines(keepends=True):
        pos += len(line)
        starts.append(pos)
    return starts


def fix_text(text: str, diags: list[Diagnostic], import_line: str | None) -> tuple[str, int]:
    """The text with the first placeable suggestion of each diagnostic applied (non-overlapping)."""
    starts = _offsets(text)
    edits: list[tuple[int, int, str]] = []
    for d in diags:
        s = next((s for s in d.suggestions if s.span is not None), None)
        if s is None:
            continue
        line, col, end_line, end_col = s.span  # type: ignore[misc]
        begin, end = starts[line - 1] + col - 1, starts[end_line - 1] + end_col - 1
        if any(b < end and begin < e for b, e, _ in edits):
            continue  # overlaps an earlier fix: the next run will see what is left
        edits.append((begin, end, s.replacement))
    for begin, end, replacement in sorted(edits, reverse=True):
        text = text[:begin] + replacement + text[end:]
    needs_import = any("spmd_types." in r for _, _, r in edits)
    if needs_import and import_line and import_line not in text:
        text = _add_import(text, import_line)
    return text, len(edits)


def _add_import(text: str, import_line: str) -> str:
    """After the last top-level import (or at the top, after a docstring)."""
    module = cst.parse_module(text)
    index = 0
    for i, stmt in enumerate(module.body):
        if isinstance(stmt, cst.SimpleStatementLine) and any(
            isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body
        ):
            index = i + 1
        elif i == 0 and isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Expr):
            index = 1
    new = cst.parse_statement(import_line + "\n")
    body = list(module.body)
    body.insert(index, new)
    return module.with_changes(body=body).code


def apply_fixes(path: str, diags: list[Diagnostic], import_line: str | None) -> FixOutcome:
    try:
        original = pathlib.Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        return FixOutcome(path, 0, f"cannot read: {exc}")
    try:
        fixed, count = fix_text(original, diags, import_line)
        if count:
            cst.parse_module(fixed)  # never write what cannot be parsed again
    except cst.ParserSyntaxError as exc:
        return FixOutcome(path, 0, f"the fixed file would not parse ({exc.message}); left unchanged")
    if count:
        pathlib.Path(path).write_text(fixed, encoding="utf-8")
    return FixOutcome(path, count)
