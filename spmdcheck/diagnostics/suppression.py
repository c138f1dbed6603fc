"""Suppression comments, which findings they silence, and the ones that silence nothing.

    x = f(y)  # noqa: SPMD101                 this line (or the whole statement when on its last line)
    x = f(y)  # spmdcheck: ignore[pending-sum-misuse]
    # spmdcheck: ignore[SPMD101]              own line: the next statement, all its lines
    # spmdcheck: ignore-file[SPMD501]         anywhere: the whole file (no codes: every code)

A blanket `# noqa` (no codes) silences everything on its line, but is never
reported as unused: it is usually written for another tool. Codes of other
tools in a `noqa` list (`E501`) are left alone.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from spmdcheck.diagnostics.codes import lookup
from spmdcheck.diagnostics.render import Diagnostic, SuggestionOut, diagnostic_of
from spmdcheck.diagnostics.violations.inputs import UnusedSuppression

UNUSED_CODE = UnusedSuppression.code

_ITEM = r"[A-Za-z][A-Za-z0-9_\-]*"
_NOQA = re.compile(rf"#\s*noqa(?::[ \t]*(?P<codes>{_ITEM}(?:[ \t]*,[ \t]*{_ITEM}|[ \t]+{_ITEM})*))?", re.IGNORECASE)
_LINE_END = re.compile(r"(?<=\r\n)|(?<=\r)(?!\n)|(?<=\n)")
_IGNORE = re.compile(r"#\s*spmdcheck:\s*(?P<kind>ignore-file|ignore)(?![\w-])(?:\[(?P<codes>[^\]]*)\])?", re.IGNORECASE)


def physical_lines(text: str) -> list[str]:
    """Lines as Python counts them (\\n, \\r\\n, \\r), endings kept; unlike str.splitlines, a form feed or
    another Unicode separator inside a line does not start a new one."""
    lines = _LINE_END.split(text)
    return lines[:-1] if lines and lines[-1] == "" else lines


@dataclass
class Suppression:
    line: int  # of the comment
    start: int  # 0-based offsets of the directive in that line
    end: int
    kind: str  # "noqa" | "ignore" | "ignore-file"
    items: tuple[str, ...] | None  # as written; None: every code
    first: int  # lines covered (inclusive)
    last: int
    own_line: bool
    comment_start: int  # 0-based offset of the comment's `#`
    comment_end: int
    used: set[str] = field(default_factory=set)  # codes it silenced
    used_blanket: bool = False

    def ours(self) -> list[str]:
        """The items that name spmdcheck codes or rules (known or not); the rest belong to other tools."""
        if self.items is None:
            return []
        if self.kind != "noqa":
            return list(self.items)
        return [i for i in self.items if i.upper().startswith("SPMD") or lookup(i) is not None]

    def silences(self, code: str) -> bool:
        if self.items is None:
            return True
        return any((info := lookup(i)) is not None and info.code == code for i in self.items)

    def spelled(self, items: list[str]) -> str:
        if self.kind == "noqa":
            return f"# noqa: {', '.join(items)}"
        return f"# spmdcheck: {self.kind}[{', '.join(items)}]"


@dataclass
class SourceMap:
    """What the tokenizer knows about a file: logical lines and the lines a comment can end."""

    logical: list[tuple[int, int]]  # (first, last) physical line of each logical line
    no_comment: set[int]  # lines whose end is inside a string or continued by a backslash

    def statement_at(self, line: int) -> tuple[int, int]:
        for first, last in self.logical:
            if first <= line <= last:
                return first, last
        return line, line

    def next_statement(self, line: int) -> tuple[int, int] | None:
        return next(((f, la) for f, la in self.logical if f > line), None)


def _scan(text: str) -> tuple[list[tuple[int, int, str, bool]], SourceMap]:
    """Comments (line, column, text, on a line of their own) and the logical-line map."""
    comments: list[tuple[int, int, str, bool]] = []
    logical: list[tuple[int, int]] = []
    no_comment: set[int] = set()
    code_lines: set[int] = set()
    start: int | None = None
    lines = [t.rstrip("\r\n") for t in physical_lines(text)]
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text, newline=None).readline):
            kind, (srow, scol), (erow, _) = tok.type, tok.start, tok.end
            if kind == tokenize.COMMENT:
                comments.append((srow, scol, tok.string, srow not in code_lines))
            elif kind == tokenize.NEWLINE:
                if start is not None:
                    logical.append((start, srow))
                start = None
            elif kind not in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
                if start is None:
                    start = srow
                code_lines.update(range(srow, erow + 1))
                if erow > srow:  # a string spanning lines: no comment can end its inner lines
                    no_comment.update(range(srow, erow))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        # not tokenizable (it parsed, so rare): every `#` starts a comment that covers its own line
        comments = [
            (n, t.index("#"), t[t.index("#") :], not t[: t.index("#")].strip())
            for n, t in enumerate(lines, 1)
            if "#" in t
        ]
        logical = []
    for n, t in enumerate(lines, 1):
        if t.rstrip().endswith("\\"):
            no_comment.add(n)
    return comments, SourceMap(logical, no_comment)


def find_suppressions(text: str) -> tuple[list[Suppression], SourceMap | None]:
    """The suppression comments of `text`, and its source map (None when the text has no suppression: the
    tokenizer is slow, tens of microseconds a line, so files without one skip it). A directive is found in a
    comment by the same patterns searched here on the whole text, so a text they miss has none: a file whose
    only `# spmdcheck:` comment is its settings header (`mesh = [...]`) skips the tokenizer too."""
    if _IGNORE.search(text) is None and _NOQA.search(text) is None:
        return [], None
    comments, smap = _scan(text)
    found: list[Suppression] = []
    for line, col, comment, own_line in comments:
        matches = [(m, "noqa") for m in _NOQA.finditer(comment)]
        matches += [(m, m.group("kind").lower()) for m in _IGNORE.finditer(comment)]
        for m, kind in matches:
            raw = m.group("codes")
            items = None if raw is None else tuple(i for i in re.split(r"[\s,]+", raw) if i)
            if kind == "ignore-file":
                first, last = 1, 1 << 30
            elif own_line and kind == "ignore":
                nxt = smap.next_statement(line)
                first, last = nxt if nxt is not None else (line, line)
            else:
                first, last = line, line
                stmt = smap.statement_at(line)
                if not own_line and stmt[1] == line:  # on a statement's last line: the whole statement
                    first, last = stmt
            found.append(
                Suppression(
                    line, col + m.start(), col + m.end(), kind, items, first, last, own_line, col, col + len(comment)
                )
            )
    return found, smap


def apply_suppressions(
    path: str, text: str, diags: list[Diagnostic], enabled: Callable[[str], bool]
) -> list[Diagnostic]:
    """The diagnostics no comment silences, plus an unused-suppression finding for each comment (or code in
    one) that silenced nothing among the enabled codes."""
    if not diags and not _may_name_ours(text):
        return diags  # nothing to silence, and no comment that could be reported unused: no tokenizer
    suppressions, _ = find_suppressions(text)
    if not suppressions:
        return diags
    kept = []
    for d in diags:
        hits = [s for s in suppressions if s.first <= d.line <= s.last and s.silences(d.code)]
        for s in hits:
            if s.items is None:
                s.used_blanket = True
            s.used.add(d.code)
        if not hits:
            kept.append(d)
    if not enabled(UNUSED_CODE):
        return kept
    lines = physical_lines(text)
    return kept + [u for s in suppressions if (u := _unused(path, s, lines, enabled)) is not None]


def _may_name_ours(text: str) -> bool:
    """Whether the text may hold a suppression that can be reported unused: a `# spmdcheck:` directive, or a
    `noqa` naming an spmdcheck code or rule (a blanket `noqa` and other tools' codes never are). A text scan,
    so a match inside a string only costs the tokenizer."""
    if _IGNORE.search(text) is not None:
        return True
    for m in _NOQA.finditer(text):
        raw = m.group("codes")
        if raw and any(i.upper().startswith("SPMD") or lookup(i) is not None for i in re.split(r"[\s,]+", raw) if i):
            return True
    return False


def _unused(path: str, s: Suppression, lines: list[str], enabled: Callable[[str], bool]) -> Diagnostic | None:
    if s.items is None:
        if s.kind == "noqa" or s.used_blanket:
            return None
        unused, keep = ["(every code)"], []
    else:
        ours = s.ours()
        unused, keep = [], []
        for item in s.items:
            info = lookup(item)
            if item not in ours:
                keep.append(item)  # another tool's code
            elif info is None:
                unused.append(item)  # not a code or rule of spmdcheck: a typo or a removed code
            elif info.code in s.used or not enabled(info.code):
                keep.append(item)  # used, or we cannot tell (the code is not enabled here)
            else:
                unused.append(item)
        if not unused:
            return None
    directive = lines[s.line - 1][s.start : s.end]
    unknown = tuple(i for i in unused if i != "(every code)" and lookup(i) is None)
    whole_file = s.kind == "ignore-file"
    line_text = lines[s.line - 1]
    removal: Literal["line", "comment", "directive"]
    if keep:
        replacement, span = s.spelled(keep), (s.line, s.start + 1, s.line, s.end + 1)
        removal = "directive"
    elif line_text[s.comment_start : s.comment_end].strip() == directive.strip() and s.own_line:
        replacement, span = "", (s.line, 1, s.line + 1, 1)  # the comment is the whole line: drop the line
        removal = "line"
    elif line_text[s.comment_start : s.comment_end].strip() == directive.strip():
        code_end = len(line_text[: s.comment_start].rstrip())
        replacement, span = "", (s.line, code_end + 1, s.line, s.comment_end + 1)
        removal = "comment"
    else:  # the comment says more than this directive: remove the directive only
        end = s.end + (len(line_text[s.end :]) - len(line_text[s.end :].lstrip(" \t")))
        replacement, span = "", (s.line, s.start + 1, s.line, end + 1)
        removal = "directive"
    violation = UnusedSuppression(directive.strip(), tuple(unused), unknown, whole_file, tuple(keep), removal)
    diag = diagnostic_of(path, violation, s.line, s.start + 1, s.line, s.end + 1)
    diag.suggestions = [SuggestionOut(violation.fix_title, replacement, span, safe=True)]
    return diag


def source_map(text: str) -> SourceMap:
    return _scan(text)[1]


def noqa_line(smap: SourceMap, diag_line: int) -> int:
    """Where `--add-noqa` writes the comment for a finding at `diag_line`: that line, or, when its end is
    inside a string or a backslash continuation, the statement's last line."""
    if diag_line not in smap.no_comment:
        return diag_line
    last = smap.statement_at(diag_line)[1]
    return next((n for n in range(diag_line, last + 1) if n not in smap.no_comment), last)
