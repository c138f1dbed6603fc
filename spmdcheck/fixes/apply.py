"""Apply suggested fixes to source files (`check --fix --unsafe-fixes`), one file at a time, as a transaction.

Every suggestion inserts or changes a collective, which changes what the program computes: all fixes are
unsafe in ruff's sense, so `--fix` alone applies none and says how many `--unsafe-fixes` would.

A file is rewritten only when every step holds, else it is left byte-for-byte as it was and the reason is
reported: it is a regular file inside the checked tree (a symlink leading out of it is not followed), it is
writable, it has not changed since it was checked, the fixed text parses and checks again without a parse
or internal error. The bytes keep the file's encoding (its coding cookie), its BOM and its line endings
(LF, CRLF or CR). The new text goes to a temporary file in the same folder, which then replaces the old
one (`os.replace`: readers see the old or the new file, never half of one); a file changed by someone else
meanwhile (a second `--fix` run) is reported as such and not overwritten.

Fixes are applied again on the fixed text until none is left (at most `MAX_ROUNDS`), so a second run has
nothing to do. `check --fix` applies one batch per file at a time (`rounds=1`) and finds the next with the
file's whole program (cli/fix.py): a follow-up finding may need the rest of the package.
"""

from __future__ import annotations

import codecs
import io
import os
import re
import stat
import tempfile
import tokenize
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spmdcheck.diagnostics.render import Diagnostic
from spmdcheck.fixes.imports import add_imports, needed_imports
from spmdcheck.frontend.guard import quiet_ast_parse
from spmdcheck.frontend.lines import physical_lines
from spmdcheck.frontend.source import ParseFailure, parse

if TYPE_CHECKING:
    from spmdcheck.rules.stubs import Registry

MAX_ROUNDS = 8
IMPORT_LINE = "import spmd_types"

Recheck = Callable[[str], list[Diagnostic]]


@dataclass
class FixOutcome:
    path: str
    applied: int
    error: str | None = None


@dataclass
class SourceBytes:
    """A file's text and what is needed to write it back the same way."""

    text: str
    encoding: str
    bom: bool
    newline: str


def decode(data: bytes) -> SourceBytes:
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    bom = data.startswith(codecs.BOM_UTF8)
    text = data[len(codecs.BOM_UTF8) if bom else 0 :].decode("utf-8" if encoding == "utf-8-sig" else encoding)
    m = re.search(r"\r\n|\r|\n", text)
    return SourceBytes(text, "utf-8" if encoding == "utf-8-sig" else encoding, bom, m.group() if m else "\n")


def encode(source: SourceBytes, text: str) -> bytes:
    return (codecs.BOM_UTF8 if source.bom else b"") + text.encode(source.encoding)


def _offsets(text: str) -> list[int]:
    starts, pos = [0], 0
    for line in physical_lines(text, keepends=True):
        pos += len(line)
        starts.append(pos)
    return starts


def fix_text(
    text: str,
    diags: Sequence[Diagnostic],
    import_line: str | None,
    newline: str = "\n",
    registry: Registry | None = None,
) -> tuple[str, int]:
    """The text with the first placeable suggestion of each diagnostic applied (non-overlapping), and the
    imports they need (unless `import_line` is None) added where isort would put them (`fixes.imports`);
    `registry` names the module of a mapping a fix calls (default: the shipped stubs)."""
    starts = _offsets(text)
    edits: list[tuple[int, int, str]] = []
    for d in diags:
        s = next((s for s in d.suggestions if s.span is not None), None)
        if s is None:
            continue
        line, col, end_line, end_col = s.span  # type: ignore[misc]
        if not (0 < line <= end_line < len(starts)):
            continue  # a span outside this text: stale, never guessed at
        begin, end = starts[line - 1] + col - 1, starts[end_line - 1] + end_col - 1
        if any(b < end and begin < e for b, e, _ in edits):
            continue  # overlaps an earlier fix: the next round sees what is left
        edits.append((begin, end, s.replacement.replace("\n", newline)))
    for begin, end, replacement in sorted(edits, reverse=True):
        text = text[:begin] + replacement + text[end:]
    if import_line and edits:
        text = _with_imports(text, [r for _, _, r in edits], newline, registry)
    return text, len(edits)


def _with_imports(text: str, replacements: list[str], newline: str, registry: Registry | None) -> str:
    try:
        module = quiet_ast_parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return text  # the round's parse check reports it
    needed = needed_imports(module, replacements, registry)
    return add_imports(text, needed, newline) if needed else text


def fix_source(
    text: str,
    diags: Sequence[Diagnostic],
    recheck: Recheck | None = None,
    import_line: str | None = IMPORT_LINE,
    newline: str = "\n",
    rounds: int = MAX_ROUNDS,
) -> tuple[str, int, str | None]:
    """Fix `text` until no fix is left, at most `rounds` times: (new text, fixes applied, why it stopped early
    or None). Each later round applies the fixes of `recheck`'s findings on the text so far.

    The text is returned unchanged with a reason when a round's result does not parse or fails its check.
    """
    current, applied = text, 0
    for _ in range(rounds):
        fixed, count = fix_text(current, diags, import_line, newline)
        if not count:
            return current, applied, None
        failure = parse(fixed)
        if isinstance(failure, ParseFailure):
            return text, 0, f"the fixed file would not parse ({failure.message}); left unchanged"
        current, applied = fixed, applied + count
        if recheck is None:
            return current, applied, None
        diags = recheck(current)
        broken = [d for d in diags if d.code in ("SPMD000", "SPMD001")]
        if broken:
            why = f"{broken[0].code}: {broken[0].message}"
            return text, 0, f"the fixed file does not check cleanly ({why}); left unchanged"
    return current, applied, None


def _inside(real: str, roots: Sequence[str]) -> bool:
    return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def _stale(diags: Sequence[Diagnostic], lines: list[str]) -> bool:
    """The file no longer holds the lines the diagnostics were found on (it changed after the check)."""
    for d in diags:
        for number, text in d.frame:
            if number > len(lines) or lines[number - 1] != text:
                return True
    return False


def apply_fixes(
    path: str,
    diags: list[Diagnostic],
    import_line: str | None = IMPORT_LINE,
    *,
    recheck: Recheck | None = None,
    roots: Sequence[str] | None = None,
    rounds: int = MAX_ROUNDS,
) -> FixOutcome:
    """Fix one file in place, as a transaction (see the module docstring). `roots`: the checked tree;
    `rounds`: how many times fixes are applied (1: `diags`' only, `recheck` then validates the result)."""
    real = os.path.realpath(path)
    if roots is not None and not _inside(real, [os.path.realpath(r) for r in roots]):
        return FixOutcome(path, 0, f"links to {real}, outside the checked tree: not rewritten")
    try:
        with open(real, "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                return FixOutcome(path, 0, "not a regular file: not rewritten")
            data = fh.read()
    except OSError as exc:
        return FixOutcome(path, 0, f"cannot read: {exc.strerror}")
    try:
        source = decode(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        return FixOutcome(path, 0, f"cannot decode ({exc}); left unchanged")
    fixable = [d for d in diags if any(s.span for s in d.suggestions)]
    if _stale(fixable, physical_lines(source.text)):
        return FixOutcome(path, 0, "changed on disk since it was checked (another process?): left unchanged")
    fixed, count, error = fix_source(source.text, fixable, recheck, import_line, source.newline, rounds)
    if error or not count:
        return FixOutcome(path, 0, error)
    try:
        new_data = encode(source, fixed)
    except UnicodeEncodeError:
        return FixOutcome(path, 0, f"the fix cannot be written in {source.encoding}: left unchanged")
    # no write bit: read-only by intent, even for a user (root) whom the system would let write it
    if not os.access(real, os.W_OK) or not info.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        return FixOutcome(path, 0, "the file is read-only: not rewritten")
    return _replace(path, real, data, new_data, info.st_mode, count)


def _replace(path: str, real: str, old: bytes, new: bytes, mode: int, count: int) -> FixOutcome:
    folder = os.path.dirname(real) or "."
    try:
        fd, tmp = tempfile.mkstemp(prefix=".spmdcheck-", suffix=".tmp", dir=folder)
    except OSError as exc:
        return FixOutcome(path, 0, f"cannot write in {folder}: {exc.strerror}")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(new)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, stat.S_IMODE(mode))
        with open(real, "rb") as fh:  # a concurrent writer since we read it: theirs stands
            if fh.read() != old:
                os.unlink(tmp)
                return FixOutcome(path, 0, "changed on disk while it was being fixed (another process?): left as is")
        os.replace(tmp, real)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return FixOutcome(path, 0, f"cannot write: {exc.strerror}")
    return FixOutcome(path, count)
