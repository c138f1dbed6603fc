"""`--add-noqa`: write `# noqa: CODE` for every current finding, so a legacy codebase starts clean.

Idempotent (a second run finds nothing left to suppress) and byte-preserving
apart from the added comments: line endings, encoding cookie and BOM are
kept, and a file is written only if it still parses.
"""

from __future__ import annotations

import os
import pathlib
import tempfile

from spmdcheck.diagnostics.render import Diagnostic
from spmdcheck.diagnostics.suppression import find_suppressions, noqa_line, physical_lines, source_map

# findings a noqa cannot or should not silence: the checker failed, the file does not parse, or the
# finding is about a suppression comment itself; notes (reveal_spmd_type) are asked for, not findings
NOT_SUPPRESSIBLE = frozenset({"SPMD000", "SPMD001", "SPMD006"})


def _wants_noqa(d: Diagnostic) -> bool:
    return d.code not in NOT_SUPPRESSIBLE and d.severity != "note"


def with_noqa(text: str, diags: list[Diagnostic]) -> tuple[str, int]:
    """The text with the needed `noqa` codes added; and how many lines changed."""
    wanted: dict[int, set[str]] = {}
    smap = source_map(text) if any(_wants_noqa(d) for d in diags) else None
    for d in diags:
        if _wants_noqa(d) and smap is not None:
            wanted.setdefault(noqa_line(smap, d.line), set()).add(d.code)
    if not wanted:
        return text, 0
    existing = {s.line: s for s in find_suppressions(text)[0] if s.kind == "noqa"}
    lines = physical_lines(text)
    changed = 0
    for number, codes in sorted(wanted.items()):
        if not 0 < number <= len(lines):
            continue
        line = lines[number - 1]
        body = line.rstrip("\r\n")
        ending = line[len(body) :]
        s = existing.get(number)
        if s is not None and s.items is None:
            continue  # a blanket noqa already covers the line
        if s is not None:
            items = list(s.items or ())
            items += sorted(c for c in codes if c not in items)
            body = body[: s.start] + s.spelled(items) + body[s.end :]
        else:
            body = f"{body}  # noqa: {', '.join(sorted(codes))}"
        if body + ending != line:
            lines[number - 1] = body + ending
            changed += 1
    return "".join(lines), changed


def add_noqa(path: str, diags: list[Diagnostic]) -> tuple[int, str | None]:
    """(lines changed, error message)."""
    import libcst as cst

    p = pathlib.Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        return 0, f"cannot read: {exc.strerror}"
    bom = b"\xef\xbb\xbf" if data.startswith(b"\xef\xbb\xbf") else b""
    try:
        text = data[len(bom) :].decode("utf-8")
    except UnicodeDecodeError:
        return 0, "not UTF-8; add the comments by hand"
    new, changed = with_noqa(text, diags)
    if not changed:
        return 0, None
    try:
        cst.parse_module(new)
    except cst.ParserSyntaxError as exc:  # pragma: no cover - a comment at a line end cannot break parsing
        return 0, f"the file would not parse after adding comments ({exc.message}); left unchanged"
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(bom + new.encode("utf-8"))
        os.chmod(tmp, p.stat().st_mode & 0o7777)
        os.replace(tmp, p)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        return 0, f"cannot write: {exc.strerror}"
    return changed, None
