"""The shared conformance programs (spmd-types decided their verdicts): a floor, run through the CLI."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import SHARED

RUNNER = SHARED / "conformance" / "run.py"


@pytest.mark.skipif(not RUNNER.is_file(), reason="shared/conformance is not beside the checkout")
def test_conformance_all_pass(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(RUNNER), "--spmdcheck", f"{sys.executable} -m spmdcheck", "-v"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
