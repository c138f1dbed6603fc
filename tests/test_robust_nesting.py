"""Items 1, 2 and 11 of issue 9: deep nesting never kills the run, long flat chains are checked."""

from __future__ import annotations

import faulthandler
import os
import pathlib
import signal
import time

from robust_helpers import BUG, diagnostics, no_traceback, run

from spmdcheck.engine.workers import run_isolated
from spmdcheck.frontend.guard import MAX_EXPRESSION_DEPTH

HEADER = BUG + "\n\n"


def codes_at(diags, path):
    return sorted((d["line"], d["code"]) for d in diags if d["path"].endswith(path))


def test_deep_brackets_are_a_syntax_error_and_the_run_goes_on(tmp_path):
    (tmp_path / "deep.py").write_text(HEADER + "x = " + "(" * 1400 + "1" + ")" * 1400 + "\n")
    (tmp_path / "lists.py").write_text(HEADER + "y = " + "[" * 1400 + "1" + "]" * 1400 + "\n")
    (tmp_path / "bug.py").write_text(BUG)
    proc = run(["check", "--output-format", "json", "."], tmp_path)
    no_traceback(proc)
    assert proc.returncode == 1
    diags = diagnostics(proc)
    assert codes_at(diags, "deep.py") == [(10, "SPMD001")]
    assert "nested 1400 deep" in next(d["message"] for d in diags if d["path"].endswith("deep.py"))
    assert codes_at(diags, "lists.py") == [(10, "SPMD001")]
    assert codes_at(diags, "bug.py") == [(7, "SPMD102")]


def test_deep_nesting_with_a_pool_does_not_hang(tmp_path):
    for i in range(9):
        (tmp_path / f"bug{i}.py").write_text(BUG)
    (tmp_path / "deep.py").write_text(HEADER + "x = " + "f(" * 1400 + "1" + ")" * 1400 + "\n")
    proc = run(["check", "-j2", "--output-format", "json", "."], tmp_path, timeout=300)
    no_traceback(proc)
    assert proc.returncode == 1
    diags = diagnostics(proc)
    assert codes_at(diags, "deep.py") == [(10, "SPMD001")]
    assert sum(d["code"] == "SPMD102" for d in diags) == 9


def test_a_flat_sum_of_400_terms_is_checked(tmp_path):
    body = " + ".join(["a"] * 400)
    (tmp_path / "flat.py").write_text(
        HEADER + f"def g(a: Local['tp: R'], b: Local['tp: P']):\n    return {body} + b.exp()\n"
    )
    proc = run(["check", "--output-format", "json", "flat.py"], tmp_path)
    no_traceback(proc)
    diags = diagnostics(proc)
    assert codes_at(diags, "flat.py") == [(7, "SPMD102"), (11, "SPMD101")], diags


def test_a_chain_past_the_limit_is_reported_and_the_rest_is_checked(tmp_path):
    body = " + ".join(["a"] * (MAX_EXPRESSION_DEPTH + 200))
    (tmp_path / "long.py").write_text(
        HEADER
        + f"def g(a: Local['tp: R']):\n    return (\n        {body}\n    )\n\n\n"
        + "def h(b: Local['tp: P']):\n    return b.exp()\n"
    )
    proc = run(["check", "--output-format", "json", "long.py"], tmp_path)
    no_traceback(proc)
    diags = diagnostics(proc)
    assert codes_at(diags, "long.py") == [(7, "SPMD102"), (12, "SPMD001"), (17, "SPMD101")], diags
    assert "the rest of the file was checked" in next(d["message"] for d in diags if d["code"] == "SPMD001")


def test_a_500_branch_elif_chain_is_analysed_without_a_huge_traceback(tmp_path):
    branches = "".join(f"    elif r == {i}:\n        y = x + x\n" for i in range(1, 500))
    (tmp_path / "elif.py").write_text(
        HEADER + "def g(x: Local['tp: R'], r: int):\n    if r == 0:\n        y = x\n" + branches + "    return y\n"
    )
    proc = run(["check", "--output-format", "json", "elif.py"], tmp_path)
    no_traceback(proc)
    assert len(proc.stdout) + len(proc.stderr) < 100_000
    assert codes_at(diagnostics(proc), "elif.py") == [(7, "SPMD102")]


def _work(task: int) -> int:
    if task == 3:
        faulthandler.disable()  # pytest's handler would print the crash; the pool reports it instead
        os.kill(os.getpid(), signal.SIGSEGV)
    if task == 5:
        time.sleep(60)
    if task == 6:
        raise ValueError("boom")
    return task * 10


def test_the_pool_survives_a_crashed_a_hung_and_a_failing_task():
    start = time.monotonic()
    results = run_isolated(list(range(10)), _work, lambda t, why: (t, why), 2, lambda t: 3.0)
    assert time.monotonic() - start < 30
    failures = {r[0]: r[1] for r in results if isinstance(r, tuple)}
    assert sorted(r for r in results if not isinstance(r, tuple)) == [0, 10, 20, 40, 70, 80, 90]
    assert "SIGSEGV" in failures[3]
    assert "time budget" in failures[5]
    assert "ValueError: boom" in failures[6]


def test_a_serial_run_stops_an_analysis_at_its_budget_and_goes_on(tmp_path, monkeypatch):
    # -j1 has no parent process to kill an overrunning analysis: the interpreter stops itself, and the file
    # degrades to unknown (issue 19): no diagnostic, a note for --verbose
    from spmdcheck.engine import analyse
    from spmdcheck.engine.run import run_check
    from spmdcheck.settings import Settings

    loop = "\n".join(f"        y{i} = x @ w.T" for i in range(1000))
    slow = f"\n\ndef g(x: Local['tp: R'], w: Local['tp: R']):\n    for _ in range(3):\n{loop}\n"
    (tmp_path / "slow.py").write_text(BUG + slow)
    (tmp_path / "quick.py").write_text(BUG)
    monkeypatch.setattr(analyse, "ANALYSIS_BUDGET_S", 0.0)
    monkeypatch.setattr(analyse, "ANALYSIS_BUDGET_PER_FILE_S", 0.0)
    files = sorted(str(p) for p in tmp_path.glob("*.py"))
    results = {pathlib.Path(r.path).name: r for r in run_check(files, Settings(), None, jobs=1)}
    assert results["slow.py"].diagnostics == []
    assert any("budget" in note and "CPU" in note for note in results["slow.py"].notes), results["slow.py"].notes
    assert [d.code for d in results["quick.py"].diagnostics] == ["SPMD102"]
    assert results["quick.py"].notes == []
