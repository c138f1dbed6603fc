"""`gitlab`: a GitLab Code Quality report (a JSON list of issues, `artifacts:reports:codequality`).

Paths are relative to the repository's checkout (`CI_PROJECT_DIR`), as GitLab matches them to the merge
request's files, also when the check runs in a subfolder.
"""

from __future__ import annotations

import json
from typing import TextIO

from spmdcheck.diagnostics.render import Diagnostic
from spmdcheck.report import ReportContext, ci_root
from spmdcheck.report.fingerprint import finding_keys, relative_posix

_SEVERITY = {"error": "major", "warning": "minor", "note": "info"}


def write(diags: list[Diagnostic], context: ReportContext, out: TextIO) -> None:
    root = ci_root("CI_PROJECT_DIR")
    keys = finding_keys(diags, context.sources, root)
    issues = [
        {
            "type": "issue",
            "check_name": d.code,
            "description": f"{d.code} [{d.name}] {d.message}",
            "categories": ["Bug Risk"],
            "severity": _SEVERITY.get(d.severity, "major"),
            "fingerprint": key.digest(),
            "location": {"path": relative_posix(d.path, root), "lines": {"begin": d.line, "end": d.end_line}},
        }
        for d, key in zip(diags, keys)
    ]
    json.dump(issues, out, indent=2, ensure_ascii=False)
    out.write("\n")
