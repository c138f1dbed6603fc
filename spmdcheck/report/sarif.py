"""`sarif`: SARIF 2.1.0, one run, as GitHub code scanning reads it.

Rules carry their metadata (short/full description, the whole rule page as
`help`, default level, and `helpUri`: the rule's page, `SPMDCHECK_DOCS_URL` + `SPMD101.md` when that
base URL is set (where the pages of spmdcheck/diagnostics/pages/ are published, e.g. a repository's web
view), else the `file:` URI of the page installed with the package: SARIF wants an absolute URI, and
spmdcheck is not published at a fixed address); results carry a region, the suggested fixes as SARIF
fixes, a line-number-free `partialFingerprints` entry so that code scanning tracks a finding across edits
above it, and for a finding reached through calls, the call sites as `relatedLocations` and the path from
the outermost call to the finding as a `codeFlows` thread flow. Paths are relative to the repository's
checkout (`GITHUB_WORKSPACE`) when set, else to the working folder.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import urllib.parse
from typing import TextIO

from spmdcheck import __version__
from spmdcheck.diagnostics.codes import CODES, Code
from spmdcheck.diagnostics.render import Diagnostic
from spmdcheck.report import ReportContext, ci_root
from spmdcheck.report.fingerprint import finding_keys

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
_SECTION = re.compile(r"^## What it does\n(?P<body>.*?)(?=^## |\Z)", re.DOTALL | re.MULTILINE)
_ROOT_ID = "%SRCROOT%"


def _what_it_does(info: Code) -> str:
    m = _SECTION.search(info.page())
    return " ".join(m.group("body").split()) if m else info.summary


def help_uri(code: str) -> str:
    """The address of a rule's page (see the module's docstring)."""
    base = os.environ.get("SPMDCHECK_DOCS_URL", "")
    if base:
        return base.rstrip("/") + f"/{code}.md"
    return (pathlib.Path(__file__).resolve().parent.parent / "diagnostics" / "pages" / f"{code}.md").as_uri()


def rule_descriptor(info: Code) -> dict:
    page = info.page()
    return {
        "id": info.code,
        "name": info.name,
        "helpUri": help_uri(info.code),
        "shortDescription": {"text": info.summary},
        "fullDescription": {"text": _what_it_does(info)},
        "help": {"text": page, "markdown": page},
        "defaultConfiguration": {"level": info.severity},
        "properties": {
            "tags": ["spmd", "strict" if info.strict_only else "default"],
            "problem.severity": info.severity,
        },
    }


def _source_root() -> pathlib.Path:
    return pathlib.Path(ci_root("GITHUB_WORKSPACE")).resolve()


def _artifact(path: str) -> dict:
    absolute = pathlib.Path(path).resolve()
    try:
        rel = absolute.relative_to(_source_root())
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
    if d.chain:
        result.update(_call_chain(d))
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


def _call_chain(d: Diagnostic) -> dict:
    """The call sites of a finding reached through calls: `relatedLocations` (innermost call first, as the
    message says them), and one thread flow from the outermost call to the finding."""

    def location(path: str, line: int, column: int, text: str, index: int | None = None) -> dict:
        region = {"startLine": line, **({"startColumn": column} if column else {})}
        place = {"physicalLocation": {"artifactLocation": _artifact(path), "region": region}}
        return {**({"id": index} if index is not None else {}), **place, "message": {"text": text}}

    related = [location(*site, "called from here", i) for i, site in enumerate(d.chain, 1)]
    steps = [{"location": location(*site, "the call")} for site in reversed(d.chain)]
    finding = location(d.path, d.line, d.column, d.message)
    finding["physicalLocation"]["region"] = _region(d.line, d.column, d.end_line, d.end_column)
    steps.append({"location": finding})
    return {"relatedLocations": related, "codeFlows": [{"threadFlows": [{"locations": steps}]}]}


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
        "originalUriBaseIds": {_ROOT_ID: {"uri": _source_root().as_uri() + "/"}},
        "columnKind": "unicodeCodePoints",
        "results": [_result(d, index[d.code], key.digest()) for d, key in zip(diags, keys)],
    }
    return {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def write(diags: list[Diagnostic], context: ReportContext, out: TextIO) -> None:
    json.dump(sarif_log(diags, context), out, indent=2, ensure_ascii=False)
    out.write("\n")
