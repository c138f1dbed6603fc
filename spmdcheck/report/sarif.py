"""`sarif`: SARIF 2.1.0, one run, as GitHub code scanning reads it.

Rules carry their metadata (short/full description, the whole rule page as
`help`, default level; no `helpUri`: the pages are not published at a URL,
and a viewer shows `help` in place); results carry a region, the suggested fixes as SARIF fixes, and a
line-number-free `partialFingerprints` entry so that code scanning tracks a
finding across edits above it.
"""

from __future__ import annotations

import json
import pathlib
import re
import urllib.parse
from typing import TextIO

from spmdcheck import __version__
from spmdcheck.diagnostics.codes import CODES, Code
from spmdcheck.diagnostics.render import Diagnostic
from spmdcheck.report import ReportContext
from spmdcheck.report.fingerprint import finding_keys

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
_SECTION = re.compile(r"^## What it does\n(?P<body>.*?)(?=^## |\Z)", re.DOTALL | re.MULTILINE)
_ROOT_ID = "%SRCROOT%"


def _what_it_does(info: Code) -> str:
    m = _SECTION.search(info.page())
    return " ".join(m.group("body").split()) if m else info.summary


def rule_descriptor(info: Code) -> dict:
    page = info.page()
    return {
        "id": info.code,
        "name": info.name,
        "shortDescription": {"text": info.summary},
        "fullDescription": {"text": _what_it_does(info)},
        "help": {"text": page, "markdown": page},
        "defaultConfiguration": {"level": info.severity},
        "properties": {
            "tags": ["spmd", "strict" if info.strict_only else "default"],
            "problem.severity": info.severity,
        },
    }


def _artifact(path: str) -> dict:
    absolute = pathlib.Path(path).resolve()
    try:
        rel = absolute.relative_to(pathlib.Path.cwd().resolve())
    except ValueError:
        return {"uri": absolute.as_uri()}
    return {"uri": urllib.parse.quote(rel.as_posix()), "uriBaseId": _ROOT_ID}


def _region(line: int, column: int, end_line: int, end_column: int) -> dict:
    region = {"startLine": line, "startColumn": column}
    if (end_line, end_column) >= (line, column):
        region.update(endLine=end_line, endColumn=end_column)
    return region


def _result(d: Diagnostic, rule_index: int, fingerprint: str) -> dict:
    artifact = _artifact(d.path)
    result = {
        "ruleId": d.code,
        "ruleIndex": rule_index,
        "level": {"error": "error", "note": "note"}.get(d.severity, "warning"),
        "message": {"text": d.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": artifact,
                    "region": _region(d.line, d.column, d.end_line, d.end_column),
                }
            }
        ],
        "partialFingerprints": {"spmdcheckFinding/v1": fingerprint},
    }
    fixes = [
        {
            "description": {"text": s.message},
            "artifactChanges": [
                {
                    "artifactLocation": artifact,
                    "replacements": [{"deletedRegion": _region(*s.span), "insertedContent": {"text": s.replacement}}],
                }
            ],
        }
        for s in d.suggestions
        if s.span is not None
    ]
    if fixes:
        result["fixes"] = fixes
    return result


def sarif_log(diags: list[Diagnostic], context: ReportContext) -> dict:
    index = {code: i for i, code in enumerate(CODES)}
    keys = finding_keys(diags, context.sources)
    run = {
        "tool": {
            "driver": {
                "name": "spmdcheck",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": [rule_descriptor(info) for info in CODES.values()],
            }
        },
        "originalUriBaseIds": {_ROOT_ID: {"uri": pathlib.Path.cwd().resolve().as_uri() + "/"}},
        "columnKind": "unicodeCodePoints",
        "results": [_result(d, index[d.code], key.digest()) for d, key in zip(diags, keys)],
    }
    return {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def write(diags: list[Diagnostic], context: ReportContext, out: TextIO) -> None:
    json.dump(sarif_log(diags, context), out, indent=2, ensure_ascii=False)
    out.write("\n")
