"""Item 4 of issue 19's Why: cost on large or odd input is bounded (item 3 of What to build).

Each probe runs the real command line in a subprocess and reads its CPU time and peak memory from
`resource.getrusage(RUSAGE_CHILDREN)` (CPU, not wall time: a loaded 2-core CI runner stretches wall time,
not the work). The bounds are several times what the run takes now, and far below what it took before
(docs/robustness.md, "Bounded cost", has both): a regression to the old behaviour fails, a slow machine
does not.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import subprocess
import sys
import time

import libcst as cst
from cost_inputs import deep_hierarchy, large_module, rotations
from libcst.metadata import MetadataWrapper, PositionProvider
from robust_helpers import BUG, ROOT, diagnostics, no_traceback

from spmdcheck.analysis import budget
from spmdcheck.frontend.positions import positions

# Runs the command as its only child and writes the child's usage: RUSAGE_CHILDREN of this test's process
# would report the largest child any earlier test ran as the peak memory
_MEASURE = """
import json, resource, subprocess, sys
proc = subprocess.run(sys.argv[2:])
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as out:
    json.dump([usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024], out)
sys.exit(proc.returncode)
"""


def _measured(args: list[str], cwd: pathlib.Path) -> tuple[subprocess.CompletedProcess, float, float]:
    """Run `spmdcheck ARGS`; its result, CPU seconds (user + system, its workers' too) and peak resident
    memory in MB (of its largest process)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("SPMDCHECK_NO_PREPASS", None)
    usage = cwd.parent / f"usage-{cwd.name}.json"
    command = [sys.executable, "-c", _MEASURE, str(usage), sys.executable, "-m", "spmdcheck", *args]
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    no_traceback(proc)
    cpu, peak_mb = json.loads(usage.read_text())
    return proc, cpu, peak_mb


def test_a_file_over_the_size_budget_is_quick_small_and_silent(tmp_path):
    # 2.5 MB of generated model code: 2.2 GB and a minute of CPU before (0.9 GB per MB), now the pre-pass
    # reads it (~1.3 s of CPU and 250 MB per MB on a quiet machine) and leaves it unknown
    (tmp_path / "big.py").write_text(large_module(2_500_000))
    (tmp_path / "bug.py").write_text(BUG)
    args = ["check", "--no-cache", "-j1", "--verbose", "--output-format", "json", "."]
    proc, cpu, peak_mb = _measured(args, tmp_path)
    assert proc.returncode == 1
    assert [(d["path"], d["code"]) for d in diagnostics(proc)] == [("bug.py", "SPMD102")]
    assert "big.py: not analysed" in proc.stderr and "over the budget" in proc.stderr
    assert peak_mb < 1000, f"{peak_mb:.0f} MB"
    assert cpu < 30, f"{cpu:.1f} s of CPU"


def test_memory_and_time_of_an_analysed_file_grow_linearly(tmp_path):
    # two files under the size budget, one twice the other: both checked whole (one finding per rotation of
    # the generator's blocks), and the larger costs about twice the smaller, not more
    results = []
    for size in (80_000, 160_000):
        folder = tmp_path / str(size)
        folder.mkdir()
        text = large_module(size)
        (folder / "model.py").write_text(text)
        proc, cpu, peak_mb = _measured(["check", "--no-cache", "-j1", "--output-format", "json", "."], folder)
        assert proc.returncode == 1
        assert len(diagnostics(proc)) == rotations(text)
        results.append((len(text), cpu, peak_mb))
    (small, small_cpu, small_mb), (large, large_cpu, large_mb) = results
    base_mb = 60  # the interpreter, the rules and libcst before any file
    per_mb = (large_mb - base_mb) / (large / 1e6)
    assert per_mb < 1500, f"{per_mb:.0f} MB of memory per MB of code"
    assert large_cpu / small_cpu < 3.0, results
    assert (large_mb - base_mb) / max(small_mb - base_mb, 1) < 3.0, results


def test_a_300_deep_super_chain_is_checked_in_linear_time(tmp_path):
    # each `forward` calling `super().forward`: 34 s at depth 300 before (n^3.4: every lookup made the mro
    # again, itself quadratic), now a few hundredths of a second per hundred levels
    cpu_of = {}
    for depth in (100, 300):
        folder = tmp_path / str(depth)
        folder.mkdir()
        (folder / "chain.py").write_text(deep_hierarchy(depth))
        proc, cpu, _ = _measured(["check", "--no-cache", "-j1", "--output-format", "json", "."], folder)
        assert proc.returncode == 1
        last_line = deep_hierarchy(depth).count("\n")
        assert [(d["line"], d["code"]) for d in diagnostics(proc)] == [(last_line, "SPMD201")]
        cpu_of[depth] = cpu
    # the whole command (start-up, the rules) takes ~1.5 s of CPU on a quiet machine; 300 levels add ~0.3 s
    assert cpu_of[300] < 15, cpu_of
    assert cpu_of[300] - cpu_of[100] < 5, cpu_of


def test_a_serial_run_degrades_an_analysis_over_its_time_budget_silently(tmp_path, monkeypatch, capsys):
    # no SPMD000 and no exit status 2 for a file the checker gave up on: it is unknown, said under --verbose
    from spmdcheck.cli import main
    from spmdcheck.engine import analyse

    loop = "\n".join(f"        y{i} = x @ w.T" for i in range(1000))
    slow = f"\n\ndef g(x: Local['tp: R'], w: Local['tp: R']):\n    for _ in range(3):\n{loop}\n"
    (tmp_path / "slow.py").write_text(BUG.replace("return x @ w.T", "return x") + slow)
    (tmp_path / "quick.py").write_text(BUG)
    monkeypatch.setattr(analyse, "ANALYSIS_BUDGET_S", 0.0)
    monkeypatch.setattr(analyse, "ANALYSIS_BUDGET_PER_FILE_S", 0.0)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--no-cache", "-j1", "--output-format", "concise", "slow.py", "quick.py"]) == 1
    quiet = capsys.readouterr()
    assert "quick.py:7:12: SPMD102" in quiet.out and "slow.py" not in quiet.out + quiet.err
    assert main(["check", "--no-cache", "-j1", "--verbose", "--output-format", "concise", "slow.py", "quick.py"]) == 1
    loud = capsys.readouterr()
    assert "spmdcheck: note: slow.py: not analysed: the analysis did not finish within its budget" in loud.err
    assert loud.out == quiet.out


def test_a_file_over_the_size_budget_is_not_cached_as_checked(tmp_path, monkeypatch, capsys):
    # the note is the run's, so the result is not stored: a warm run says it again
    from spmdcheck.cli import main

    monkeypatch.setattr(budget, "MAX_PARSED_CHARS", 2_000)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.spmdcheck]\n")
    (tmp_path / "big.py").write_text(large_module(3_000))
    (tmp_path / "bug.py").write_text(BUG)
    for _ in range(2):
        assert main(["check", "--verbose", "--output-format", "concise", "."]) == 1
        out = capsys.readouterr()
        assert "big.py: not analysed" in out.err
        assert "bug.py:7:12: SPMD102" in out.out and "big.py:" not in out.out


def test_positions_are_libcsts_for_the_nodes_asked_and_for_all():
    # frontend/positions.py replaces libcst's PositionProvider table (10x its cost on a large file)
    files = sorted((ROOT / "fixtures").rglob("*.py"))[:20] + sorted((ROOT / "spmdcheck" / "frontend").glob("*.py"))
    texts = [p.read_text() for p in files]
    texts += ["x = 1", "x = 1\r\ny = (2 +\r\n  3)\r\n# c", "x = 1\ry = 2\rdef f():\r    return 3"]
    texts.append("@d\n# c\n@e\ndef f(): pass\n")
    rng = random.Random(19)
    for text in texts:
        module = cst.parse_module(text)
        expected = dict(MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider))
        assert positions(module) == expected
        some = rng.sample(list(expected), min(30, len(expected)))
        assert positions(module, some) == {node: expected[node] for node in some}


def test_positions_of_a_few_nodes_cost_a_fraction_of_libcsts():
    module = cst.parse_module(large_module(60_000))
    start = time.process_time()
    table = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    libcst_cpu = time.process_time() - start
    wanted = list(table)[::500]
    start = time.process_time()
    assert positions(module, wanted) == {node: table[node] for node in wanted}
    ours_cpu = time.process_time() - start
    assert ours_cpu < libcst_cpu / 2, (ours_cpu, libcst_cpu)
