"""Unannotated real code gives no diagnostics: the installed torch/distributed package, default mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def _torch_distributed() -> str | None:
    try:
        import torch.distributed
    except ImportError:
        return None
    return os.path.dirname(torch.distributed.__file__)


@pytest.mark.skipif(_torch_distributed() is None, reason="torch is not installed")
def test_torch_distributed_is_clean(tmp_path):
    root = _torch_distributed()
    proc = subprocess.run(
        [sys.executable, "-m", "spmdcheck", "check", root, "--output-format", "json", "--no-respect-gitignore"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    report = json.loads(proc.stdout)
    assert report["diagnostics"] == []
    assert report["summary"]["files"] > 300


def test_command_path_never_imports_torch(tmp_path):
    """Start-up matters in pre-commit: `python -X importtime -m spmdcheck check FILE` must not import torch."""
    src = tmp_path / "m.py"
    src.write_text("import torch\nimport spmd_types as spmd\nx = spmd.assert_type(torch.randn(2), {'tp': spmd.V})\n")
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "spmdcheck", "check", str(src)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert "libcst" in imported
    assert not any(name == "torch" or name.startswith("torch.") for name in imported)
