"""Line-number-free identities of findings: (path, code, normalised line text, occurrence).

Used by the baseline and as SARIF/GitLab fingerprints, so that inserting or
deleting lines above a finding leaves its identity unchanged. The occurrence
index tells apart identical findings on identical lines of one file.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from dataclasses import dataclass

from spmdcheck.diagnostics.render import Diagnostic
from spmdcheck.report.sources import SourceLines

_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, order=True)
class FindingKey:
    path: str  # posix, relative to the base directory when below it
    code: str
    line_text: str  # stripped, inner whitespace collapsed
    occurrence: int  # 0 for the first finding with this (path, code, line_text)

    def digest(self) -> str:
        raw = "\0".join((self.path, self.code, self.line_text, str(self.occurrence)))
        return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:32]


def normalise_line(text: str) -> str:
    return _SPACE.sub(" ", text.strip())


def relative_posix(path: str, base: str) -> str:
    try:
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(base))
    except ValueError:  # another drive on Windows
        return path.replace(os.sep, "/")
    return path.replace(os.sep, "/") if rel.startswith("..") else rel.replace(os.sep, "/")


def finding_keys(diags: list[Diagnostic], sources: SourceLines, base: str = ".") -> list[FindingKey]:
    """One key per diagnostic, in the given order (occurrences counted in (line, column) order)."""
    order = sorted(range(len(diags)), key=lambda i: diags[i].sort_key())
    seen: Counter[tuple[str, str, str]] = Counter()
    keys: list[FindingKey | None] = [None] * len(diags)
    for i in order:
        d = diags[i]
        ident = (relative_posix(d.path, base), d.code, normalise_line(sources.line(d.path, d.line)))
        keys[i] = FindingKey(*ident, seen[ident])
        seen[ident] += 1
    return keys  # type: ignore[return-value]
