"""`--diff`: every fix as a unified diff, nothing written."""

from __future__ import annotations

import difflib
import pathlib

from spmdcheck.diagnostics.render import Diagnostic
from spmdcheck.diagnostics.suppression import physical_lines


def fix_diff(path: str, diags: list[Diagnostic], shown_path: str, import_line: str | None) -> tuple[str, int]:
    """The unified diff that applying the first suggestion of each diagnostic would make; and how many fixes."""
    from spmdcheck.fixes import fix_text

    if not any(s.span is not None for d in diags for s in d.suggestions):
        return "", 0
    try:
        original = pathlib.Path(path).read_bytes().decode("utf-8").removeprefix("\ufeff")
    except (OSError, UnicodeDecodeError):
        return "", 0
    fixed, count = fix_text(original, diags, import_line)
    if fixed == original:
        return "", 0
    out = []
    for line in difflib.unified_diff(
        physical_lines(original), physical_lines(fixed), fromfile=f"a/{shown_path}", tofile=f"b/{shown_path}"
    ):
        out.append(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n")
    return "".join(out), count
