"""`full` (default; `text` is an alias): `path:line:col: CODE [name] severity: message`, a code frame, the
calls to insert.

The severity word (`error:`, `warning:`, `note:`, as mypy and pyright print it) comes after `[name]`: a
parser of ruff's `path:line:col: CODE message` shape still finds the position and the code where they
were, and a CI log tells a warning from an error.

What comes from the checked files (names, source lines, messages quoting code) goes through `printable`:
terminal escapes and bidirectional overrides are shown escaped, never obeyed. The code frame comes from
the text the checker decoded (`Diagnostic.frame`), else from `context.sources`.
"""

from __future__ import annotations

from typing import TextIO

from spmdcheck.diagnostics.render import Diagnostic
from spmdcheck.report import ReportContext, closing_lines, display_path
from spmdcheck.report.printable import printable

# a code frame shows at most this many characters of a line (a 10,000-character line stays readable)
FRAME_WIDTH = 200


def _frame(d: Diagnostic, context: ReportContext) -> tuple[tuple[int, str], ...]:
    frame = d.frame
    if not frame:
        lines = context.sources.lines(d.path)
        if not 0 < d.line <= len(lines):
            return ()
        frame = tuple((n, lines[n - 1]) for n in range(max(1, d.line - 1), min(len(lines), d.line + 1) + 1))
    if d.code == "SPMD001" and any("\0" in text or "\ufffd" in text for _, text in frame):
        return ()  # a binary or undecodable file: the one-line message says it, its bytes would say nothing
    return frame


def write(diags: list[Diagnostic], context: ReportContext, out: TextIO) -> None:
    from rich.console import Console
    from rich.markup import escape

    color = context.color

    class _Console(Console):
        def on_broken_pipe(self) -> None:  # rich would exit with status 1 itself; the command line decides
            raise BrokenPipeError

    console = _Console(file=out, force_terminal=color, no_color=not color, highlight=False, soft_wrap=True)
    for d in diags:
        style = {"error": "bold red", "warning": "bold yellow"}.get(d.severity, "bold cyan")
        console.print(
            f"[bold]{escape(printable(display_path(d.path)))}:{d.line}:{d.column}:[/bold] "
            f"[{style}]{d.code}[/{style}] [dim]\\[{d.name}][/dim] [{style}]{d.severity}:[/{style}] "
            f"{escape(printable(d.message))}"
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
            # a multi-line fix (a loop to insert) is shown as lines; each made printable on its own
            for line in s.replacement.split("\n") if s.replacement else ():
                console.print(f"        [green]{escape(printable(line))}[/green]")
        console.print()
    for line in closing_lines(diags, context):
        console.print(escape(line))
