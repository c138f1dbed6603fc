"""The terminal sessions in docs/ are real: their files are written and commands run, printing what the page shows."""

from __future__ import annotations

import shutil

import pytest
from conftest import ROOT
from doc_sessions import run_document

DOCS = ROOT / "docs"
# every page with a `console` block; a new one is picked up by the test below
SESSION_PAGES = sorted(p.name for p in DOCS.glob("*.md") if "```console" in p.read_text(encoding="utf-8"))


def test_the_walk_through_pages_have_sessions():
    assert {"getting-started.md", "annotations.md"} <= set(SESSION_PAGES)


@pytest.mark.skipif(shutil.which("spmdcheck") is None, reason="the spmdcheck command is not installed")
@pytest.mark.parametrize("page", SESSION_PAGES)
def test_every_command_prints_what_the_page_shows(page, tmp_path):
    results = run_document(DOCS / page, tmp_path)
    assert results
    for command, expected, actual in results:
        assert actual == expected, f"{page}: $ {command}\n--- page ---\n{expected}\n--- real ---\n{actual}"
    if page == "getting-started.md":  # the walk-through ends with the Megatron-spelled fix on disk
        assert len(results) >= 7
        assert "copy_to_tensor_model_parallel_region(hidden_states)" in (tmp_path / "mlp.py").read_text()

