"""The JSON report: exactly {"diagnostics": [...], "summary": {"files", "errors", "warnings"}}."""

from __future__ import annotations

import json
from typing import TextIO

from spmdcheck.diagnostics.render import Diagnostic


def write_json(diags: list[Diagnostic], files: int, out: TextIO) -> None:
    summary = {
        "files": files,
        "errors": sum(1 for d in diags if d.severity == "error"),
        "warnings": sum(1 for d in diags if d.severity == "warning"),
    }
    json.dump({"diagnostics": [d.to_json() for d in diags], "summary": summary}, out, indent=2)
    out.write("\n")
