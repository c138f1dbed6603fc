"""reveal_spmd_type (SPMD901 notes), `check --show-types` and `rule`, through the real command line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from cli_helpers import assert_ran

MLP = textwrap.dedent("""\
    import torch
    import torch.nn.functional as F

    import spmd_types as spmd
    from spmd_types import I, P, R
    from spmdcheck.annotations import Local, reveal_spmd_type


    def mlp(x: Local["tp: I, dp: S(0)"], w1: Local["tp: S(0), dp: R"], w2: Local["tp: S(1), dp: R"]):
        x = spmd.convert(x, "tp", src=I, dst=R)
        reveal_spmd_type(x)
        h = F.gelu(F.linear(x, w1))
        y = F.linear(h, w2)
        reveal_spmd_type(y)
        y = spmd.all_reduce(y, "tp", src=P, dst=I)
        return reveal_spmd_type(y)


    buf = torch.zeros(4)
    reveal_spmd_type(buf)


    def branchy(a: Local["tp: V"], flag: bool):
        b = spmd.reinterpret(a, "tp", src=spmd.V, dst=P) if flag else a
        reveal_spmd_type(b)
""")


def run(args, cwd, **kw):
    proc = subprocess.run(
        [sys.executable, "-m", "spmdcheck", *args], cwd=cwd, capture_output=True, text=True, timeout=120, **kw
    )
    assert_ran(args, proc)
    return proc


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["dp", "tp"]\n')
    (tmp_path / "mlp.py").write_text(MLP)
    return tmp_path


def test_reveal_notes_forward_and_gradient_and_never_fail(project):
    proc = run(["check", "--output-format", "json", "mlp.py"], project)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # notes only: a clean run
    report = json.loads(proc.stdout)
    notes = {d["line"]: d for d in report["diagnostics"]}
    assert all(
        d["code"] == "SPMD901" and d["severity"] == "note" and d["name"] == "reveal-type" for d in notes.values()
    )
    assert report["summary"]["errors"] == report["summary"]["warnings"] == 0
    # after convert(I -> R): the backward carries a partial sum (it is all-reduced by the convert's backward)
    assert notes[11]["message"] == "revealed type of `x`: forward {dp: S(0), tp: R}; gradient {dp: S(0), tp: P}"
    # a row-parallel product before its all-reduce: a per-rank partial sum in the local view
    assert notes[14]["message"] == (
        "revealed type of `y`: forward {dp: S(0), tp: V (unreduced partial sum)}; gradient {dp: S(0), tp: V}"
    )
    assert notes[16]["message"] == "revealed type of `y`: forward {dp: S(0), tp: I}; gradient {dp: S(0), tp: I}"
    # a factory without requires_grad: R on the mesh, no gradient at all
    assert (
        notes[20]["message"] == "revealed type of `buf`: forward {dp: R, tp: R}; gradient none (does not require grad)"
    )
    # a branch-dependent value: one note per possibility, naming the branch
    assert sorted(d["message"] for d in report["diagnostics"] if d["line"] == 25) == [
        "revealed type of `b`: forward {dp: ?, tp: P}; gradient {dp: ?, tp: R} "
        "(when the conditional expression at line 24 takes its first value)",
        "revealed type of `b`: forward {dp: ?, tp: V}; gradient {dp: ?, tp: V} "
        "(when the conditional expression at line 24 takes its else value)",
    ]


def test_reveal_with_a_real_finding_still_exits_1(project):
    (project / "bad.py").write_text(MLP.replace('    x = spmd.convert(x, "tp", src=I, dst=R)\n', ""))
    proc = run(["check", "--color", "never", "bad.py"], project)
    assert proc.returncode == 1
    assert "SPMD102" in proc.stdout and "SPMD901" in proc.stdout
    assert "Found 1 error and 0 warnings in 1 file(s)" in proc.stdout


def test_reveal_is_a_no_op_at_run_time():
    from spmdcheck.annotations import reveal_spmd_type

    marker = object()
    assert reveal_spmd_type(marker) is marker


def test_reveal_is_known_through_a_stub_line(registry):
    rule = registry.lookup("spmdcheck.annotations.reveal_spmd_type")
    assert rule is not None and rule.spmd_api == "reveal" and rule.source.endswith("spmdcheck/annotations.pyi")


def test_show_types_json(project):
    proc = run(["check", "--show-types", "--output-format", "json", "mlp.py"], project)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert all(set(r) >= {"path", "line", "column", "name", "type", "grad_type"} for r in rows)
    by_pos = {(r["line"], r["column"], r["name"]): r for r in rows}
    x_param = by_pos[(9, 9, "x")]
    assert (x_param["type"], x_param["grad_type"]) == ("{dp: S(0), tp: I}", "{dp: S(0), tp: I}")
    x_conv = by_pos[(10, 5, "x")]
    assert x_conv["axes"] == {"dp": "S(0)", "tp": "R"} and x_conv["grad_axes"] == {"dp": "S(0)", "tp": "P"}
    h = by_pos[(12, 5, "h")]
    assert h["axes"] == {"dp": "S(0)", "tp": "S(-1)"}
    buf = by_pos[(19, 1, "buf")]
    assert buf["grad_type"] == "none (does not require grad)" and buf["requires_grad"] == "no"
    assert by_pos[(24, 5, "b")]["axes"] == {"dp": "?", "tp": "P | V"}
    assert rows == sorted(rows, key=lambda r: (r["line"], r["column"], r["name"]))


def test_show_types_text_beside_the_source(project):
    proc = run(["check", "--show-types", "--color", "never", "mlp.py"], project)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    conv = next(line for line in lines if 'x = spmd.convert(x, "tp", src=I, dst=R)' in line)
    assert conv.startswith("10 |")
    assert conv.endswith("# x: {dp: S(0), tp: R}, grad {dp: S(0), tp: P}")
    assert any(line.startswith("25 |") for line in lines)  # the whole file is shown


def test_show_types_on_an_unannotated_file_says_unknown(tmp_path):
    (tmp_path / "plain.py").write_text("import torch\ny = torch.relu(x)\n")
    proc = run(["check", "--show-types", "--output-format", "json", "plain.py"], tmp_path)
    assert json.loads(proc.stdout) == [
        {
            "path": "plain.py",
            "line": 2,
            "column": 1,
            "name": "y",
            "type": "unknown tensor",
            "grad_type": "unknown",
            "axes": None,
            "grad_axes": None,
            "requires_grad": "unknown",
        }
    ]


def test_rule_is_explain_by_code_or_name(tmp_path):
    by_name = run(["rule", "invariant-mixing"], tmp_path)
    by_code = run(["rule", "SPMD102"], tmp_path)
    explain = run(["explain", "SPMD102"], tmp_path)
    assert by_name.returncode == by_code.returncode == 0
    assert by_name.stdout == by_code.stdout == explain.stdout
    assert by_code.stdout.startswith("# SPMD102 invariant-mixing")
    assert run(["rule", "no-such-rule"], tmp_path).returncode == 2
    assert run(["rule"], tmp_path).returncode == 2


def test_rule_all_json(tmp_path):
    from spmdcheck.diagnostics.codes import CODES

    proc = run(["rule", "--all", "--output-format", "json"], tmp_path)
    assert proc.returncode == 0
    rules = json.loads(proc.stdout)
    assert [r["code"] for r in rules] == list(CODES)
    one = next(r for r in rules if r["code"] == "SPMD901")
    assert one["name"] == "reveal-type" and one["severity"] == "note"
    assert one["explanation"].startswith("# SPMD901 reveal-type")
    single = json.loads(run(["rule", "reveal-type", "--output-format", "json"], tmp_path).stdout)
    assert single == one


def test_the_bind_observer_only_watches(registry):
    """Diagnostics are the same with and without the --show-types observer, on the shipped fixtures."""
    from conftest import FIXTURES

    from spmdcheck.api import Settings, check_source
    from spmdcheck.engine.typeinfo import infer_source

    files = sorted(FIXTURES.rglob("*.py"))[::5]
    assert len(files) >= 20
    bindings = 0
    for path in files:
        text = path.read_text()
        plain = check_source(text, str(path), Settings(), registry)
        typed = infer_source(text, str(path), Settings(), registry)
        assert typed.diagnostics == plain, path
        bindings += len(typed.bindings)
    assert bindings > 100


def test_show_types_reads_stdin_for_editors(project):
    proc = run(
        ["check", "--show-types", "--output-format", "json", "--stdin-filename", "buffer.py", "-"],
        project,
        input="from spmdcheck.annotations import Local\n\n\ndef f(a: Local['tp: P']):\n    b = a * 2\n",
    )
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert rows["a"]["path"] == "buffer.py"
    assert (rows["b"]["type"], rows["b"]["grad_type"]) == ("{dp: ?, tp: P}", "{dp: ?, tp: R}")


def test_notes_in_every_output_format(project):
    """A reveal note is a SARIF `note` (schema-valid), a GitHub `::notice`, GitLab `info`, no JUnit failure."""
    import pathlib
    import xml.etree.ElementTree as ET

    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((pathlib.Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
    sarif = run(["check", "--output-format", "sarif", "mlp.py"], project)
    assert sarif.returncode == 0, sarif.stderr
    log = json.loads(sarif.stdout)
    jsonschema.Draft4Validator(schema).validate(log)
    results = log["runs"][0]["results"]
    assert results and {r["level"] for r in results} == {"note"}
    rules = {r["id"]: r for r in log["runs"][0]["tool"]["driver"]["rules"]}
    assert rules["SPMD901"]["defaultConfiguration"]["level"] == "note"

    github = run(["check", "--output-format", "github", "mlp.py"], project)
    assert github.returncode == 0 and github.stdout.startswith("::notice ")
    gitlab = json.loads(run(["check", "--output-format", "gitlab", "mlp.py"], project).stdout)
    assert gitlab and {i["severity"] for i in gitlab} == {"info"}
    junit = ET.fromstring(run(["check", "--output-format", "junit", "mlp.py"], project).stdout)
    assert junit.get("failures") == "0"
    concise = run(["check", "--output-format", "concise", "--color", "never", "mlp.py"], project)
    assert concise.returncode == 0 and concise.stdout.rstrip().endswith("All checks passed (1 file(s) checked).")
