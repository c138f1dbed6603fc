"""Shared helpers for the test suite."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SHARED = ROOT.parent / "shared"

EXPECT = re.compile(r"#\s*(error|warning|note):\s*((?:SPMD\d{3})(?:\s*,\s*SPMD\d{3})*)")


def expected_diagnostics(text: str) -> set[tuple[int, str, str]]:
    """(line, code, severity) from `# error: SPMD101` / `# warning: SPMD201` comments."""
    out: set[tuple[int, str, str]] = set()
    for lineno, line in enumerate(text.splitlines(), start=1):
        for m in EXPECT.finditer(line):
            for code in re.split(r"\s*,\s*", m.group(2).strip()):
                out.add((lineno, code, m.group(1)))
    return out


@pytest.fixture(scope="session")
def registry():
    from spmdcheck.api import load_registry

    return load_registry(())
