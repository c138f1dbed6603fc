"""The CI and pre-commit recipes in docs/ci.md are valid YAML, wired together, and use real spmdcheck options."""

from __future__ import annotations

import re
import shlex

import pytest
from conftest import ROOT

yaml = pytest.importorskip("yaml")

DOC = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
BLOCKS = [yaml.safe_load(body) for body in re.findall(r"^```yaml\n(.*?)^```$", DOC, re.DOTALL | re.MULTILINE)]


def _block(predicate):
    found = [b for b in BLOCKS if isinstance(b, dict) and predicate(b)]
    assert len(found) == 1
    return found[0]


def _check_command(line: str) -> tuple[list[str], str | None]:
    """`spmdcheck check ... > out` -> (argv after `spmdcheck`, the redirect target)."""
    words = shlex.split(line, comments=True)
    target = words[words.index(">") + 1] if ">" in words else None
    argv = words[1 : words.index(">")] if ">" in words else words[1:]
    return argv, target


def _assert_parses(argv: list[str]) -> None:
    from spmdcheck.cli.parser import build_parser

    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse rejects it
        raise AssertionError(f"`spmdcheck {' '.join(argv)}` is not a valid command line") from exc


def test_pre_commit_recipe_names_the_shipped_hook():
    config = _block(lambda b: "repos" in b)
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    (hook,) = hooks
    assert config["repos"][0]["hooks"][0]["id"] == hook["id"] == "spmdcheck"
    assert hook["language"] == "python" and hook["types"] == ["python"]
    assert hook["entry"] == "spmdcheck check --force-exclude"
    assert "spmdcheck check --force-exclude" in DOC


def test_github_workflow_uploads_the_sarif_it_writes():
    workflow = _block(lambda b: "jobs" in b)
    assert workflow["permissions"]["security-events"] == "write"
    steps = workflow["jobs"]["spmdcheck"]["steps"]
    runs = [s["run"] for s in steps if "run" in s and s["run"].startswith("spmdcheck")]
    sarif_argv, sarif_file = _check_command(runs[0])
    upload = next(s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif"))
    assert upload["with"]["sarif_file"] == sarif_file
    assert "--exit-zero" in sarif_argv  # the upload must run even when there are findings
    gate_argv, _ = _check_command(runs[-1])
    assert "--exit-zero" not in gate_argv
    for argv in (sarif_argv, gate_argv):
        _assert_parses(argv)


def test_gitlab_job_reports_what_it_writes():
    job = _block(lambda b: "spmdcheck" in b)["spmdcheck"]
    line = next(s for s in job["script"] if s.startswith("spmdcheck"))
    argv, target = _check_command(line)
    assert job["artifacts"]["reports"]["codequality"] == target
    assert job["artifacts"]["when"] == "always"
    _assert_parses(argv)


def test_install_commands_work_before_spmdcheck_is_published():
    """Until spmdcheck is on PyPI, `pip install spmdcheck` and a made-up `your-org` URL do not install it: every
    install command of the recipes names a checkout or a git URL whose placeholder the text explains."""
    commands = []
    for block in re.findall(r"^```(?:bash|yaml|sh)\n(.*?)^```$", DOC, re.DOTALL | re.MULTILINE):
        commands += [m.group(1).strip() for m in re.finditer(r"pip install ([^\n#]+)", block)]
    assert commands
    for target in commands:
        words = shlex.split(target)
        assert words != ["spmdcheck"], "`pip install spmdcheck` does not work until it is published"
        assert any(w.startswith(("spmdcheck @ git+", "path/", ".", "/")) for w in words), target
    assert "your-org" not in DOC
    assert "<your-host>/<path>" in DOC and "replace `<your-host>/<path>`" in DOC  # the placeholder is explained
    repos = [hook["repo"] for b in BLOCKS if isinstance(b, dict) for hook in b.get("repos", [])]
    assert repos and all("your-org" not in repo for repo in repos)


def test_the_readme_says_how_long_the_tests_take_and_which_skips_are_expected():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    after = readme.split("python -m pytest -q\n```", 1)[1].split("\n\n", 2)[1]  # the paragraph after the command
    assert "minutes" in after and re.search(r"\b\d+\b", after.split("minutes")[0][-40:]), after
    assert re.search(r"About \d+ skips are expected", after), after
