"""`full` (default; `text` is an alias): `path:line:col: CODE [name] message`, a code frame, the calls to insert."""

from __future__ import annotations

from typing import TextIO

from spmdcheck.diagnostics.render import Diagnostic
from spmdcheck.report import ReportContext, display_path, summary_line


def write(diags: list[Diagnostic], context: ReportContext, out: TextIO) -> None:
    from rich.console import Console
    from rich.markup import escape

    color, files = context.color, context.files
    console = Console(file=out, force_terminal=color, no_color=not color, highlight=False, soft_wrap=True)
    for d in diags:
        style = {"error": "bold red", "warning": "bold yellow"}.get(d.severity, "bold cyan")
        console.print(
            f"[bold]{escape(display_path(d.path))}:{d.line}:{d.column}:[/bold] [{style}]{d.code}[/{style}] "
            f"[dim]\\[{d.name}][/dim] {escape(d.message)}"
        )
        lines = context.sources.lines(d.path)
        if 0 < d.line <= len(lines):
            width = len(str(min(len(lines), d.end_line + 1)))
            for n in range(max(1, d.line - 1), min(len(lines), d.line + 1) + 1):
                marker = ">" if n == d.line else " "
                console.print(f"[dim]{marker} {n:>{width}} |[/dim] {escape(lines[n - 1])}")
                if n == d.line:
                    end = d.end_column if d.end_line == d.line else len(lines[n - 1]) + 1
                    carets = "^" * max(1, end - d.column)
                    console.print(f"[dim]  {'':>{width}} |[/dim] {' ' * (d.column - 1)}[{style}]{carets}[/{style}]")
        for s in d.suggestions:
            console.print(f"  [cyan]help:[/cyan] {escape(s.message)}")
            if s.replacement:
                console.print(f"        [green]{escape(s.replacement)}[/green]")
        console.print()
    console.print(escape(summary_line(diags, files)))
