"""The JSON report: exactly {"diagnostics": [...], "summary": {"files", "errors", "warnings"}}."""

from __future__ import annotations

import json
from typing import TextIO

from spmdcheck.diagnostics.render import Diagnostic
from spmdcheck.report import ReportContext


def write(diags: list[Diagnostic], context: ReportContext, out: TextIO) -> None:
    summary = {
        "files": context.files,
        "errors": sum(1 for d in diags if d.severity == "error"),
        "warnings": sum(1 for d in diags if d.severity == "warning"),
    }
    json.dump({"diagnostics": [d.to_json() for d in diags], "summary": summary}, out, indent=2)
    out.write("\n")
