"""The inline-expectation format of every corpus that states findings, its parser, and its update mode.

fixtures/ (with the packages of fixtures/programs/), tests/inference_cases/ and tests/ground_truth/programs/
write the findings spmdcheck must report in the files themselves (the spec is fixtures/README.md,
"Expected diagnostics"):

    z = F.gelu(y)  # warning: SPMD201 col 9
    ...
    # [expected messages] line:column CODE: message
    # 19:9 SPMD201: `y` is a per-rank partial sum on axis 'tp' (...) and goes through non-linear `F.gelu` ...

* beside its line, the severity, the code and the column (1-based, as the command line prints it):
  `# error: SPMD401 col 5`; several on a line: `# error: SPMD110 col 5, SPMD102 col 9  # warning: SPMD201 col 9`;
* at the end of the file, one comment line per finding with its full message, keyed `line:column CODE`.
  Messages are long (most are 100-200 characters): beside the code line they would make it unreadable, and on
  a comment line of their own below it they would move every later line, which the fixture tables, the
  messages themselves ("at line 19") and the recorded findings all cite.

A finding is pinned by (line, column, code, severity, message), exactly, once per report: the block holds
every finding (two findings of one code on one line are two block lines), the inline comments the set of
(code, column) per line. A file whose inline codes lack a column, or whose block lacks a message, is
incomplete: the corpus tests fail on it and `python -m pytest --update-expectations` completes it.

The update mode (as mypy's `--update-data`) rewrites a file's expectations from the checker's actual output;
it never changes a line's code, only its expectation comments and the block, and checks that the module's
syntax tree is unchanged. Read the diff afterwards: every added or dropped finding is a change of behaviour.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

SEVERITIES = ("error", "warning", "note")
# A fixture written before the checker can find its bug (its ground truth confirmed on gloo ranks) says so in
# its first lines: `# spmdcheck-pending: issue 22`. Its corpus test is a strict expected failure (it turns
# into a failure the day the checker finds the bug: then drop the marker and run the update mode).
PENDING = re.compile(r"^#\s*spmdcheck-pending:\s*(?P<reason>.+?)\s*$")
PENDING_LINES = 3
_ITEM = r"SPMD\d{3}(?:\s+col\s+\d+)?"
INLINE = re.compile(rf"#\s*(?P<severity>{'|'.join(SEVERITIES)}):\s*(?P<items>{_ITEM}(?:\s*,\s*{_ITEM})*)")
_ITEM_PARTS = re.compile(r"(?P<code>SPMD\d{3})(?:\s+col\s+(?P<column>\d+))?")
# an expectation comment with the whitespace before it: what the update mode replaces
_INLINE_WITH_SPACE = re.compile(r"\s*" + INLINE.pattern)

BLOCK_HEADER = "# [expected messages] line:column CODE: message"
_BLOCK_START = "# [expected messages]"
BLOCK_ENTRY = re.compile(r"^# (?P<line>\d+):(?P<column>\d+) (?P<code>SPMD\d{3}): (?P<message>.*)$")


@dataclass(frozen=True, order=True)
class Expected:
    """One finding: where, which code, how severe, and its message."""

    line: int
    column: int
    code: str
    severity: str
    message: str

    def show(self) -> str:
        return f"{self.line}:{self.column} {self.severity} {self.code}: {self.message}"


class ExpectationError(ValueError):
    """The expectations of a file are malformed, incomplete or contradict each other."""


@dataclass(frozen=True)
class _Inline:
    line: int
    code: str
    severity: str
    column: int | None  # None: written without its column (incomplete)


def _inline(lines: list[str]) -> list[_Inline]:
    found = []
    for lineno, text in enumerate(lines, start=1):
        for group in INLINE.finditer(text):
            for item in _ITEM_PARTS.finditer(group.group("items")):
                column = item.group("column")
                found.append(_Inline(lineno, item.group("code"), group.group("severity"),
                                     int(column) if column else None))
    return found


def _split_block(lines: list[str]) -> tuple[list[str], list[str] | None]:
    """(the lines before the block, the block's entry lines or None when there is no block)."""
    starts = [i for i, text in enumerate(lines) if text.startswith(_BLOCK_START)]
    if not starts:
        return lines, None
    if len(starts) > 1:
        raise ExpectationError(f"lines {[i + 1 for i in starts]}: more than one '{_BLOCK_START}' block")
    start = starts[0]
    return lines[:start], lines[start + 1:]


def claims(text: str) -> set[tuple[int, str, str]]:
    """(line, code, severity) of every inline expectation: what a file claims even when incomplete.

    Also the reading of expectations in documentation examples, which state codes only."""
    return {(e.line, e.code, e.severity) for e in _inline(text.splitlines())}


def parse(text: str) -> list[Expected]:
    """Every finding the file expects, sorted; raises ExpectationError when they are incomplete or inconsistent."""
    lines = text.splitlines()
    body, block = _split_block(lines)
    inline = _inline(body)
    problems = [f"line {e.line}: {e.code} has no column (`{e.code} col N`)" for e in inline if e.column is None]
    severity: dict[tuple[int, int, str], str] = {}
    for e in inline:
        if e.column is not None:
            severity[(e.line, e.column, e.code)] = e.severity
    found: list[Expected] = []
    keyed: set[tuple[int, int, str]] = set()
    for offset, entry in enumerate(block or []):
        m = BLOCK_ENTRY.match(entry)
        if not m:
            problems.append(f"line {len(body) + 2 + offset}: not a `# line:column CODE: message` entry: {entry!r}")
            continue
        key = (int(m.group("line")), int(m.group("column")), m.group("code"))
        keyed.add(key)
        if key not in severity:
            problems.append(f"the block names {key[0]}:{key[1]} {key[2]}, which no inline comment expects")
            continue
        found.append(Expected(*key, severity[key], m.group("message")))
    problems += [f"line {line}: {code} col {column} has no message in the block" for line, column, code in
                 sorted(set(severity) - keyed)]
    if problems:
        raise ExpectationError("; ".join(problems) + " (run `python -m pytest --update-expectations`)")
    return sorted(found)


def from_diagnostics(diagnostics: Iterable[object]) -> list[Expected]:
    """The findings of a report: spmdcheck Diagnostic objects or their JSON dicts (`--output-format json`)."""
    out = []
    for d in diagnostics:
        get = d.get if isinstance(d, Mapping) else lambda name, d=d: getattr(d, name)
        out.append(Expected(get("line"), get("column"), get("code"), get("severity"), get("message")))
    return sorted(out)


def difference(got: list[Expected], want: list[Expected]) -> str:
    """'' when the findings are the expected ones (as multisets), else what is unexpected and what is missing."""
    extra, missing = Counter(got) - Counter(want), Counter(want) - Counter(got)
    if not extra and not missing:
        return ""
    show = lambda c: "\n".join(f"  {e.show()}" for e in sorted(c.elements())) or "  (none)"  # noqa: E731
    return f"unexpected:\n{show(extra)}\nmissing:\n{show(missing)}"


def without_expectations(text: str) -> list[str]:
    """The file's lines with the expectation comments and the message block taken out: its code."""
    body, _ = _split_block(text.splitlines())
    while body and body[-1] == "":
        body = body[:-1]
    return [_INLINE_WITH_SPACE.sub("", line) for line in body]


def rewrite(text: str, findings: Iterable[Expected]) -> str:
    """`text` with its expectations replaced by `findings` (inline comments and the message block)."""
    findings = sorted(findings)
    lines = without_expectations(text)
    per_line: dict[int, dict[str, list[str]]] = {}
    for f in findings:
        if not 1 <= f.line <= len(lines):
            raise ExpectationError(f"{f.show()}: the file has {len(lines)} lines")
        if "\n" in f.message:
            raise ExpectationError(f"{f.show()}: a message of several lines does not fit the block")
        items = per_line.setdefault(f.line, {}).setdefault(f.severity, [])
        item = f"{f.code} col {f.column}"
        if item not in items:
            items.append(item)
    for line, groups in per_line.items():
        comments = "  ".join(f"# {severity}: {', '.join(groups[severity])}" for severity in SEVERITIES
                             if severity in groups)
        lines[line - 1] = f"{lines[line - 1].rstrip()}  {comments}"
    if findings:
        lines += ["", BLOCK_HEADER] + [f"# {f.line}:{f.column} {f.code}: {f.message}" for f in findings]
    new = "\n".join(lines) + "\n"
    _same_code(text, new)
    return new


def _same_code(old: str, new: str) -> None:
    try:
        before = ast.dump(ast.parse(old))
    except SyntaxError:
        return  # a file that cannot be parsed (SPMD001 fixtures) is rewritten on comments alone
    try:
        after = ast.dump(ast.parse(new))
    except SyntaxError:
        after = None
    if after != before:
        raise ExpectationError("rewriting the expectations would change the code (a comment after a `\\`?)")


def pending(text: str) -> str | None:
    """The reason a file's expectations are pending (its `# spmdcheck-pending: ...` line), else None."""
    for line in text.splitlines()[:PENDING_LINES]:
        match = PENDING.match(line)
        if match:
            return match.group("reason")
    return None
