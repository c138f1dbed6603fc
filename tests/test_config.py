"""Configuration as ruff does it: the closest config per file, extend, include/exclude, per-file-ignores,
--config overrides, --isolated, --show-settings; broken settings exit 2 with a message, never a traceback."""

from __future__ import annotations

import json

import pytest
from cli_helpers import BUGGY, run

TP = '[tool.spmdcheck]\nmesh = ["tp"]\n'
# a finding only when the mesh has `tp` (the file has no header and no annotation naming it otherwise)
NEEDS_MESH = BUGGY


def codes(proc):
    assert "Traceback" not in proc.stderr, proc.stderr
    return sorted((d["path"].replace("\\", "/"), d["code"]) for d in json.loads(proc.stdout)["diagnostics"])


def check_json(args, cwd, **kw):
    return run(["check", "--output-format", "json", *args], cwd, **kw)


def test_each_file_uses_its_closest_config(tmp_path):
    (tmp_path / "pyproject.toml").write_text(TP)
    (tmp_path / "a.py").write_text(BUGGY)
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "spmdcheck.toml").write_text('ignore = ["SPMD101"]\n')
    (sub / "b.py").write_text(BUGGY)
    proc = check_json(["."], tmp_path)
    # sub/ has its own config (no implicit merge): SPMD101 ignored there, and still found in a.py
    assert codes(proc) == [("a.py", "SPMD101")]
    assert proc.returncode == 1


def test_extend_merges_explicitly_and_extend_keys_accumulate(tmp_path):
    (tmp_path / "pyproject.toml").write_text(TP + 'extend-exclude = ["gen"]\n')
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / ".spmdcheck.toml").write_text('extend = "../pyproject.toml"\nextend-exclude = ["old_*.py"]\n')
    for d in (sub, sub / "gen"):
        d.mkdir(exist_ok=True)
        (d / "b.py").write_text(BUGGY)
        (d / "old_c.py").write_text(BUGGY)
    proc = check_json(["sub"], tmp_path)
    assert codes(proc) == [("sub/b.py", "SPMD101")]  # mesh came from the extended file; both excludes apply
    out = run(["check", "--show-settings", "sub/b.py"], tmp_path).stdout
    assert 'mesh = ["tp"]' in out and ".spmdcheck.toml" in out


def test_extend_cycle_is_an_error(tmp_path):
    (tmp_path / "spmdcheck.toml").write_text('extend = "other.toml"\n')
    (tmp_path / "other.toml").write_text('extend = "spmdcheck.toml"\n')
    (tmp_path / "a.py").write_text("import torch\n")
    proc = run(["check", "a.py"], tmp_path)
    assert proc.returncode == 2 and "cycle" in proc.stderr and "Traceback" not in proc.stderr


def test_include_exclude_and_per_file_ignores(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        TP
        + 'include = ["src/*"]\nexclude = ["src/legacy"]\n'
        + '[tool.spmdcheck.per-file-ignores]\n"*_test.py" = ["partial-through-nonlinear"]\n'
    )
    src = tmp_path / "src"
    (src / "legacy").mkdir(parents=True)
    (src / "a.py").write_text(BUGGY)
    (src / "a_test.py").write_text(BUGGY)
    (src / "legacy" / "c.py").write_text(BUGGY)
    (tmp_path / "outside.py").write_text(BUGGY)
    proc = check_json(["."], tmp_path)
    assert codes(proc) == [("src/a.py", "SPMD101")]
    assert json.loads(proc.stdout)["summary"]["files"] == 2
    # a file named on the command line is checked even if excluded, unless --force-exclude
    assert codes(check_json(["src/legacy/c.py"], tmp_path)) == [("src/legacy/c.py", "SPMD101")]
    assert codes(check_json(["--force-exclude", "src/legacy/c.py"], tmp_path)) == []


def test_select_extend_select_and_snake_case_keys(tmp_path):
    (tmp_path / "pyproject.toml").write_text(TP + 'select = ["SPMD3"]\nextend_select = ["SPMD1"]\n')
    (tmp_path / "a.py").write_text(BUGGY)
    assert codes(check_json(["a.py"], tmp_path)) == [("a.py", "SPMD101")]
    (tmp_path / "pyproject.toml").write_text(TP + 'select = ["SPMD3"]\n')
    assert codes(check_json(["a.py"], tmp_path)) == []
    assert codes(check_json(["--extend-select", "SPMD101", "a.py"], tmp_path)) == [("a.py", "SPMD101")]
    (tmp_path / "pyproject.toml").write_text(TP + 'stub_path = ["t"]\nstub-path = ["t"]\n')
    (tmp_path / "t").mkdir()
    proc = run(["check", "a.py"], tmp_path)
    assert proc.returncode == 2 and "given twice" in proc.stderr


@pytest.mark.parametrize(
    "table,key",
    [
        ('select = ["NOPE"]', "select"),
        ('ignore = ["SPMD999"]', "ignore"),
        ('extend-select = ["bogus-name"]', "extend-select"),
        ('[tool.spmdcheck.per-file-ignores]\n"x.py" = ["E501"]', "per-file-ignores"),
    ],
)
def test_unknown_selector_in_config_exits_2_naming_file_and_key(tmp_path, table, key):
    (tmp_path / "pyproject.toml").write_text(TP + table + "\n")
    (tmp_path / "a.py").write_text(BUGGY)
    proc = check_json(["a.py"], tmp_path)
    assert proc.returncode == 2
    assert str(tmp_path / "pyproject.toml") in proc.stderr and f"`{key}" in proc.stderr
    assert proc.stdout == ""  # nothing is checked with other settings than the ones written (as ruff)


def test_tool_not_a_table_is_spmd005_not_a_traceback(tmp_path):
    (tmp_path / "pyproject.toml").write_text("tool = 3\n")
    (tmp_path / "a.py").write_text(BUGGY)
    proc = run(["check", "a.py"], tmp_path)
    assert proc.returncode == 2 and "SPMD005" in proc.stderr and "`tool` must be a table" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_stub_path_exits_2_with_a_message(tmp_path):
    (tmp_path / "pyproject.toml").write_text(TP + 'stub_path = ["typings"]\n')
    (tmp_path / "a.py").write_text("import torch\n")
    proc = run(["check", "a.py"], tmp_path)
    assert proc.returncode == 2 and "'typings' is not a directory" in proc.stderr
    proc = run(["check", "--isolated", "--stub-path", "nowhere", "a.py"], tmp_path)
    assert proc.returncode == 2 and "nowhere" in proc.stderr


@pytest.mark.parametrize(
    "header,needle",
    [
        ('# spmdcheck: mesh = ["tp", "tp"]', "'tp' twice"),
        ('# spmdcheck: mesh = [""]', "empty"),
        ("# spmdcheck: strict = maybe", "'maybe'"),
        ("# spmdcheck: mesh = tp", "list of axis names"),
    ],
)
def test_bad_header_comments_are_reported(tmp_path, header, needle):
    (tmp_path / "a.py").write_text(header + "\n" + BUGGY)
    proc = check_json(["a.py"], tmp_path)
    (d,) = [d for d in json.loads(proc.stdout)["diagnostics"] if d["code"] == "SPMD005"]
    assert d["line"] == 1 and needle in d["message"]
    assert proc.returncode == 2


def test_config_overrides_and_config_path_and_isolated(tmp_path):
    (tmp_path / "pyproject.toml").write_text(TP)
    (tmp_path / "a.py").write_text(BUGGY)
    assert codes(check_json(["--config", 'ignore = ["SPMD101"]', "a.py"], tmp_path)) == []
    assert codes(check_json(["--config", "mesh = []", "a.py"], tmp_path)) == [("a.py", "SPMD101")]
    # --isolated: no config file, so no mesh; the override still applies
    assert codes(check_json(["--isolated", "a.py"], tmp_path)) == [("a.py", "SPMD101")]  # P on tp is explicit
    (tmp_path / "other.toml").write_text('select = ["SPMD3"]\n')
    assert codes(check_json(["--config", "other.toml", "a.py"], tmp_path)) == []
    bad = check_json(["--config", "select = [", "a.py"], tmp_path)
    assert bad.returncode == 2 and "TOML" in bad.stderr and "Traceback" not in bad.stderr
    bad = check_json(["--config", "nonsense = 1", "a.py"], tmp_path)
    assert bad.returncode == 2 and "unknown key 'nonsense'" in bad.stderr


def test_show_settings(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        TP + 'ignore = ["SPMD2"]\n[tool.spmdcheck.per-file-ignores]\n"tests/*" = ["SPMD101"]\n'
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.py").write_text("")
    proc = run(["check", "--show-settings", "--config", "strict = true", "tests/t.py"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    settings = dict(line.split(" = ", 1) for line in proc.stdout.splitlines())
    assert json.loads(settings["config-file"]) == str(tmp_path / "pyproject.toml")
    assert json.loads(settings["mesh"]) == ["tp"] and json.loads(settings["strict"]) is True
    assert json.loads(settings["ignore"]) == ["SPMD2", "SPMD101"]
    enabled = json.loads(settings["enabled-codes"])
    assert "SPMD101" not in enabled and "SPMD201" not in enabled and "SPMD102" in enabled
