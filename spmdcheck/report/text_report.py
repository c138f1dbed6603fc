"""Ruff-like text output: `path:line:col: CODE [name] message`, a code frame, the calls to insert.

Everything printed that comes from the checked files (names, source lines, messages quoting code) goes
through `printable`: terminal escapes and bidirectional overrides are shown escaped, never obeyed, and a
line break in a file name cannot split a diagnostic line. The code frame comes from the text the checker
decoded (`Diagnostic.frame`); files are never read again here.
"""

from __future__ import annotations

import os
import re
from typing import TextIO

from spmdcheck.diagnostics.render import Diagnostic

# C0 and C1 controls except tab, DEL, and the bidirectional embeddings, overrides and isolates
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\u2028\u2029]")
# a code frame shows at most this many characters of a line (a 10,000-character line stays readable)
FRAME_WIDTH = 200


def printable(text: str) -> str:
    """`text` with every control or bidi character written as an escape (\\x1b, \\u202e)."""
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _relative(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def write_text(
    diags: list[Diagnostic], files: int, out: TextIO, color: bool | None = None, incomplete: bool = False
) -> None:
    """`incomplete`: some path or setting could not be read (said on stderr); never claim a clean pass then."""
    from rich.console import Console
    from rich.markup import escape

    console = Console(file=out, force_terminal=color, no_color=color is False, highlight=False, soft_wrap=True)
    for d in diags:
        style = "bold red" if d.severity == "error" else "bold yellow"
        console.print(
            f"[bold]{escape(printable(_relative(d.path)))}:{d.line}:{d.column}:[/bold] [{style}]{d.code}[/{style}] "
            f"[dim]\\[{d.name}][/dim] {escape(printable(d.message))}"
        )
        if d.frame:
            width = len(str(d.frame[-1][0]))
            for n, text in d.frame:
                marker = ">" if n == d.line else " "
                start = 0
                if len(text) > FRAME_WIDTH:  # keep the reported column in view
                    start = max(0, min(d.column - 1 - FRAME_WIDTH // 4, len(text) - FRAME_WIDTH))
                shown = text[start : start + FRAME_WIDTH]
                console.print(f"[dim]{marker} {n:>{width}} |[/dim] {escape(printable(shown))}")
                if n == d.line:
                    end = d.end_column if d.end_line == d.line else len(text) + 1
                    col = d.column - 1 - start
                    carets = "^" * max(1, min(end - d.column, FRAME_WIDTH - col))
                    # the carets line up under the escaped text: count what escaping adds before the column
                    pad = len(printable(shown[:col])) if col >= 0 else 0
                    console.print(f"[dim]  {'':>{width}} |[/dim] {' ' * pad}[{style}]{carets}[/{style}]")
        for s in d.suggestions:
            console.print(f"  [cyan]help:[/cyan] {escape(printable(s.message))}")
            console.print(f"        [green]{escape(printable(s.replacement))}[/green]")
        console.print()
    errors = sum(1 for d in diags if d.severity == "error")
    warnings = len(diags) - errors
    if diags:
        console.print(
            f"Found {errors} error{'s' * (errors != 1)} and {warnings} warning{'s' * (warnings != 1)} "
            f"in {len({d.path for d in diags})} file(s) (checked {files} file(s))."
        )
    elif incomplete:
        console.print(f"No findings in the {files} file(s) checked, but the run was incomplete (see the errors above).")
    else:
        console.print(f"All checks passed ({files} file(s) checked).")
