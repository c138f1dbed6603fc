"""`json-lines`: one JSON object per finding per line (the objects of the `json` format), no summary."""

from __future__ import annotations

import json
from typing import TextIO

from spmdcheck.diagnostics.render import Diagnostic
from spmdcheck.report import ReportContext
from spmdcheck.report.json_report import finding_json


def write(diags: list[Diagnostic], context: ReportContext, out: TextIO) -> None:
    for d in diags:
        out.write(json.dumps(finding_json(d), ensure_ascii=False) + "\n")
