"""docs/getting-started.md is a real session: its files and commands are run, and print what the page shows."""

from __future__ import annotations

import shutil

import pytest
from conftest import ROOT
from doc_sessions import run_document

DOC = ROOT / "docs" / "getting-started.md"


@pytest.mark.skipif(shutil.which("spmdcheck") is None, reason="the spmdcheck command is not installed")
def test_every_command_prints_what_the_page_shows(tmp_path):
    results = run_document(DOC, tmp_path)
    assert len(results) >= 7
    for command, expected, actual in results:
        assert actual == expected, f"$ {command}\n--- page ---\n{expected}\n--- real ---\n{actual}"
    # the walk-through ends with the fixed file on disk
    assert "copy_to_tensor_model_parallel_region(hidden_states)" in (tmp_path / "mlp.py").read_text()
