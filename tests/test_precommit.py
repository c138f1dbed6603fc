"""The pre-commit hook of this checkout, run as a user would: `pre-commit try-repo` in a throwaway repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT

BUGGY = textwrap.dedent("""\
    import torch.nn.functional as F

    import spmd_types as spmd
    from spmd_types import I, R
    from spmdcheck.annotations import Local


    def column_parallel(x: Local["tp: I"], w1: Local["tp: S(0)"]) -> Local["tp: S(-1)"]:
        return F.gelu(F.linear(x, w1))
""")
FIXED = BUGGY.replace("F.linear(x, w1)", "F.linear(spmd.convert(x, 'tp', src=I, dst=R), w1)")


def git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_try_repo_finds_the_staged_bug_and_passes_the_fix(tmp_path):
    pytest.importorskip("pre_commit")
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    project = tmp_path / "project"
    project.mkdir()
    git("init", "-q", cwd=project)
    git("config", "user.email", "dev@example.invalid", cwd=project)
    git("config", "user.name", "dev", cwd=project)
    (project / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"]\n')
    (project / "layers.py").write_text(BUGGY)
    git("add", "pyproject.toml", "layers.py", cwd=project)
    # the hook must run from its own isolated install, not from this test run's import path
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")

    def try_repo():
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), "spmdcheck", "--verbose", "--color", "never"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )

    bad = try_repo()
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "layers.py:9:19: SPMD102 [invariant-mixing]" in bad.stdout, bad.stdout

    (project / "layers.py").write_text(FIXED)
    git("add", "layers.py", cwd=project)
    good = try_repo()
    assert good.returncode == 0, good.stdout + good.stderr
    assert "spmdcheck" in good.stdout and "Passed" in good.stdout


def test_the_hook_install_does_not_pull_torch(tmp_path):
    """What pre-commit's `pip install <repo>` resolves to: the checker and its small dependencies only."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report", "-"]
        + [str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    names = {item["metadata"]["name"].lower() for item in json.loads(proc.stdout)["install"]}
    assert {"spmdcheck", "libcst", "rich"} <= names
    assert not names & {"torch", "pygls", "lsprotocol", "spmd-types"}, names
