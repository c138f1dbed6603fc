"""`full` (default; `text` is an alias): `path:line:col: CODE [name] message`, a code frame, the calls to insert.

What comes from the checked files (names, source lines, messages quoting code) goes through `printable`:
terminal escapes and bidirectional overrides are shown escaped, never obeyed. The code frame comes from
the text the checker decoded (`Diagnostic.frame`), else from `context.sources`.
"""

from __future__ import annotations

from typing import TextIO

from spmdcheck.diagnostics.render import Diagnostic
from spmdcheck.report import ReportContext, display_path, summary_line
from spmdcheck.report.printable import printable

# a code frame shows at most this many characters of a line (a 10,000-character line stays readable)
FRAME_WIDTH = 200


def _frame(d: Diagnostic, context: ReportContext) -> tuple[tuple[int, str], ...]:
    if d.frame:
        return d.frame
    lines = context.sources.lines(d.path)
    if not 0 < d.line <= len(lines):
        return ()
    return tuple((n, lines[n - 1]) for n in range(max(1, d.line - 1), min(len(lines), d.line + 1) + 1))


def write(diags: list[Diagnostic], context: ReportContext, out: TextIO) -> None:
    from rich.console import Console
    from rich.markup import escape

    color, files = context.color, context.files
    console = Console(file=out, force_terminal=color, no_color=not color, highlight=False, soft_wrap=True)
    for d in diags:
        style = {"error": "bold red", "warning": "bold yellow"}.get(d.severity, "bold cyan")
        console.print(
            f"[bold]{escape(printable(display_path(d.path)))}:{d.line}:{d.column}:[/bold] "
            f"[{style}]{d.code}[/{style}] [dim]\\[{d.name}][/dim] {escape(printable(d.message))}"
        )
        frame = _frame(d, context)
        width = len(str(frame[-1][0])) if frame else 0
        for n, text in frame:
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
            if s.replacement:
                console.print(f"        [green]{escape(printable(s.replacement))}[/green]")
        console.print()
    console.print(escape(summary_line(diags, files, context.incomplete)))
