"""Ruff-like text output: `path:line:col: CODE [name] message`, a code frame, the calls to insert."""

from __future__ import annotations

import os
from typing import TextIO

from spmdcheck.diagnostics.render import Diagnostic


def _relative(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def write_text(diags: list[Diagnostic], files: int, out: TextIO, color: bool | None = None) -> None:
    from rich.console import Console
    from rich.markup import escape

    console = Console(file=out, force_terminal=color, no_color=color is False, highlight=False, soft_wrap=True)
    sources: dict[str, list[str]] = {}
    for d in diags:
        style = {"error": "bold red", "warning": "bold yellow"}.get(d.severity, "bold cyan")
        console.print(
            f"[bold]{escape(_relative(d.path))}:{d.line}:{d.column}:[/bold] [{style}]{d.code}[/{style}] "
            f"[dim]\\[{d.name}][/dim] {escape(d.message)}"
        )
        lines = sources.get(d.path)
        if lines is None:
            try:
                with open(d.path, encoding="utf-8") as fh:
                    lines = fh.read().splitlines()
            except OSError:
                lines = []
            sources[d.path] = lines
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
            console.print(f"        [green]{escape(s.replacement)}[/green]")
        console.print()
    errors = sum(1 for d in diags if d.severity == "error")
    warnings = sum(1 for d in diags if d.severity == "warning")
    if errors or warnings:
        console.print(
            f"Found {errors} error{'s' * (errors != 1)} and {warnings} warning{'s' * (warnings != 1)} "
            f"in {len({d.path for d in diags if d.severity != 'note'})} file(s) (checked {files} file(s))."
        )
    else:
        console.print(f"All checks passed ({files} file(s) checked).")
