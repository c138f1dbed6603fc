"""Every --output-format through the real command line; SARIF checked against the official 2.1.0 schema."""

from __future__ import annotations

import json
import pathlib
import xml.etree.ElementTree as ET

import jsonschema
import pytest
from cli_helpers import BUGGY, run

from spmdcheck.diagnostics.codes import CODES
from spmdcheck.report.github import escape_data, escape_property

SCHEMA = pathlib.Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
SECOND = BUGGY.replace("z = F.gelu(y)", "z = torch.tanh(y)\nw = torch.exp(y)")


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"]\n')
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "b.py").write_text(SECOND)
    (tmp_path / "a.py").write_text(BUGGY)
    return tmp_path


def test_sarif_is_valid_against_the_official_schema_and_complete(project):
    proc = run(["check", "--output-format", "sarif", "."], project)
    assert proc.returncode == 1, proc.stderr
    log = json.loads(proc.stdout)
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft4Validator(schema).validate(log)
    assert log["version"] == "2.1.0" and len(log["runs"]) == 1
    run_ = log["runs"][0]
    rules = run_["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == list(CODES)
    for r in rules:
        info = CODES[r["id"]]
        assert r["name"] == info.name and r["shortDescription"]["text"] == info.summary
        assert r["fullDescription"]["text"] and r["help"]["markdown"] == info.page()
        assert r["defaultConfiguration"]["level"] == info.severity
    results = run_["results"]
    assert [(r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]) for r in results] == [
        ("SPMD101", "a.py"),
        ("SPMD101", "pkg/b.py"),
        ("SPMD101", "pkg/b.py"),
    ]
    first = results[0]
    assert rules[first["ruleIndex"]]["id"] == "SPMD101"
    assert first["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 7,
        "startColumn": 5,
        "endLine": 7,
        "endColumn": 14,
    }
    (replacement,) = first["fixes"][0]["artifactChanges"][0]["replacements"]
    assert replacement["insertedContent"]["text"] == "spmd.all_reduce(y, 'tp', src=P, dst=R)"
    assert replacement["deletedRegion"] == {"startLine": 7, "startColumn": 12, "endLine": 7, "endColumn": 13}
    prints = [r["partialFingerprints"]["spmdcheckFinding/v1"] for r in results]
    assert len(set(prints)) == 3


def test_sarif_fingerprint_survives_lines_inserted_above(project):
    before = json.loads(run(["check", "--output-format", "sarif", "a.py"], project).stdout)
    (project / "a.py").write_text("# a new comment\n\n" + BUGGY)
    after = json.loads(run(["check", "--output-format", "sarif", "a.py"], project).stdout)
    (b,), (a,) = before["runs"][0]["results"], after["runs"][0]["results"]
    assert a["locations"][0]["physicalLocation"]["region"]["startLine"] == 9
    assert a["partialFingerprints"] == b["partialFingerprints"]


def test_clean_sarif_is_valid_too(tmp_path):
    (tmp_path / "ok.py").write_text("import torch\n")
    proc = run(["check", "--output-format", "sarif", "ok.py"], tmp_path)
    assert proc.returncode == 0
    log = json.loads(proc.stdout)
    jsonschema.Draft4Validator(json.loads(SCHEMA.read_text())).validate(log)
    assert log["runs"][0]["results"] == []


def test_github_annotations(project):
    proc = run(["check", "--output-format", "github", "a.py"], project)
    assert proc.returncode == 1
    (line,) = proc.stdout.splitlines()
    assert line.startswith(
        "::error file=a.py,line=7,col=5,endLine=7,endColumn=14,title=SPMD101 partial-through-nonlinear::"
    )
    assert "%0Ahelp: " in line and "\n" not in line.rstrip("\n")


def test_github_escaping():
    assert escape_data("50% a\r\nb") == "50%25 a%0D%0Ab"
    assert escape_property("dir,x/a:b.py") == "dir%2Cx/a%3Ab.py"
    assert escape_property("%\n") == "%25%0A"


def test_github_escapes_a_file_name_with_comma_and_colon(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"]\n')
    (tmp_path / "a,b:c.py").write_text(BUGGY)
    proc = run(["check", "--output-format", "github", "a,b:c.py"], tmp_path)
    assert proc.stdout.startswith("::error file=a%2Cb%3Ac.py,line=7,")


def test_gitlab_code_quality(project):
    proc = run(["check", "--output-format", "gitlab", "."], project)
    issues = json.loads(proc.stdout)
    assert [(i["check_name"], i["location"]["path"], i["location"]["lines"]["begin"]) for i in issues] == [
        ("SPMD101", "a.py", 7),
        ("SPMD101", "pkg/b.py", 7),
        ("SPMD101", "pkg/b.py", 8),
    ]
    for i in issues:
        assert set(i) >= {"description", "check_name", "fingerprint", "severity", "location"}
        assert i["severity"] in ("info", "minor", "major", "critical", "blocker")
    assert len({i["fingerprint"] for i in issues}) == 3


def test_junit(project):
    proc = run(["check", "--output-format", "junit", "."], project)
    root = ET.fromstring(proc.stdout)
    assert root.tag == "testsuites" and root.get("failures") == "3"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["a.py", "pkg/b.py"]
    case = suites[1].findall("testcase")[1]
    assert case.get("line") == "8" and case.find("failure").get("type") == "SPMD101"
    (project / "a.py").write_text("import torch\n")
    (project / "pkg" / "b.py").write_text("import torch\n")
    clean = ET.fromstring(run(["check", "--output-format", "junit", "."], project).stdout)
    assert clean.get("failures") == "0" and clean.find("testsuite/testcase/failure") is None


def test_json_lines_and_concise(project):
    proc = run(["check", "--output-format", "json-lines", "."], project)
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(r["path"].replace("\\", "/"), r["line"]) for r in rows] == [("a.py", 7), ("pkg/b.py", 7), ("pkg/b.py", 8)]
    proc = run(["check", "--output-format", "concise", "."], project)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("a.py:7:5: SPMD101 [partial-through-nonlinear] ")
    assert len(lines) == 5 and lines[-2].startswith("Found 3 errors")
    assert lines[-1] == "No fixes available (3 hidden fixes can be enabled with the `--unsafe-fixes` option)."
    assert run(["check", "--output-format", "text", "a.py", "--color", "never"], project).stdout.startswith(
        "a.py:7:5: SPMD101"
    )


def test_order_is_deterministic_whatever_the_jobs(project):
    for i in range(10):
        (project / f"m{i}.py").write_text(BUGGY if i % 2 else SECOND)
    outputs = {run(["check", "--output-format", "concise", "-j", str(j), "."], project).stdout for j in (1, 2, 4)}
    assert len(outputs) == 1
    paths = [line.split(":")[0] for line in outputs.pop().splitlines()[:-2]]  # then the summary and the fix hint
    assert paths == sorted(paths)


def test_statistics(project):
    proc = run(["check", "--statistics", "."], project)
    assert proc.returncode == 1
    # SPMD101's fix inserts a collective (unsafe): fixable only with --unsafe-fixes, as ruff counts
    assert proc.stdout.split() == ["3", "SPMD101", "partial-through-nonlinear"]
    unsafe = run(["check", "--statistics", "--unsafe-fixes", "."], project)
    assert unsafe.stdout.split() == ["3", "SPMD101", "partial-through-nonlinear", "[3", "fixable]"]
    stats = json.loads(run(["check", "--statistics", "--output-format", "json", "."], project).stdout)
    assert stats == [{"code": "SPMD101", "name": "partial-through-nonlinear", "count": 3, "fixable": 0}]
    table = run(["check", "--statistics", "--color", "always", "."], project).stdout
    assert "\x1b[" in table and "partial-through-nonlinear" in table


@pytest.mark.parametrize(
    "env,flag,colored",
    [
        ({"NO_COLOR": None, "FORCE_COLOR": None}, [], False),  # not a TTY
        ({"NO_COLOR": None, "FORCE_COLOR": "1"}, [], True),
        ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, [], False),
        ({"NO_COLOR": "1", "FORCE_COLOR": None}, ["--color", "always"], True),
    ],
)
def test_colour_only_when_asked_or_forced(project, env, flag, colored):
    for fmt in ("full", "concise"):
        proc = run(["check", "--output-format", fmt, *flag, "a.py"], project, env=env)
        assert ("\x1b[" in proc.stdout) is colored, (fmt, proc.stdout)
