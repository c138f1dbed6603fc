"""`concise`: one line per finding, `path:line:col: CODE [name] message`, then the summary."""

from __future__ import annotations

from typing import TextIO

from spmdcheck.diagnostics.render import Diagnostic
from spmdcheck.report import ReportContext, display_path, summary_line

_STYLE = {"error": "\x1b[1;31m", "warning": "\x1b[1;33m", "note": "\x1b[1;36m"}
_RESET, _BOLD = "\x1b[0m", "\x1b[1m"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def write(diags: list[Diagnostic], context: ReportContext, out: TextIO) -> None:
    for d in diags:
        where = f"{display_path(d.path)}:{d.line}:{d.column}:"
        code = d.code
        if context.color:
            where, code = f"{_BOLD}{where}{_RESET}", f"{_STYLE.get(d.severity, '')}{code}{_RESET}"
        out.write(f"{where} {code} [{d.name}] {_one_line(d.message)}\n")
    out.write(summary_line(diags, context.files) + "\n")
