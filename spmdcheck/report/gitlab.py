"""`gitlab`: a GitLab Code Quality report (a JSON list of issues, `artifacts:reports:codequality`)."""

from __future__ import annotations

import json
from typing import TextIO

from spmdcheck.diagnostics.render import Diagnostic
from spmdcheck.report import ReportContext
from spmdcheck.report.fingerprint import finding_keys, relative_posix

_SEVERITY = {"error": "major", "warning": "minor", "note": "info"}


def write(diags: list[Diagnostic], context: ReportContext, out: TextIO) -> None:
    keys = finding_keys(diags, context.sources)
    issues = [
        {
            "type": "issue",
            "check_name": d.code,
            "description": f"{d.code} [{d.name}] {d.message}",
            "categories": ["Bug Risk"],
            "severity": _SEVERITY.get(d.severity, "major"),
            "fingerprint": key.digest(),
            "location": {"path": relative_posix(d.path, "."), "lines": {"begin": d.line, "end": d.end_line}},
        }
        for d, key in zip(diags, keys)
    ]
    json.dump(issues, out, indent=2, ensure_ascii=False)
    out.write("\n")
