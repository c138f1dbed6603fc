"""A baseline: the findings a team has accepted, so that only new ones fail CI.

Entries are keyed on (path, code, normalised text of the reported line,
occurrence index), never on line numbers, so editing lines above a finding
does not resurface it. Paths are relative to the baseline file's folder.
"""

from __future__ import annotations

import json
import os
import pathlib
from collections import Counter

from spmdcheck.diagnostics.render import Diagnostic
from spmdcheck.report.fingerprint import FindingKey, finding_keys
from spmdcheck.report.sources import SourceLines

VERSION = 1


class BaselineError(Exception):
    pass


def write_baseline(path: pathlib.Path, diags: list[Diagnostic], sources: SourceLines) -> int:
    """Write the baseline atomically (a temporary file beside it, then a rename); the number of findings.
    Raises BaselineError, leaving no temporary file, when `path` is a directory or cannot be written."""
    keys = sorted(finding_keys(diags, sources, str(path.resolve().parent)))
    document = {
        "tool": "spmdcheck",
        "version": VERSION,
        "findings": [
            {"path": k.path, "code": k.code, "line_text": k.line_text, "occurrence": k.occurrence} for k in keys
        ],
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise BaselineError(f"{path}: cannot write the baseline: {exc.strerror or exc}") from exc
    return len(keys)


def read_baseline(path: pathlib.Path) -> Counter[FindingKey]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"{path}: cannot read the baseline: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{path}: the baseline is not JSON: {exc}") from exc
    if not isinstance(document, dict) or document.get("version") != VERSION:
        raise BaselineError(f"{path}: not an spmdcheck baseline of version {VERSION}")
    try:
        return Counter(
            FindingKey(str(e["path"]), str(e["code"]), str(e["line_text"]), int(e["occurrence"]))
            for e in document["findings"]
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise BaselineError(f"{path}: malformed baseline entry ({exc})") from exc


def new_findings(
    diags: list[Diagnostic], baseline: Counter[FindingKey], baseline_path: pathlib.Path, sources: SourceLines
) -> list[Diagnostic]:
    keys = finding_keys(diags, sources, str(baseline_path.resolve().parent))
    return [d for d, k in zip(diags, keys) if not baseline[k]]
