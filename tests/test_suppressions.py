"""Adopting spmdcheck on legacy code: suppression comments, unused-suppression (SPMD006) and its fix,
--add-noqa, and a baseline that survives edits above its findings."""

from __future__ import annotations

import json

import pytest
from cli_helpers import BUGGY, run

MULTILINE = BUGGY.replace("z = F.gelu(y)", "z = F.gelu(\n    y,\n)")


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"]\n')
    return tmp_path


def findings(project, *args, path="a.py"):
    proc = run(["check", "--output-format", "json", *args, path], project)
    assert "Traceback" not in proc.stderr, proc.stderr
    return [(d["line"], d["code"]) for d in json.loads(proc.stdout)["diagnostics"]], proc


@pytest.mark.parametrize(
    "source",
    [
        MULTILINE.replace("z = F.gelu(", "# spmdcheck: ignore[SPMD101]\nz = F.gelu("),  # own line: next statement
        MULTILINE.replace("z = F.gelu(", "# spmdcheck: ignore[partial-through-nonlinear]  reason text\nz = F.gelu("),
        MULTILINE.replace("\n)", "\n)  # noqa: SPMD101"),  # on the statement's last line: the whole statement
        MULTILINE.replace("z = F.gelu(", "z = F.gelu(  # noqa: SPMD101"),
        "# spmdcheck: ignore-file[SPMD101]\n" + MULTILINE,
        MULTILINE + "# spmdcheck: ignore-file\n",
    ],
)
def test_suppression_forms_cover_a_multiline_call(project, source):
    (project / "a.py").write_text(source)
    got, proc = findings(project)
    assert got == [] and proc.returncode == 0, got


def test_own_line_ignore_covers_only_the_next_statement(project):
    src = BUGGY.replace("z = F.gelu(y)", "# spmdcheck: ignore[SPMD101]\nz = F.gelu(y)\nw = F.gelu(y)")
    (project / "a.py").write_text(src)
    got, _ = findings(project)
    assert got == [(9, "SPMD101")]


def test_trailing_noqa_inside_a_call_covers_its_line_only(project):
    (project / "a.py").write_text(MULTILINE.replace("    y,", "    y,  # noqa: SPMD101"))
    got, _ = findings(project)
    # the finding is reported at the call's first line; the noqa on line 8 neither covers it nor is used
    assert got == [(7, "SPMD101"), (8, "SPMD006")]


@pytest.mark.parametrize(
    "line,expected_message,fixed",
    [
        ("z = y * 2  # noqa: SPMD101", "nothing to suppress for SPMD101", "z = y * 2"),
        (
            "z = F.gelu(y)  # noqa: SPMD101, SPMD102",
            "nothing to suppress for SPMD102",
            "z = F.gelu(y)  # noqa: SPMD101",
        ),
        ("z = F.gelu(y)  # noqa: SPMD101, SPMD777", "unknown code SPMD777", "z = F.gelu(y)  # noqa: SPMD101"),
        ("x = 1  # noqa: E501, SPMD104", "SPMD104", "x = 1  # noqa: E501"),
        ("x = 1  # spmdcheck: ignore[invariant-mixing]  # type: ignore", "invariant-mixing", "x = 1  # type: ignore"),
        ("x = 1  # spmdcheck: ignore", "every code", "x = 1"),
    ],
)
def test_unused_suppression_is_reported_and_fixed_by_plain_fix(project, line, expected_message, fixed):
    src = BUGGY.replace("z = F.gelu(y)", line)
    (project / "a.py").write_text(src)
    got, proc = findings(project)
    unused = [d for d in json.loads(proc.stdout)["diagnostics"] if d["code"] == "SPMD006"]
    assert len(unused) == 1 and expected_message in unused[0]["message"], unused
    proc = run(["check", "--fix", "a.py"], project)  # safe fix: no --unsafe-fixes needed
    assert (project / "a.py").read_text() == BUGGY.replace("z = F.gelu(y)", fixed)
    assert "SPMD006" not in run(["check", "--output-format", "concise", "a.py"], project).stdout


def test_unused_own_line_suppression_fix_removes_the_line(project):
    (project / "a.py").write_text(BUGGY.replace("z = F.gelu(y)", "# spmdcheck: ignore[SPMD104]\nz = F.gelu(y)  # noqa"))
    got, _ = findings(project)
    assert got == [(7, "SPMD006")]
    run(["check", "--fix", "a.py"], project)
    assert (project / "a.py").read_text() == BUGGY.replace("z = F.gelu(y)", "z = F.gelu(y)  # noqa")


def test_blanket_noqa_and_disabled_codes_are_not_reported(project):
    (project / "a.py").write_text(BUGGY + "x = 1  # noqa\nw = 2  # noqa: SPMD107\n")  # SPMD107 is strict-only
    got, _ = findings(project)
    assert got == [(7, "SPMD101")]
    (project / "a.py").write_text(BUGGY + "w = 2  # noqa: SPMD102\n")
    assert findings(project, "--ignore", "SPMD102")[0] == [(7, "SPMD101")]
    assert findings(project, "--ignore", "unused-suppression")[0] == [(7, "SPMD101")]


def test_a_file_with_only_a_stale_noqa_is_checked(project):
    (project / "a.py").write_text("x = 1  # noqa: SPMD101\n")
    assert findings(project)[0] == [(1, "SPMD006")]


def test_add_noqa_suppresses_everything_is_idempotent_and_keeps_crlf(project):
    src = MULTILINE.replace("z = F.gelu(", "z = F.gelu(  # keep this").replace(
        "import torch\n", "import torch\nimport os  # noqa: F401\n"
    )
    src += "w = torch.tanh(y)  # noqa: E501\ns = '''\n''' + str(F.gelu(y))\n"
    (project / "a.py").write_bytes(src.replace("\n", "\r\n").encode())
    before, _ = findings(project)
    assert [c for _, c in before] == ["SPMD101"] * 3
    proc = run(["check", "--add-noqa", "a.py"], project)
    assert proc.returncode == 0, proc.stderr
    once = (project / "a.py").read_bytes()
    assert b"\n" not in once.replace(b"\r\n", b"")  # every line still ends in CRLF
    text = once.decode()
    assert "z = F.gelu(  # keep this  # noqa: SPMD101\r\n" in text
    assert "w = torch.tanh(y)  # noqa: E501, SPMD101\r\n" in text
    assert "s = '''\r\n''' + str(F.gelu(y))  # noqa: SPMD101\r\n" in text  # not inside the string
    assert findings(project)[0] == []
    run(["check", "--add-noqa", "a.py"], project)
    assert (project / "a.py").read_bytes() == once


def test_baseline_survives_inserted_lines_and_only_new_findings_fail(project):
    (project / "a.py").write_text(BUGGY)
    proc = run(["check", "--write-baseline", "spmd-baseline.json", "."], project)
    assert proc.returncode == 0, proc.stderr
    entries = json.loads((project / "spmd-baseline.json").read_text())["findings"]
    assert entries == [{"path": "a.py", "code": "SPMD101", "line_text": "z = F.gelu(y)", "occurrence": 0}]
    assert run(["check", "--baseline", "spmd-baseline.json", "."], project).returncode == 0
    # lines inserted above (and the finding's own indentation changed): still the baselined finding
    shifted = BUGGY.replace("import torch\n", "import torch\n\n# a comment\nimport os\n").replace(
        "z = F.gelu(y)", "z =  F.gelu(y)"
    )
    (project / "a.py").write_text(shifted)
    got, proc = findings(project, "--baseline", "spmd-baseline.json")
    assert got == [] and proc.returncode == 0
    # the same finding a second time is new (occurrence 1), and so is a different one
    (project / "a.py").write_text(shifted + "z = F.gelu(y)\nq = torch.exp(y)\n")
    got, proc = findings(project, "--baseline", "spmd-baseline.json")
    assert got == [(11, "SPMD101"), (12, "SPMD101")] and proc.returncode == 1
    assert "1 finding(s) in the baseline not shown" in proc.stderr


def test_a_broken_baseline_exits_2(project):
    (project / "a.py").write_text(BUGGY)
    (project / "b.json").write_text("{not json")
    proc = run(["check", "--baseline", "b.json", "a.py"], project)
    assert proc.returncode == 2 and "not JSON" in proc.stderr


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("prefix", ["", "\f\n"])
def test_own_line_ignore_with_any_line_ending_and_a_form_feed(newline, prefix, registry):
    from spmdcheck.api import Settings, check_source

    base = BUGGY.replace("z = F.gelu(y)", "# spmdcheck: ignore[SPMD101]\nz = F.gelu(\n    y)\nw = torch.tanh(y)")
    src = (prefix + base).replace("\n", newline)
    diags = check_source(src, "x.py", Settings(mesh=("tp",)), registry)
    assert [(d.line, d.code) for d in diags] == [(10 + bool(prefix), "SPMD101")]  # only the tanh line


def test_reason_text_and_lookalike_words(registry):
    from spmdcheck.api import Settings, check_source

    settings = Settings(mesh=("tp",))
    # a blanket own-line ignore with a reason, in the file header: a suppression (of the import below it,
    # so unused), not a bad file setting (SPMD005)
    src = "# spmdcheck: ignore  the gelu is checked at run time\n" + BUGGY
    assert [(d.line, d.code) for d in check_source(src, "x.py", settings, registry)] == [(1, "SPMD006"), (8, "SPMD101")]
    src = BUGGY.replace("z = F.gelu(y)", "# spmdcheck: ignore  checked at run time\nz = F.gelu(y)")
    assert check_source(src, "x.py", settings, registry) == []
    src = BUGGY.replace("z = F.gelu(y)", "z = F.gelu(y)  # spmdcheck: ignored elsewhere")
    assert [d.code for d in check_source(src, "x.py", settings, registry)] == ["SPMD101"]


def test_add_noqa_leaves_reveal_notes_alone(project):
    src = BUGGY + "from spmdcheck.annotations import reveal_spmd_type\nreveal_spmd_type(y)\n"
    (project / "a.py").write_text(src)
    before, _ = findings(project)
    assert (9, "SPMD901") in before and (7, "SPMD101") in before
    assert run(["check", "--add-noqa", "a.py"], project).returncode == 0
    assert (project / "a.py").read_text() == src.replace("z = F.gelu(y)", "z = F.gelu(y)  # noqa: SPMD101")


def test_a_settings_header_alone_costs_no_tokenizer(monkeypatch):
    """`# spmdcheck: mesh = [...]` is a setting, not a suppression: a file whose only directive it is (every
    annotated file of a project) is not tokenized when its findings are shown, and one with a directive is."""
    from spmdcheck.diagnostics import suppression

    scanned = []
    real = suppression._scan
    monkeypatch.setattr(suppression, "_scan", lambda text: scanned.append(text) or real(text))
    header = '# spmdcheck: mesh = ["tp"]\nimport torch\n\nx = torch.ones(2)  # a comment\n'
    assert suppression.apply_suppressions("m.py", header, [], lambda code: True) == []
    assert suppression.find_suppressions(header) == ([], None)
    assert scanned == []
    ignored = header + "y = x  # spmdcheck: ignore[SPMD101]\n"
    found = suppression.apply_suppressions("m.py", ignored, [], lambda code: True)
    assert [d.code for d in found] == [suppression.UNUSED_CODE] and len(scanned) == 1  # reported unused, after a scan
