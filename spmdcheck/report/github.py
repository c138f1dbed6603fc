"""`github`: GitHub Actions workflow commands, one `::error`/`::warning` annotation per finding.

GitHub shows only the first 10 annotations of each type per step in the
pull-request view (the rest are in the log); upload SARIF for the full list. Paths are relative to the
repository's checkout (`GITHUB_WORKSPACE`), as the annotations need, also when the check runs in a subfolder.
"""

from __future__ import annotations

from typing import TextIO

from spmdcheck.diagnostics.render import Diagnostic
from spmdcheck.report import ReportContext, ci_root
from spmdcheck.report.fingerprint import relative_posix
from spmdcheck.report.printable import printable


def escape_data(text: str) -> str:
    """The message after `::` (GitHub's escaping of workflow command data)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A `key=value` property: `:` and `,` separate properties, so they are escaped too."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def write(diags: list[Diagnostic], context: ReportContext, out: TextIO) -> None:
    root = ci_root("GITHUB_WORKSPACE")
    for d in diags:
        level = {"error": "error", "note": "notice"}.get(d.severity, "warning")
        props = {
            "file": printable(relative_posix(d.path, root)),
            "line": str(d.line),
            "col": str(d.column),
            "endLine": str(d.end_line),
            "endColumn": str(d.end_column),
            "title": f"{d.code} {d.name}",
        }
        # the runner's log viewer interprets terminal escapes: text from the files is shown escaped
        message = f"{d.code} {printable(d.message)}"
        if d.suggestions:
            s = d.suggestions[0]
            message += f"\nhelp: {printable(s.message)}\n    {printable(s.replacement)}"
        rendered = ",".join(f"{k}={escape_property(v)}" for k, v in props.items())
        out.write(f"::{level} {rendered}::{escape_data(message)}\n")
