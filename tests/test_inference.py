"""Feature cases of the analysis (joins, loops, in-place, shard dims, the spmd_types and Megatron APIs).

Same convention as fixtures/: a `# spmdcheck: mesh = [...]` header and the expected diagnostics written on
their lines. These are small and synthetic on purpose; fixtures/ holds the realistic programs.
"""
from __future__ import annotations

import pathlib

import pytest
from conftest import expected_diagnostics

from spmdcheck.api import Settings, check_source

CASES = sorted((pathlib.Path(__file__).parent / "inference_cases").glob("*.py"))


@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_case(path, registry):
    text = path.read_text(encoding="utf-8")
    diags = check_source(text, str(path), Settings(), registry)
    got = {(d.line, d.code, d.severity) for d in diags}
    assert got == expected_diagnostics(text), "\n".join(f"{d.line}: {d.code} {d.message}" for d in diags)


def test_branch_is_named_in_the_message(registry):
    path = pathlib.Path(__file__).parent / "inference_cases" / "branches_inplace_views.py"
    text = path.read_text(encoding="utf-8")
    (d,) = [d for d in check_source(text, str(path), Settings(), registry) if d.code == "SPMD109"]
    assert "takes the else branch" in d.message
