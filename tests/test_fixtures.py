"""Fixtures are the spec: every program's findings must be exactly the ones written in it (line, column,
code, severity and message; the format and its update mode: tests/expectations.py, fixtures/README.md).

Each fixture names its mesh (and strict mode) in its header, `# spmdcheck: mesh = [...]`, which the
checker itself reads; so `spmdcheck check fixtures/` prints exactly what the fixtures expect.
"""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from collections import defaultdict

import pytest
from conftest import FIXTURES, ROOT, expect_pending
from expectations import difference, from_diagnostics, parse, pending

from spmdcheck.api import Settings, check_source

PROGRAMS = FIXTURES / "programs"  # packages checked as whole programs: tests/test_programs.py
ALL_FILES = sorted(p for p in FIXTURES.rglob("*.py") if "__pycache__" not in p.parts)
# single-file programs; a module of a package under programs/ means nothing checked alone
CASES = [p for p in ALL_FILES if PROGRAMS not in p.parents]
# the ground-truth harness's own programs (tests/test_ground_truth.py runs them, with torch): their findings
# are stated the same way and checked here, where torch is not needed
GROUND_TRUTH = sorted((ROOT / "tests" / "ground_truth" / "programs").glob("*.py"))


def test_corpus_is_large_enough():
    assert len(CASES) >= 30


@pytest.mark.parametrize("path", CASES, ids=[str(p.relative_to(FIXTURES)) for p in CASES])
def test_fixture(path, registry, expected_findings, request):
    text = path.read_text(encoding="utf-8")
    expect_pending(request, pending(text))
    diags = check_source(text, str(path), Settings(), registry)
    expected_findings.verify(path, from_diagnostics(diags))


@pytest.mark.parametrize("path", GROUND_TRUTH, ids=[p.name for p in GROUND_TRUTH])
def test_ground_truth_program_findings(path, registry, expected_findings):
    diags = check_source(path.read_text(encoding="utf-8"), str(path), Settings(), registry)
    expected_findings.verify(path, from_diagnostics(diags))


def test_command_line_on_fixtures_prints_exactly_the_expected_findings(expected_findings):
    """The README's first command: `spmdcheck check fixtures/` reports every expected finding, nothing else."""
    expected_findings.skip_if_updating()
    proc = subprocess.run([sys.executable, "-m", "spmdcheck", "check", "fixtures", "--output-format", "json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["summary"]["files"] >= len(ALL_FILES), report["summary"]
    got: dict[str, list] = defaultdict(list)
    for d in report["diagnostics"]:
        got[d["path"]].append(d)
        if d["code"] in MUST_SUGGEST:
            assert d["suggestions"], d
    for path in ALL_FILES:  # the programs' modules too: the CLI checks the folder as it finds it
        rel = str(path.relative_to(ROOT))
        text = path.read_text(encoding="utf-8")
        if pending(text) is not None or _in_pending_package(path):
            continue  # its own test is a strict expected failure (test_fixture, test_programs.test_program)
        problem = difference(from_diagnostics(got.get(rel, [])), parse(text))
        assert not problem, f"{rel}:\n{problem}"


def _in_pending_package(path: pathlib.Path) -> bool:
    """A module of a fixtures/programs/ package one of whose modules is pending (the marker sits in one module,
    usually the entry point, and the expectations in the others)."""
    programs = FIXTURES / "programs"
    if programs not in path.parents:
        return False
    package = programs / path.relative_to(programs).parts[0]
    return any(pending(m.read_text(encoding="utf-8")) is not None for m in package.rglob("*.py"))


# Codes whose fix is a call to insert: the text and JSON outputs must show it.
MUST_SUGGEST = {"SPMD101", "SPMD102", "SPMD104", "SPMD201", "SPMD305"}
