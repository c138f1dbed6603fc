"""Feature cases of the analysis (joins, loops, in-place, shard dims, the spmd_types and Megatron APIs).

Same convention as fixtures/: a `# spmdcheck: mesh = [...]` header and the expected findings written in the
file (tests/expectations.py). These are small and synthetic on purpose; fixtures/ holds the realistic programs.
"""
from __future__ import annotations

import pathlib

import pytest
from expectations import from_diagnostics

from spmdcheck.api import Settings, check_source

CASES = sorted((pathlib.Path(__file__).parent / "inference_cases").glob("*.py"))


@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_case(path, registry, expected_findings):
    diags = check_source(path.read_text(encoding="utf-8"), str(path), Settings(), registry)
    expected_findings.verify(path, from_diagnostics(diags))


def test_branch_is_named_in_the_message(registry):
    path = pathlib.Path(__file__).parent / "inference_cases" / "branches_inplace_views.py"
    text = path.read_text(encoding="utf-8")
    (d,) = [d for d in check_source(text, str(path), Settings(), registry) if d.code == "SPMD109"]
    assert "takes the else branch" in d.message
