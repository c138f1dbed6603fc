"""Reporters: one module per `--output-format`, each with `write(diags, context, out)`.

Diagnostics arrive sorted by (path, line, column, code); every reporter keeps
that order, so the output is deterministic.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from spmdcheck.diagnostics.render import display_path as display_path  # re-exported for the reporters
from spmdcheck.report.sources import SourceLines

if TYPE_CHECKING:  # the reporters are imported on demand; the CLI's option parsing stays light
    from spmdcheck.diagnostics.render import Diagnostic

# format name -> module under spmdcheck.report
FORMATS = {
    "full": "text_report",
    "concise": "concise",
    "json": "json_report",
    "json-lines": "json_lines",
    "sarif": "sarif",
    "github": "github",
    "gitlab": "gitlab",
    "junit": "junit",
}
ALIASES = {"text": "full"}  # `text` was the name of `full` before there were other formats


@dataclass
class ReportContext:
    files: int  # how many files were checked
    color: bool = False
    sources: SourceLines = field(default_factory=SourceLines)
    incomplete: bool = False  # some path or setting could not be read


def write_report(fmt: str, diags: list[Diagnostic], context: ReportContext, out: TextIO) -> None:
    module = importlib.import_module(f"spmdcheck.report.{FORMATS[ALIASES.get(fmt, fmt)]}")
    module.write(diags, context, out)


def summary_line(diags: list[Diagnostic], files: int, incomplete: bool = False) -> str:
    """The closing line; notes (reveal_spmd_type) are not findings and are not counted. `incomplete`: a
    path or setting could not be read (said on stderr): never claim a clean pass then."""
    findings = [d for d in diags if d.severity != "note"]
    errors = sum(1 for d in findings if d.severity == "error")
    warnings = len(findings) - errors
    if not findings and incomplete:
        return f"No findings in the {files} file(s) checked, but the run was incomplete (see the errors above)."
    if not findings:
        return f"All checks passed ({files} file(s) checked)."
    return (
        f"Found {errors} error{'s' * (errors != 1)} and {warnings} warning{'s' * (warnings != 1)} "
        f"in {len({d.path for d in findings})} file(s) (checked {files} file(s))."
    )


def use_color(choice: str, stream: TextIO) -> bool:
    """--color always/never win; `auto` follows NO_COLOR, then FORCE_COLOR, then whether `stream` is a TTY."""
    if choice in ("always", "never"):
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
