"""The JSON report: exactly {"diagnostics": [...], "summary": {"files", "errors", "warnings"}}.

Each diagnostic is `Diagnostic.to_json()` with its call chain added: `chain`, the call sites through which a
finding inside a helper is reached, innermost call first (the order of the message's "called from ..."), each
`{"path", "line", "column", "message"}`; empty for a finding not reached through calls.
"""

from __future__ import annotations

import json
from typing import TextIO

from spmdcheck.diagnostics.render import Diagnostic
from spmdcheck.report import ReportContext


def finding_json(d: Diagnostic) -> dict:
    """One diagnostic of the `json` and `json-lines` formats."""
    chain = [
        {"path": path, "line": line, "column": column, "message": f"called from here (step {step} of the call chain)"}
        for step, (path, line, column) in enumerate(d.chain, 1)
    ]
    return {**d.to_json(), "chain": chain}


def write(diags: list[Diagnostic], context: ReportContext, out: TextIO) -> None:
    summary = {
        "files": context.files,
        "errors": sum(1 for d in diags if d.severity == "error"),
        "warnings": sum(1 for d in diags if d.severity == "warning"),
    }
    json.dump({"diagnostics": [finding_json(d) for d in diags], "summary": summary}, out, indent=2)
    out.write("\n")
