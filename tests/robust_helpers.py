"""Running the real command line on hostile input (shared by the robustness tests)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

from cli_helpers import assert_ran

ROOT = pathlib.Path(__file__).resolve().parent.parent

# a file with one known finding (SPMD102 on line 7), to prove that the rest of a run is still checked
BUG = """\
# spmdcheck: mesh = ["tp"]
from spmdcheck.annotations import Local
import torch


def f(x: Local["tp: I"], w: Local["tp: S(0)"]):
    return x @ w.T
"""


def run(args: list[str], cwd: pathlib.Path, timeout: float = 180, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    kw.setdefault("capture_output", True)
    kw.setdefault("text", not isinstance(kw.get("input"), bytes))
    proc = subprocess.run(
        [sys.executable, "-m", "spmdcheck", *args], cwd=cwd, timeout=timeout, env=env, **kw
    )
    if kw.get("capture_output"):
        assert_ran(args, proc)
    return proc


def output(proc: subprocess.CompletedProcess) -> str:
    out, err = proc.stdout, proc.stderr
    if isinstance(out, bytes):
        out, err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    return out + err


def no_traceback(proc: subprocess.CompletedProcess) -> None:
    text = output(proc)
    assert "Traceback" not in text, text[-3000:]
    assert proc.returncode >= 0, f"killed by signal {-proc.returncode}"


def diagnostics(proc: subprocess.CompletedProcess) -> list[dict]:
    """The diagnostics of a `--output-format json` run."""
    return json.loads(proc.stdout)["diagnostics"]
