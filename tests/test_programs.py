"""Whole programs are the spec of whole-program analysis: every folder of fixtures/programs/ is a package
checked as ONE program, and its diagnostics must be exactly the ones written on the lines of its modules.

The comparison is on every finding (line, column, code, severity and message, in the format of
tests/expectations.py) of every module, through the library (`spmdcheck.api.check_sources`) and through the
real command line. The conventions are in fixtures/README.md ("Programs: whole packages").
"""
from __future__ import annotations

import ast
import difflib
import json
import pathlib
import re
import subprocess
import sys
from collections import defaultdict

import pytest
from cli_helpers import assert_ran
from conftest import FIXTURES, ROOT, expect_pending, expected_diagnostics
from expectations import PENDING, Expected, difference, from_diagnostics, parse, pending, without_expectations

from spmdcheck.api import Settings, check_sources
from spmdcheck.diagnostics.codes import CODES

PROGRAMS_ROOT = FIXTURES / "programs"
PROGRAMS = sorted(p for p in PROGRAMS_ROOT.iterdir() if p.is_dir() and (p / "__init__.py").is_file())


def program_pending(program: pathlib.Path) -> str | None:
    """Why a package's expectations are pending (a module's `# spmdcheck-pending:` line), else None."""
    return next(filter(None, (pending(m.read_text(encoding="utf-8")) for m in sorted(program.rglob("*.py")))), None)


# packages whose findings the checker can give today: the command-line runs compare all of these at once
SETTLED = [p for p in PROGRAMS if program_pending(p) is None]
HEADER = re.compile(r"^# spmdcheck: mesh = \[.*\]$")
_BUG = re.compile(r"^(?P<name>.+?)_bug_(?P<what>.+)$")

Expectation = tuple[str, int, str, str]  # (path relative to the program folder, line, code, severity)


def modules(program: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in program.rglob("*.py") if "__pycache__" not in p.parts)


def expected_program_diagnostics(program: pathlib.Path) -> set[Expectation]:
    """What the modules claim, read even when incomplete: (path in the program, line, code, severity)."""
    out: set[Expectation] = set()
    for path in modules(program):
        rel = path.relative_to(program).as_posix()
        out |= {(rel, line, code, sev) for line, code, sev in expected_diagnostics(path.read_text(encoding="utf-8"))}
    return out


def expected_program_findings(program: pathlib.Path) -> dict[str, list[Expected]]:
    """Every module's expected findings, by its path relative to the program folder."""
    return {path.relative_to(program).as_posix(): parse(path.read_text(encoding="utf-8")) for path in modules(program)}


def _differences(got: dict[str, list[Expected]], want: dict[str, list[Expected]]) -> list[str]:
    """One paragraph per module whose findings are not the expected ones."""
    return [f"{rel}:\n{problem}" for rel in sorted(set(got) | set(want))
            if (problem := difference(got.get(rel, []), want.get(rel, [])))]


def test_programs_are_present():
    names = {p.name for p in PROGRAMS}
    for family in ("gpt", "gpt_sp", "trainer", "moe", "divergence"):
        assert f"{family}_ok" in names, family
    assert sum("_bug_" in n for n in names) >= 8


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_program_layout(program):
    """A program is an entry module, every module states the same mesh, and a bug twin has its ok twin's files."""
    assert (program / "train.py").is_file(), "the entry module is train.py"
    assert re.search(r"^def step\(", (program / "train.py").read_text(encoding="utf-8"), re.MULTILINE)
    headers = set()
    for path in modules(program):
        text = path.read_text(encoding="utf-8")
        if path.name == "__init__.py":
            assert text == "", f"{path}: __init__.py files are empty"
            continue
        first = text.splitlines()[0]
        assert HEADER.match(first), f"{path}: line 1 must be the mesh header"
        headers.add(first)
    assert len(headers) == 1, f"the modules disagree on the mesh: {headers}"
    m = _BUG.match(program.name)
    if m:
        twin = PROGRAMS_ROOT / f"{m.group('name')}_ok"
        assert twin.is_dir(), f"no ok twin {twin.name}"
        assert [p.relative_to(twin) for p in modules(twin)] == [p.relative_to(program) for p in modules(program)]
        assert expected_program_diagnostics(program), "a bug program expects at least one diagnostic"
    else:
        assert program.name.endswith("_ok"), "programs are <name>_ok or <name>_bug_<what>"
        assert not expected_program_diagnostics(program), "an ok program expects no diagnostic"


def _code_lines(path: pathlib.Path) -> list[str]:
    """The module without its docstring, expectation comments and pending marker: what a bug twin may change."""
    text = path.read_text(encoding="utf-8")
    body = ast.parse(text).body
    lines = without_expectations(text)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        lines = lines[: body[0].lineno - 1] + lines[body[0].end_lineno:]
    # a marker is dropped, not blanked: an ok twin the checker already gets right carries none
    return [line for line in lines if not PENDING.match(line)]


MAX_CHANGED_LINES = 6  # one change: a line or two, and an import it needs or no longer needs


BUGS = [p for p in PROGRAMS if _BUG.match(p.name)]


@pytest.mark.parametrize("program", BUGS, ids=[p.name for p in BUGS])
def test_bug_program_is_its_twin_with_one_change(program):
    """A bug package stays a copy of its ok twin with one change (edit the ok package, edit its bugs)."""
    twin = PROGRAMS_ROOT / f"{_BUG.match(program.name).group('name')}_ok"
    changed = []
    for path in modules(program):
        diff = difflib.unified_diff(_code_lines(twin / path.relative_to(program)), _code_lines(path), lineterm="", n=0)
        changed += [f"{path.relative_to(program)}: {line}" for line in diff
                    if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed, f"{program.name} computes exactly what {twin.name} computes"
    assert len(changed) <= MAX_CHANGED_LINES, "more than one change from the ok twin:\n" + "\n".join(changed)


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_expected_severities_match_the_codes(program):
    for rel, line, code, severity in expected_program_diagnostics(program):
        if code not in CODES and program_pending(program) is not None:
            continue  # a code proposed with a pending package (docs/ground_truth.md) exists once the check does
        assert code in CODES, f"{rel}:{line}: unknown code {code}"
        assert CODES[code].severity == severity, f"{rel}:{line}: {code} is an {CODES[code].severity}"


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_program(program, registry, expected_findings, request):
    expect_pending(request, program_pending(program))
    sources = {str(path): path.read_text(encoding="utf-8") for path in modules(program)}
    result = check_sources(sources, Settings(), registry)
    assert set(result) == set(sources)
    expected_findings.verify_files({pathlib.Path(path): from_diagnostics(diags) for path, diags in result.items()})


def test_command_line_checks_each_program_folder(expected_findings):
    """`spmdcheck check fixtures/programs/<p> ...` (every program folder in one run): exactly the expected findings."""
    expected_findings.skip_if_updating()
    args = [str(p.relative_to(ROOT)) for p in SETTLED]
    proc = subprocess.run([sys.executable, "-m", "spmdcheck", "check", *args, "--output-format", "json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    assert report["summary"]["files"] == sum(len(modules(p)) for p in SETTLED), report["summary"]
    got: dict[pathlib.Path, dict[str, list[dict]]] = {p: defaultdict(list) for p in SETTLED}
    for d in report["diagnostics"]:
        path = (ROOT / d["path"]).resolve()
        program = next((p for p in SETTLED if p in path.parents), None)
        assert program is not None, f"a diagnostic outside the programs: {d['path']}"
        got[program][path.relative_to(program).as_posix()].append(d)
    failures = []
    for program in SETTLED:
        found = {rel: from_diagnostics(ds) for rel, ds in got[program].items()}
        failures += [f"{program.name}/{problem}" for problem in _differences(found, expected_program_findings(program))]
    assert not failures, "\n".join(failures)
    assert proc.returncode == (1 if any(expected_program_diagnostics(p) for p in SETTLED) else 0)


def _named_file(program: pathlib.Path) -> pathlib.Path:
    """The file of a program with the most expected findings (else its first module)."""
    want = expected_program_diagnostics(program)
    counts = {m: sum(1 for rel, *_ in want if rel == m.relative_to(program).as_posix()) for m in modules(program)}
    return max(modules(program), key=lambda m: (counts[m], -modules(program).index(m)))


def test_files_named_alone_are_checked_within_their_project():
    """pre-commit names only the changed files: each is analysed with the other files of its package
    (callers elsewhere give its functions their types) and gets exactly the findings of the folder run."""
    named = {program: _named_file(program) for program in SETTLED}
    args = [str(f.relative_to(ROOT)) for f in named.values()]

    def findings(*extra: str) -> dict[str, list[Expected]]:
        proc = subprocess.run([sys.executable, "-m", "spmdcheck", "check", *args, *extra, "--no-cache",
                               "--output-format", "json"], cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert proc.returncode in (0, 1), proc.stderr
        report = json.loads(proc.stdout)
        assert report["summary"]["files"] == len(args), report["summary"]
        by_file: dict[str, list[dict]] = defaultdict(list)
        for d in report["diagnostics"]:
            by_file[(ROOT / d["path"]).resolve().relative_to(PROGRAMS_ROOT).as_posix()].append(d)
        return {rel: from_diagnostics(ds) for rel, ds in by_file.items()}

    want = {f"{program.name}/{f.relative_to(program).as_posix()}": parse(f.read_text(encoding="utf-8"))
            for program, f in named.items()}
    got = findings()
    problems = _differences(got, {rel: found for rel, found in want.items() if found})
    assert not problems, "\n".join(problems)
    # alone, a file whose types come from callers in other files is blind: the context is what finds them
    alone = findings("--no-project-context")
    def codes(report: dict[str, list[Expected]]) -> set[tuple[int, str]]:
        return {(f.line, f.code) for f in report.get("gpt_bug_missing_copy/layers.py", [])}

    assert (84, "SPMD102") in codes(got) - codes(alone)


def test_a_focused_plan_runs_only_the_programs_that_import_the_focus():
    from spmdcheck.engine.plan import plan_programs

    paths = [str(m) for program in PROGRAMS for m in modules(program)]
    layers = str(PROGRAMS_ROOT / "gpt_bug_missing_copy" / "layers.py")
    _, programs = plan_programs(paths, Settings(mesh=("tp",)), focus=frozenset([layers]))
    planned = {pathlib.Path(f.path).relative_to(PROGRAMS_ROOT).parts[0] for program in programs for f in program}
    assert planned == {"gpt_bug_missing_copy"}
    _, everything = plan_programs(paths, Settings(mesh=("tp",)))
    assert len(everything) == len(PROGRAMS)


def test_a_focused_run_does_not_answer_a_later_full_run_from_the_cache(tmp_path):
    import shutil

    shutil.copytree(PROGRAMS_ROOT / "gpt_bug_missing_copy", tmp_path / "gpt")
    shutil.copytree(PROGRAMS_ROOT / "divergence_bug_early_return", tmp_path / "div")

    def run(*args: str) -> list[str]:
        proc = subprocess.run([sys.executable, "-m", "spmdcheck", "check", *args, "--output-format", "concise"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert proc.returncode in (0, 1), proc.stderr
        assert_ran(["check", *args, "--output-format", "concise"], proc)
        return [line.split(": ")[0] for line in proc.stdout.splitlines() if "SPMD" in line]

    # `div` does not import gpt/loss.py: the focused run leaves it unanalysed, and must not cache that
    assert run(str(tmp_path / "gpt" / "loss.py")) == []
    found = run(str(tmp_path))  # spelled as the context files were
    assert "gpt/layers.py:84:27" in found and any(f.startswith("div/") for f in found), found
    assert run("gpt/layers.py") == ["gpt/layers.py:84:27"]


# --------------------------------------------------------------------------- ground truth: the programs run
@pytest.fixture(scope="module")
def gt_harness():
    torch = pytest.importorskip("torch", reason="the ground-truth harness needs torch (test extra)")
    pytest.importorskip("spmd_types", reason="the ground-truth harness needs spmd-types==0.3.1 (test extra)")
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch.distributed with the gloo backend is not available")
    from ground_truth.harness import Harness

    h = Harness()
    yield h
    h.close()


def _run_order(program: pathlib.Path) -> tuple:
    """Correct programs first, programs that must hang (SPMD501) last: a hang kills the pool, and every
    program after it pays for fresh rank processes."""
    codes = {code for _, _, code, _ in expected_program_diagnostics(program)}
    return ("_bug_" in program.name, "SPMD501" in codes, program.name)


RUN_ORDER = sorted(PROGRAMS, key=_run_order)


@pytest.mark.ground_truth
@pytest.mark.parametrize("program", RUN_ORDER, ids=[p.name for p in RUN_ORDER])
def test_program_runs_as_its_expectations_say(gt_harness, program):
    """An ok program computes on 2 and 4 gloo ranks what it computes on one; a bug program does not (its
    values or gradients differ, or it crashes or hangs), while its ok twin, on the same inputs, does."""
    from ground_truth import gradsync
    from ground_truth.packages import discover_packages, judge_package

    if program.name.startswith(gradsync.PREFIX):  # training steps, not typed `step`s: a runner of their own
        pytest.skip("run by tests/test_ground_truth_gradsync.py (docs/ground_truth.md)")
    pkg = next(p for p in discover_packages() if p.path == program)
    verdict, twin_verdict = judge_package(gt_harness, pkg)
    assert verdict.runnable, verdict.not_runnable
    story = f"{program.name}: {verdict.summary()}"
    if pkg.is_bug:
        assert twin_verdict is not None, f"{program.name} has no ok twin"
        assert twin_verdict.matches, f"the ok twin does not match its reference: {twin_verdict.summary()}"
        assert verdict.wrong, f"the bug is invisible to execution: {story}"
    else:
        assert verdict.matches, story
        assert all(w.reference == "global" for w in verdict.worlds), story


def test_a_huge_package_around_a_named_file_is_not_listed_in_full(tmp_path, monkeypatch, capsys):
    """Past MAX_CONTEXT_FILES other files the project context is dropped; the walk stops there instead of
    listing the whole package first (site-packages/torch holds ~14,600 files)."""
    from spmdcheck import cli
    from spmdcheck.cli import project
    from spmdcheck.frontend import discovery

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for i in range(8):
        (pkg / f"m{i}.py").write_text("x = 1\n")
    walked: list[int] = []
    original = discovery.discover

    def counting(*args, **kwargs):
        found, missing = original(*args, **kwargs)
        walked.append(len(found))
        return found, missing

    monkeypatch.setattr(discovery, "discover", counting)
    monkeypatch.setattr(project, "MAX_CONTEXT_FILES", 3)
    monkeypatch.chdir(tmp_path)
    status = cli.main(["check", str(pkg / "m0.py"), "--no-cache", "--output-format", "concise"])
    assert status == 0
    assert "more than 3 other files" in capsys.readouterr().err
    assert max(walked) <= 3 + 1 + 1  # the limit, the named file, and the one that proved the limit passed


def test_a_folder_named_whole_is_not_walked_again_for_its_project_context(tmp_path, monkeypatch):
    """`check pkg/sub`: the context walk of the import root (`pkg`'s folder) skips `pkg/sub`, whose files are all
    checked already, and still finds its siblings (they give the checked functions their callers)."""
    from spmdcheck import cli
    from spmdcheck.frontend import discovery

    sub = tmp_path / "pkg" / "sub"
    sub.mkdir(parents=True)
    for folder in (tmp_path / "pkg", sub):
        (folder / "__init__.py").write_text("")
    for i in range(5):
        (sub / f"m{i}.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "sibling.py").write_text("y = 2\n")
    listed: list[list[str]] = []
    original = discovery.discover

    def recording(*args, **kwargs):
        found, missing = original(*args, **kwargs)
        listed.append(found)
        return found, missing

    monkeypatch.setattr(discovery, "discover", recording)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["check", "pkg/sub", "--no-cache", "--output-format", "concise"]) == 0
    checked, context = listed
    assert len(checked) == 6
    assert sorted(pathlib.Path(f).name for f in context) == ["__init__.py", "sibling.py"]
