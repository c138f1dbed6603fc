"""docs/rules.md is generated from the same source as `spmdcheck rule`: it must be up to date."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT

from spmdcheck.diagnostics.codes import CODES

REGENERATE = "python -m spmdcheck rule --all --output-format markdown > docs/rules.md"


def test_committed_rules_page_is_what_the_command_prints():
    proc = subprocess.run(
        [sys.executable, "-m", "spmdcheck", "rule", "--all", "--output-format", "markdown"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    committed = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert committed == proc.stdout, f"docs/rules.md is stale: run `{REGENERATE}`"


def test_rules_page_has_every_code_and_its_examples():
    page = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    for code, info in CODES.items():
        assert f"\n## {code} {info.name}\n" in page, code
        assert f"](#{code.lower()}-{info.name})" in page, code
    # the pages' own headings moved one level down, code comments left alone
    assert "\n### What it does\n" in page and "\n# What it does" not in page
    assert "h = F.linear(x, w1)  # error: SPMD102" in page
