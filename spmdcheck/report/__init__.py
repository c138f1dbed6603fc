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
TEXT_FORMATS = ("full", "concise")  # the formats read by people: a summary line, then the hint on fixes


@dataclass
class ReportContext:
    files: int  # how many files were checked
    color: bool = False
    sources: SourceLines = field(default_factory=SourceLines)
    incomplete: bool = False  # some path or setting could not be read
    quiet: bool = False  # -q: the findings only (no summary line, no hint on fixes)
    unsafe_fixes: bool = False  # --unsafe-fixes: unsafe fixes count as available


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


def ci_root(variable: str) -> str:
    """The folder CI paths are relative to: the checkout the CI names in `variable` (`GITHUB_WORKSPACE`,
    `CI_PROJECT_DIR`), whatever folder the check ran in; else the working folder."""
    root = os.environ.get(variable, "")
    return root if root and os.path.isdir(root) else "."


def fix_of(d: Diagnostic, unsafe: bool) -> bool:
    """Whether `d` has a fix `--fix` applies: its first placeable suggestion, safe or `unsafe` allowed
    (as `spmdcheck.fixes.rounds.fixable` decides)."""
    s = next((s for s in d.suggestions if s.span is not None), None)
    return s is not None and (unsafe or s.safe)


def fix_hint(diags: list[Diagnostic], unsafe: bool) -> str:
    """The closing hint on fixes, in ruff's words: how many findings `--fix` would fix and how many more
    `--unsafe-fixes` would (a fix that changes what the program computes is unsafe); "" when none."""
    applicable = sum(1 for d in diags if fix_of(d, unsafe))
    hidden = 0 if unsafe else sum(1 for d in diags if fix_of(d, True)) - applicable
    option = "`--fix --unsafe-fixes`" if unsafe else "`--fix`"
    more = f"{hidden} hidden fix{'es' * (hidden != 1)} can be enabled with the `--unsafe-fixes` option"
    if applicable and hidden:
        return f"[*] {applicable} fixable with the {option} option ({more})."
    if applicable:
        return f"[*] {applicable} fixable with the {option} option."
    if hidden:
        return f"No fixes available ({more})."
    return ""


def closing_lines(diags: list[Diagnostic], context: ReportContext) -> list[str]:
    """What a text report ends with: the summary line, then the hint on fixes (neither with -q)."""
    if context.quiet:
        return []
    hint = fix_hint(diags, context.unsafe_fixes)
    return [summary_line(diags, context.files, context.incomplete), *([hint] if hint else [])]


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
