"""The command line as users and CI see it: exit codes, JSON shape, discovery, config, explain, rules."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from cli_helpers import assert_ran

BUGGY = textwrap.dedent("""\
    import torch
    import torch.nn.functional as F
    import spmd_types as spmd
    from spmd_types import I, P, R, V

    y = spmd.assert_type(torch.randn(4, 8, requires_grad=True), {"tp": P})
    z = F.gelu(y)
""")
CLEAN = "import torch\nx = torch.randn(3)\n"


def run(args, cwd, **kw):
    proc = subprocess.run(
        [sys.executable, "-m", "spmdcheck", *args], cwd=cwd, capture_output=True, text=True, timeout=120, **kw
    )
    assert_ran(args, proc)
    return proc


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"]\n')
    return tmp_path


def test_clean_exits_0(project):
    (project / "ok.py").write_text(CLEAN)
    proc = run(["check", "ok.py"], project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "All checks passed" in proc.stdout


def test_findings_exit_1_with_text_frame_and_suggestion(project):
    (project / "bad.py").write_text(BUGGY)
    proc = run(["check", "bad.py", "--color", "never"], project)
    assert proc.returncode == 1
    assert "bad.py:7:5: SPMD101 [partial-through-nonlinear]" in proc.stdout
    assert "z = F.gelu(y)" in proc.stdout
    assert "spmd.all_reduce(y, 'tp', src=P, dst=R)" in proc.stdout


def test_json_has_exactly_the_documented_shape(project):
    (project / "bad.py").write_text(BUGGY)
    proc = run(["check", "--output-format", "json", "bad.py"], project)
    report = json.loads(proc.stdout)
    assert set(report) == {"diagnostics", "summary"}
    assert report["summary"] == {"files": 1, "errors": 1, "warnings": 0}
    (d,) = report["diagnostics"]
    assert set(d) == {
        "path",
        "line",
        "column",
        "end_line",
        "end_column",
        "code",
        "name",
        "severity",
        "message",
        "suggestions",
        "chain",  # the call sites of a finding reached through calls (test_surface.py)
    }
    assert d["chain"] == []
    assert (d["line"], d["column"], d["code"], d["name"], d["severity"]) == (
        7,
        5,
        "SPMD101",
        "partial-through-nonlinear",
        "error",
    )
    assert d["end_line"] == 7 and d["end_column"] == 14
    assert "'tp'" in d["message"] and "P" in d["message"]
    assert [s["replacement"] for s in d["suggestions"]] == [
        "spmd.all_reduce(y, 'tp', src=P, dst=R)",
        "spmd.all_reduce(y, 'tp', src=P, dst=I)",
    ]
    assert all(set(s) == {"message", "replacement"} for s in d["suggestions"])


def test_syntax_error_is_reported_and_the_run_goes_on(project):
    (project / "broken.py").write_text("import torch\nx = (1,\n")
    (project / "bad.py").write_text(BUGGY)
    proc = run(["check", "--output-format", "json", "."], project)
    codes = sorted((d["path"].split("/")[-1], d["code"]) for d in json.loads(proc.stdout)["diagnostics"])
    assert codes == [("bad.py", "SPMD101"), ("broken.py", "SPMD001")]
    assert proc.returncode == 1


def test_missing_path_and_bad_flag_exit_2(project):
    assert run(["check", "nope.py"], project).returncode == 2
    assert run(["check", "--output-format", "xml", "."], project).returncode == 2
    assert run(["check", "--select", "NOPE999", "."], project).returncode == 2


def test_broken_config_is_reported_and_stops_the_run(tmp_path):
    """As ruff: checking with other settings than the ones written would report what the config turns off."""
    (tmp_path / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"\nbogus\n')
    (tmp_path / "bad.py").write_text(BUGGY)
    proc = run(["check", "--output-format", "json", "bad.py"], tmp_path)
    assert proc.returncode == 2
    assert "SPMD005" in proc.stderr and "invalid TOML" in proc.stderr
    assert proc.stdout == ""


def test_unknown_config_key_exits_2(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.spmdcheck]\nmeshes = ["tp"]\n')
    (tmp_path / "ok.py").write_text(CLEAN)
    proc = run(["check", "ok.py"], tmp_path)
    assert proc.returncode == 2 and "unknown key 'meshes'" in proc.stderr


def test_gitignore_and_excludes_are_respected(project):
    (project / ".gitignore").write_text("generated/\n")
    (project / "generated").mkdir()
    (project / "generated" / "bad.py").write_text(BUGGY)
    (project / "build").mkdir()
    (project / "build" / "bad.py").write_text(BUGGY)
    (project / "ok.py").write_text(CLEAN)
    proc = run(["check", "--output-format", "json", "."], project)
    report = json.loads(proc.stdout)
    assert report["diagnostics"] == [] and report["summary"]["files"] == 1
    proc = run(["check", "--output-format", "json", "--no-respect-gitignore", "."], project)
    assert len(json.loads(proc.stdout)["diagnostics"]) == 1


def test_select_ignore_and_noqa(project):
    (project / "bad.py").write_text(BUGGY)
    assert run(["check", "--ignore", "SPMD101", "bad.py"], project).returncode == 0
    assert run(["check", "--ignore", "partial-through-nonlinear", "bad.py"], project).returncode == 0
    assert run(["check", "--select", "SPMD3", "bad.py"], project).returncode == 0
    assert run(["check", "--select", "SPMD1", "bad.py"], project).returncode == 1
    (project / "bad.py").write_text(BUGGY.replace("z = F.gelu(y)", "z = F.gelu(y)  # noqa: SPMD101"))
    assert run(["check", "bad.py"], project).returncode == 0
    (project / "bad.py").write_text(BUGGY.replace("z = F.gelu(y)", "z = F.gelu(y)  # spmdcheck: ignore[SPMD104]"))
    assert run(["check", "bad.py"], project).returncode == 1


def test_user_stub_path_adds_an_op(project):
    stubs = project / "typings" / "mylib"
    stubs.mkdir(parents=True)
    (stubs / "__init__.pyi").write_text(
        "from spmdcheck.annotations import linear\nfrom torch import Tensor\n\n"
        "@linear\ndef scale_free(x: Tensor) -> Tensor: ...\n"
    )
    (project / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"]\nstub_path = ["typings"]\n')
    src = BUGGY.replace("z = F.gelu(y)", "import mylib\nz = mylib.scale_free(y)\nw = F.gelu(z)")
    (project / "use.py").write_text(src)
    proc = run(["check", "--output-format", "json", "use.py"], project)
    (d,) = json.loads(proc.stdout)["diagnostics"]
    assert (d["line"], d["code"]) == (9, "SPMD101")  # P survived the linear user op, then hit gelu


def test_explain_and_rules():
    proc = run(["explain", "SPMD102"], ".")
    assert proc.returncode == 0 and "# SPMD102 invariant-mixing" in proc.stdout
    assert run(["explain", "invariant-mixing"], ".").returncode == 0
    assert run(["explain", "SPMD999"], ".").returncode == 2
    proc = run(["rules", "--output-format", "json"], ".")
    codes = json.loads(proc.stdout)
    assert {"SPMD101", "SPMD201", "SPMD306", "SPMD404"} <= {c["code"] for c in codes}


def test_python_dash_m_and_console_script_agree(project):
    (project / "bad.py").write_text(BUGGY)
    proc = subprocess.run(
        ["spmdcheck", "check", "--output-format", "json", "bad.py"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and json.loads(proc.stdout)["summary"]["errors"] == 1


def test_megatron_spelling_is_offered_in_megatron_code(project):
    src = BUGGY.replace(
        "import spmd_types as spmd\n", "import spmd_types as spmd\nfrom megatron.core import tensor_parallel\n"
    )
    (project / "bad.py").write_text(src)
    proc = run(["check", "--output-format", "json", "bad.py"], project)
    (d,) = json.loads(proc.stdout)["diagnostics"]
    assert "tensor_parallel.reduce_from_tensor_model_parallel_region(y)" in [s["replacement"] for s in d["suggestions"]]


def test_stdin_with_a_filename_for_editors(project):
    proc = run(["check", "-", "--stdin-filename", "pkg/mod.py", "--output-format", "json"], project, input=BUGGY)
    (d,) = json.loads(proc.stdout)["diagnostics"]
    assert (d["path"], d["line"], d["code"]) == ("pkg/mod.py", 7, "SPMD101")
    assert proc.returncode == 1


RANK_SPECIFIC = textwrap.dedent("""\
    from typing import Annotated

    import torch
    import torch.distributed as dist
    from spmd_types import R


    def scale(x: Annotated[torch.Tensor, {"tp": R}]) -> torch.Tensor:
        if dist.get_rank() == 0:
            x = x * 2.0
        if dist.get_rank() == 0:
            logged = x.detach().sum()
            print(logged.item())
        return x + 1.0


    def repeat(x: Annotated[torch.Tensor, {"tp": R}]) -> torch.Tensor:
        for _ in range(dist.get_rank()):
            x = x * 2.0
        return x
""")


@pytest.mark.parametrize(
    "flags,expected",
    [([], []), (["--preview"], [9, 18]), (["--select", "rank-specific-graph"], [9, 18]), (["--select", "SPMD5"], [])],
)
def test_preview_rule_runs_only_when_asked(project, flags, expected):
    """SPMD502 is a preview: off by default, on with --preview or its exact name; a prefix does not
    enable it. Work that stays inside the branch (logging) is not reported."""
    (project / "rank.py").write_text(RANK_SPECIFIC)
    proc = run(["check", "--output-format", "json", *flags, "rank.py"], project)
    lines = [d["line"] for d in json.loads(proc.stdout)["diagnostics"] if d["code"] == "SPMD502"]
    assert lines == expected, proc.stdout


def test_the_whole_report_reaches_a_pipe_and_a_reader_that_leaves_early_costs_no_traceback(project):
    """The command leaves with `os._exit` (cli.run), which flushes nothing at exit: the whole report must still
    reach a pipe, and a reader that closed the pipe early is not an error."""
    for i in range(40):
        (project / f"m{i}.py").write_text(BUGGY)
    whole = run(["check", ".", "--no-cache", "-j1"], project)
    assert whole.stdout.count("SPMD101") == 40, whole.stdout[-300:]
    # the summary, then the hint on fixes: last
    assert whole.stdout.rstrip().splitlines()[-2].endswith("(checked 40 file(s))."), whole.stdout[-300:]
    assert whole.stdout.rstrip().endswith("`--unsafe-fixes` option)."), whole.stdout[-300:]
    proc = subprocess.Popen(
        [sys.executable, "-m", "spmdcheck", "check", ".", "--no-cache", "-j1"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(10)
    proc.stdout.close()  # the reader leaves after 10 bytes
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert "Traceback" not in err, err
