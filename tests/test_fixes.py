"""`check --fix --unsafe-fixes` inserts the suggested collective; nothing is written that cannot be parsed."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import libcst as cst
from cli_helpers import assert_ran

from spmdcheck.diagnostics.render import Diagnostic, SuggestionOut
from spmdcheck.fixes.apply import apply_fixes

SRC = textwrap.dedent('''\
    # spmdcheck: mesh = ["tp"]
    from typing import Annotated

    import torch
    import torch.nn.functional as F
    from spmd_types import I, S


    def mlp(x: Annotated[torch.Tensor, {"tp": I}], w1: Annotated[torch.Tensor, {"tp": S(0)}]):
        return F.gelu(F.linear(x, w1))
''')


def run(args, cwd):
    proc = subprocess.run([sys.executable, "-m", "spmdcheck", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)
    assert_ran(args, proc)
    return proc


def test_fix_alone_changes_nothing_and_says_why(tmp_path):
    (tmp_path / "m.py").write_text(SRC)
    proc = run(["check", "--fix", "m.py"], tmp_path)
    assert proc.returncode == 1
    assert "--unsafe-fixes" in proc.stderr
    assert (tmp_path / "m.py").read_text() == SRC


def test_unsafe_fixes_insert_the_conversion_and_the_import(tmp_path):
    (tmp_path / "m.py").write_text(SRC)
    proc = run(["check", "--fix", "--unsafe-fixes", "m.py"], tmp_path)
    fixed = (tmp_path / "m.py").read_text()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "F.linear(spmd_types.convert(x, 'tp', src=I, dst=spmd_types.R), w1)" in fixed
    assert "\nimport spmd_types\n" in fixed
    cst.parse_module(fixed)


def test_a_fix_that_would_not_parse_is_not_written(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(SRC)
    bad = Diagnostic(str(path), 10, 19, 10, 34, "SPMD102", "invariant-mixing", "error", "m",
                     [SuggestionOut("broken", "convert(((", (10, 19, 10, 34))])
    outcome = apply_fixes(str(path), [bad], None)
    assert outcome.applied == 0 and "would not parse" in (outcome.error or "")
    assert path.read_text() == SRC
