"""`concise`: one line per finding, `path:line:col: CODE [name] severity: message`, then the summary."""

from __future__ import annotations

from typing import TextIO

from spmdcheck.diagnostics.render import Diagnostic
from spmdcheck.report import ReportContext, closing_lines, display_path
from spmdcheck.report.printable import printable

_STYLE = {"error": "\x1b[1;31m", "warning": "\x1b[1;33m", "note": "\x1b[1;36m"}
_RESET, _BOLD = "\x1b[0m", "\x1b[1m"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def write(diags: list[Diagnostic], context: ReportContext, out: TextIO) -> None:
    for d in diags:
        where = f"{printable(display_path(d.path))}:{d.line}:{d.column}:"
        code = d.code
        if context.color:
            where, code = f"{_BOLD}{where}{_RESET}", f"{_STYLE.get(d.severity, '')}{code}{_RESET}"
        out.write(f"{where} {code} [{d.name}] {d.severity}: {printable(_one_line(d.message))}\n")
    for line in closing_lines(diags, context):
        out.write(line + "\n")
