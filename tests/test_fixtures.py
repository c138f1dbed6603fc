"""Fixtures are the spec: every program's diagnostics must be exactly the ones written on its lines.

Each fixture names its mesh (and strict mode) in its header, `# spmdcheck: mesh = [...]`, which the
checker itself reads; so `spmdcheck check fixtures/` prints exactly what the fixtures expect.
"""
from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict

import pytest
from conftest import FIXTURES, ROOT, expected_diagnostics

from spmdcheck.api import Settings, check_source

PROGRAMS = FIXTURES / "programs"  # packages checked as whole programs: tests/test_programs.py
ALL_FILES = sorted(p for p in FIXTURES.rglob("*.py") if "__pycache__" not in p.parts)
# single-file programs; a module of a package under programs/ means nothing checked alone
CASES = [p for p in ALL_FILES if PROGRAMS not in p.parents]


def test_corpus_is_large_enough():
    assert len(CASES) >= 30


@pytest.mark.parametrize("path", CASES, ids=[str(p.relative_to(FIXTURES)) for p in CASES])
def test_fixture(path, registry):
    text = path.read_text(encoding="utf-8")
    diags = check_source(text, str(path), Settings(), registry)
    got = {(d.line, d.code, d.severity) for d in diags}
    want = expected_diagnostics(text)
    assert got == want, "\n".join(f"{d.line}: {d.code} {d.message}" for d in diags)


def test_command_line_on_fixtures_prints_exactly_the_expected_findings():
    """The README's first command: `spmdcheck check fixtures/` reports every expected finding, nothing else."""
    proc = subprocess.run([sys.executable, "-m", "spmdcheck", "check", "fixtures", "--output-format", "json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr
    got: dict[str, set] = defaultdict(set)
    for d in json.loads(proc.stdout)["diagnostics"]:
        got[d["path"]].add((d["line"], d["code"], d["severity"]))
        if d["code"] in MUST_SUGGEST:
            assert d["suggestions"], d
    for path in ALL_FILES:  # the programs' modules too: the CLI checks the folder as it finds it
        rel = str(path.relative_to(ROOT))
        assert got.get(rel, set()) == expected_diagnostics(path.read_text(encoding="utf-8")), rel


# Codes whose fix is a call to insert: the text and JSON outputs must show it.
MUST_SUGGEST = {"SPMD101", "SPMD102", "SPMD104", "SPMD201", "SPMD305"}
