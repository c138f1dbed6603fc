"""The surface a new user touches (issue 23): no tracebacks, the usual flags, messages as ruff or mypy give
them, CI paths from the repository's root, SARIF with rule pages and call chains, progress on a terminal."""

from __future__ import annotations

import json
import os
import pathlib
import re
import select
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest
from cli_helpers import BUGGY, run

from spmdcheck.cli import progress as progress_module
from spmdcheck.cli.progress import Progress

ROOT = pathlib.Path(__file__).resolve().parent.parent
CROSS_FILE = ROOT / "fixtures" / "programs" / "gpt_bug_missing_copy"  # its finding is reached through 3 calls
ENV = {"PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
# `path:line:col: CODE [name] severity: message`: ruff's shape, with mypy's severity word before the message
LINE = re.compile(r"^[^:]+:\d+:\d+: SPMD\d{3} \[[a-z0-9-]+\] (error|warning|note): \S")


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"]\n')
    (tmp_path / "a.py").write_text(BUGGY)
    return tmp_path


@pytest.fixture
def many(tmp_path):
    """Enough findings that every report is larger than a pipe's buffer and Python's."""
    (tmp_path / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"]\n')
    for i in range(60):
        (tmp_path / f"m{i}.py").write_text(BUGGY)
    return tmp_path


def _into_closed_pipe(args: list[str], cwd: pathlib.Path) -> subprocess.CompletedProcess:
    """Run with stdout a pipe whose reader has gone (`| head` after its lines)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "spmdcheck", *args],
            cwd=cwd,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **ENV},
            timeout=300,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "args",
    [
        ["--output-format", "sarif"],
        ["--output-format", "json"],
        ["--diff"],
        ["--show-types", "--output-format", "json"],
        [],
    ],
    ids=["sarif", "json", "diff", "show-types-json", "full"],
)
def test_a_reader_that_closes_early_ends_the_run_quietly(many, args):
    proc = _into_closed_pipe(["check", "--no-cache", *args, "."], many)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr  # as ruff: the reader had what it wanted


def test_show_types_with_two_modules_of_one_name(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.py").write_text("import torch\nx = torch.ones(3)\n")
    (tmp_path / "sub" / "a.py").write_text("import torch\ny = torch.ones(3, requires_grad=True)\n")
    proc = run(["check", "--show-types", "."], tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "# x: " in proc.stdout and "# y: " in proc.stdout
    typed = json.loads(run(["check", "--show-types", "--output-format", "json", "."], tmp_path).stdout)
    assert typed


def test_an_internal_failure_is_spmd000_with_status_2(monkeypatch, capsys):
    from spmdcheck import cli
    from spmdcheck.cli import check as check_module

    def broken(args):
        raise KeyError("sub/a.py")

    monkeypatch.setattr(check_module, "check", broken)
    assert cli.main(["check", "."]) == 2
    err = capsys.readouterr().err
    assert "SPMD000 internal-error: KeyError" in err and "Traceback" not in err


def test_version_and_a_bad_option_of_check(tmp_path):
    from spmdcheck import __version__

    proc = run(["--version"], tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == f"spmdcheck {__version__}"
    bad = run(["check", "--bogus", "."], tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.startswith("usage: spmdcheck check ") and "unrecognized arguments: --bogus" in bad.stderr


def test_quiet_prints_the_findings_only(project):
    proc = run(["check", "-q", "a.py"], project)
    assert proc.returncode == 1 and "SPMD101" in proc.stdout
    assert "Found" not in proc.stdout and "fixable" not in proc.stdout and "No fixes" not in proc.stdout
    clean = run(["check", "--quiet", "--select", "SPMD9", "a.py"], project)
    assert clean.returncode == 0 and clean.stdout == ""
    # the notes on stderr too (what --fix held back, what --diff would apply); errors are still said
    assert "--unsafe-fixes" in run(["check", "--fix", "a.py"], project).stderr
    assert run(["check", "-q", "--fix", "a.py"], project).stderr == ""
    assert run(["check", "-q", "--diff", "a.py"], project).stderr == ""
    assert "no such file" in run(["check", "-q", "nope.py"], project).stderr


def test_output_file(project):
    proc = run(["check", "-o", "out/report.json", "--output-format", "json", "a.py"], project)
    assert proc.returncode == 1 and proc.stdout == ""
    report = json.loads((project / "out" / "report.json").read_text())
    assert [d["code"] for d in report["diagnostics"]] == ["SPMD101"]
    run(["check", "--output-file", "types.txt", "--show-types", "a.py"], project)
    assert "# y: " in (project / "types.txt").read_text()
    (project / "taken").write_text("a file, not a folder")
    bad = run(["check", "-o", "taken/report.txt", "a.py"], project)
    assert bad.returncode == 2 and "--output-file taken/report.txt: cannot write it" in bad.stderr
    assert "Traceback" not in bad.stderr and "SPMD000" not in bad.stderr


def test_exclude_and_extend_exclude_on_the_command_line(project):
    (project / "gen").mkdir()
    (project / "gen" / "b.py").write_text(BUGGY)
    (project / "c.py").write_text(BUGGY)

    def paths(*args):
        proc = run(["check", "--output-format", "json", *args, "."], project)
        return sorted(d["path"] for d in json.loads(proc.stdout)["diagnostics"])

    assert paths() == ["a.py", "c.py", "gen/b.py"]
    assert paths("--exclude", "gen") == ["a.py", "c.py"]
    assert paths("--extend-exclude", "gen,c.py") == ["a.py"]
    (project / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"]\nexclude = ["c.py"]\n')
    assert paths() == ["a.py", "gen/b.py"]
    assert paths("--exclude", "gen") == ["a.py", "c.py"]  # replaces the config's
    assert paths("--extend-exclude", "gen") == ["a.py"]  # adds to it


def test_text_lines_carry_the_severity(tmp_path):
    (tmp_path / "w.py").write_text((ROOT / "fixtures" / "dp_tp" / "block_bug_reduce_wrong_axis.py").read_text())
    for fmt in ("full", "concise"):
        out = run(["check", "--isolated", "--output-format", fmt, "w.py"], tmp_path).stdout
        lines = [line for line in out.splitlines() if line.startswith("w.py:")]
        assert any(" SPMD201 [pending-sum-misuse] warning: " in line for line in lines), out
        assert lines and all(LINE.match(line) for line in lines), out


def test_fix_hints_and_statistics_follow_ruff(project):
    # SPMD101's fix inserts a collective: it changes what the program computes, so it is unsafe
    stats = json.loads(run(["check", "--statistics", "--output-format", "json", "a.py"], project).stdout)
    assert stats == [{"code": "SPMD101", "name": "partial-through-nonlinear", "count": 1, "fixable": 0}]
    with_unsafe = run(["check", "--statistics", "--unsafe-fixes", "--output-format", "json", "a.py"], project)
    assert json.loads(with_unsafe.stdout)[0]["fixable"] == 1
    assert "fixable" not in run(["check", "--statistics", "a.py"], project).stdout
    fixed = run(["check", "--fix", "a.py"], project)
    assert (project / "a.py").read_text() == BUGGY
    assert "No fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option)." in fixed.stdout
    shown = run(["check", "--unsafe-fixes", "a.py"], project)
    assert (project / "a.py").read_text() == BUGGY and shown.returncode == 1
    assert "[*] 1 fixable with the `--fix --unsafe-fixes` option." in shown.stdout


def test_a_safe_fix_stays_safe_in_a_cached_run(project):
    # removing an unused suppression is safe: fixable without --unsafe-fixes, also when the cache answers
    (project / "a.py").write_text(BUGGY.replace("z = F.gelu(y)", "z = F.gelu(y)  # noqa: SPMD104"))
    for attempt in ("cold", "cached"):
        stats = json.loads(run(["check", "--statistics", "--output-format", "json", "a.py"], project).stdout)
        assert {r["code"]: r["fixable"] for r in stats} == {"SPMD006": 1, "SPMD101": 0}, attempt
        hint = run(["check", "a.py"], project).stdout.splitlines()[-1]
        assert hint == (
            "[*] 1 fixable with the `--fix` option (1 hidden fix can be enabled with the `--unsafe-fixes` option)."
        ), attempt


def test_a_folder_without_python_files_is_an_error(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.txt").write_text("no code here\n")
    proc = run(["check", "docs"], tmp_path)
    assert proc.returncode == 2 and "no Python files found under docs" in proc.stderr


def test_a_config_error_refuses_to_run_and_suggests_the_key(project):
    (project / "pyproject.toml").write_text('[tool.spmdcheck]\nmeshes = ["tp"]\n')
    proc = run(["check", "--output-format", "json", "a.py"], project)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "unknown key 'meshes'" in proc.stderr and "did you mean `mesh`?" in proc.stderr


def test_a_syntax_error_is_pythons_message_at_pythons_position(tmp_path):
    (tmp_path / "d.py").write_text("import torch\nx = (1,\ny = 2\n")
    (tmp_path / "c.py").write_text("import torch\ndef f(:\n    pass\n")
    proc = run(["check", "--output-format", "json", "."], tmp_path)
    found = {d["path"]: d for d in json.loads(proc.stdout)["diagnostics"]}
    for name in ("c.py", "d.py"):
        try:
            compile((tmp_path / name).read_text(), name, "exec")
        except SyntaxError as exc:
            expected = exc
        d = found[name]
        assert (d["line"], d["column"]) == (expected.lineno, expected.offset)
        assert expected.msg in d["message"] and "expected one of" not in d["message"]


def test_a_binary_file_is_one_line(tmp_path):
    (tmp_path / "blob.py").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(range(256)) * 4)
    (tmp_path / "nul.py").write_bytes(b"import torch\nx = 1\x00\x00\n")
    proc = run(["check", "--no-cache", "."], tmp_path)
    assert proc.returncode == 1
    assert "\\x00" not in proc.stdout and "\x00" not in proc.stdout and "|" not in proc.stdout, proc.stdout
    assert "nul.py:2:6: SPMD001 [syntax-error] error: syntax error: the file contains a null byte" in proc.stdout


def test_junit_test_names_are_unique(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"]\n')
    (tmp_path / "a.py").write_text(BUGGY.replace("z = F.gelu(y)", "z = F.gelu(y) + F.gelu(y)"))
    (tmp_path / "b.py").write_text(BUGGY.replace("z = F.gelu(y)", "z = F.gelu(y)\nz = F.gelu(y)"))
    root = ET.fromstring(run(["check", "--output-format", "junit", "."], tmp_path).stdout)
    for suite in root.findall("testsuite"):
        names = [case.get("name") for case in suite.findall("testcase")]
        assert len(names) == 2 and len(set(names)) == len(names), names


def test_ci_paths_are_relative_to_the_repository(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"]\n')
    (tmp_path / "src" / "a.py").write_text(BUGGY)
    src = tmp_path / "src"
    github = run(["check", "--output-format", "github", "a.py"], src, env={"GITHUB_WORKSPACE": str(tmp_path)})
    assert "file=src/a.py," in github.stdout
    gitlab = run(["check", "--output-format", "gitlab", "a.py"], src, env={"CI_PROJECT_DIR": str(tmp_path)})
    assert json.loads(gitlab.stdout)[0]["location"]["path"] == "src/a.py"
    sarif = run(["check", "--output-format", "sarif", "a.py"], src, env={"GITHUB_WORKSPACE": str(tmp_path)})
    (result,) = json.loads(sarif.stdout)["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "src/a.py"
    local = run(["check", "--output-format", "github", "a.py"], src, env={"GITHUB_WORKSPACE": None})
    assert "file=a.py," in local.stdout


def test_sarif_rules_link_their_pages_and_results_carry_the_call_chain(tmp_path):
    import shutil

    import jsonschema

    program = tmp_path / "program"
    shutil.copytree(CROSS_FILE, program)
    schema = json.loads((ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())
    for attempt in ("cold", "cached"):  # the chain survives the result cache
        proc = run(["check", "--output-format", "sarif", "."], program, env={"GITHUB_WORKSPACE": None})
        log = json.loads(proc.stdout)
        jsonschema.Draft4Validator(schema).validate(log)
        rules = log["runs"][0]["tool"]["driver"]["rules"]
        page = pathlib.Path(rules[0]["helpUri"].removeprefix("file://"))
        assert page.name == f"{rules[0]['id']}.md" and page.is_file()
        (result,) = log["runs"][0]["results"]
        related = [
            (r["physicalLocation"]["artifactLocation"]["uri"], r["physicalLocation"]["region"]["startLine"])
            for r in result["relatedLocations"]
        ]
        assert related == [("model/transformer.py", 29), ("model/transformer.py", 67), ("model/gpt.py", 29)], attempt
        flow = result["codeFlows"][0]["threadFlows"][0]["locations"]
        assert [step["location"]["physicalLocation"]["artifactLocation"]["uri"] for step in flow] == [
            "model/gpt.py",
            "model/transformer.py",
            "model/transformer.py",
            "layers.py",
        ]
    published = run(
        ["check", "--output-format", "sarif", "."], program, env={"SPMDCHECK_DOCS_URL": "https://example.org/rules/"}
    )
    rule = json.loads(published.stdout)["runs"][0]["tool"]["driver"]["rules"][3]
    assert rule["helpUri"] == f"https://example.org/rules/{rule['id']}.md"


def test_json_findings_carry_the_call_chain(tmp_path):
    import shutil

    program = tmp_path / "program"
    shutil.copytree(CROSS_FILE, program)
    steps = [("model/transformer.py", 29, 20), ("model/transformer.py", 67, 27), ("model/gpt.py", 29, 22)]
    for attempt in ("cold", "cached"):  # the chain (columns too) survives the result cache
        (finding,) = json.loads(run(["check", "--output-format", "json", "."], program).stdout)["diagnostics"]
        assert [(s["path"], s["line"], s["column"]) for s in finding["chain"]] == steps, attempt
        assert [s["message"] for s in finding["chain"]] == [
            f"called from here (step {n} of the call chain)" for n in (1, 2, 3)
        ]
        called_from = ", ".join(f"called from {path}:{line}" for path, line, _ in steps)
        assert finding["message"].endswith(f"({called_from})")  # the message's order
        (line,) = run(["check", "--output-format", "json-lines", "."], program).stdout.splitlines()
        assert json.loads(line) == finding
    (tmp_path / "alone.py").write_text(BUGGY)  # a finding not reached through calls: an empty chain
    (alone,) = json.loads(run(["check", "--output-format", "json", "--mesh", "tp", "alone.py"], tmp_path).stdout)[
        "diagnostics"
    ]
    assert alone["chain"] == []


def test_progress_line_draws_counts_and_erases_itself(monkeypatch):
    monkeypatch.setattr(progress_module, "SHOW_AFTER_S", 0.0)
    read_end, write_end = os.pipe()
    progress = Progress(write_end, 10)
    progress.start()
    progress("planned", 12)
    progress("parsed", 12)
    progress("analysed", 5)
    time.sleep(0.6)
    progress.stop()
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        drawn = fh.read().decode()
    assert "12 files planned · 12 parsed · 5/12 analysed" in drawn
    assert drawn.endswith("\r\x1b[2K")  # erased before the report
    assert drawn.count("\r\x1b[2K") <= 1 + 0.6 / progress_module.REDRAW_EVERY_S + 2  # a few redraws a second


def _stderr_on_a_terminal(args: list[str], cwd: pathlib.Path) -> tuple[str, str]:
    import pty  # POSIX only

    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "spmdcheck", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=secondary,
        env={**os.environ, **ENV, "TERM": "xterm"},
    )
    os.close(secondary)
    chunks = []
    while True:
        ready, _, _ = select.select([primary], [], [], 0.1)
        if ready:
            try:
                data = os.read(primary, 4096)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    out = proc.stdout.read().decode()
    proc.wait(timeout=300)
    os.close(primary)
    return out, b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal is POSIX")
def test_a_long_run_shows_progress_on_a_terminal_only(tmp_path):
    # a cold run over the fixture programs takes several seconds
    args = ["check", "--no-cache", "-j1", "--exit-zero", str(ROOT / "fixtures" / "programs")]
    out, err = _stderr_on_a_terminal(args, tmp_path)
    assert "files planned" in err and "files planned" not in out
    quiet_out, quiet_err = _stderr_on_a_terminal([*args[:1], "-q", *args[1:]], tmp_path)
    assert "files planned" not in quiet_err
    piped = run(args, tmp_path)
    assert "files planned" not in piped.stderr
