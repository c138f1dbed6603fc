"""`check --show-types`: every binding's inferred forward and gradient types, beside the source or as JSON."""

from __future__ import annotations

import json
from typing import TextIO

from spmdcheck.diagnostics.render import display_path
from spmdcheck.engine.typeinfo import Binding, TypedFile
from spmdcheck.report.printable import printable
from spmdcheck.report.sources import SourceLines

MAX_CODE_WIDTH = 88  # type columns start after the source, but never further right than this


def binding_text(b: Binding) -> str:
    return f"{b.name}: {b.view.forward}, grad {b.view.gradient}"


def write_types_json(files: list[TypedFile], out: TextIO) -> None:
    """A list of {path, line, column, name, type, grad_type, axes, grad_axes, requires_grad}."""
    json.dump([b.to_json() for f in files for b in f.bindings], out, indent=2)
    out.write("\n")


def write_types_text(files: list[TypedFile], out: TextIO, color: bool | None = None) -> None:
    """The source of each file, each line that binds names followed by their types."""
    from rich.console import Console
    from rich.markup import escape

    console = Console(file=out, force_terminal=color, no_color=color is False, highlight=False, soft_wrap=True)
    sources = SourceLines()  # decoded as Python does (coding cookie, BOM), lines numbered as Python does
    for f in files:
        # terminal escapes and bidi overrides from the file are shown escaped, as in the other reports
        lines = [printable(text) for text in sources.lines(f.path)]
        by_line: dict[int, list[Binding]] = {}
        for b in f.bindings:
            by_line.setdefault(b.line, []).append(b)
        console.print(f"[bold]{escape(printable(display_path(f.path)))}[/bold]")
        for d in f.diagnostics:
            if d.code in ("SPMD000", "SPMD001", "SPMD005"):  # why the types below may be missing
                console.print(f"  [bold red]{d.code}[/bold red] {escape(printable(d.message))}")
        width = len(str(len(lines)))
        code_width = min(MAX_CODE_WIDTH, max((len(lines[n - 1]) for n in by_line if n <= len(lines)), default=0))
        for n, text in enumerate(lines, start=1):
            prefix = f"[dim]{n:>{width}} |[/dim] "
            here = by_line.get(n)
            if not here:
                console.print(prefix + escape(text))
                continue
            types = "; ".join(binding_text(b) for b in here)
            console.print(prefix + escape(text.ljust(code_width)) + f"  [cyan]# {escape(types)}[/cyan]")
        console.print()
