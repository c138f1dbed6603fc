"""Item 8 of issue 9: `--fix` is a transaction per file, byte-exact where it must be, and idempotent."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from robust_helpers import ROOT, no_traceback, output, run

from spmdcheck.api import check_source
from spmdcheck.fixes.apply import apply_fixes

SRC = textwrap.dedent("""\
    # spmdcheck: mesh = ["tp"]
    from typing import Annotated

    import torch
    import torch.nn.functional as F
    from spmd_types import I, S


    def mlp(x: Annotated[torch.Tensor, {"tp": I}], w1: Annotated[torch.Tensor, {"tp": S(0)}]):
        return F.gelu(F.linear(x, w1))
""")
FIXED_CALL = "F.linear(spmd_types.convert(x, 'tp', src=I, dst=spmd_types.R), w1)"


def expected(newline: str = "\n", prefix: str = "") -> str:
    """SRC fixed: the conversion inserted and `import spmd_types` where isort puts it (before `import torch`)."""
    text = SRC.replace("F.linear(x, w1)", FIXED_CALL).replace("import torch\n", "import spmd_types\nimport torch\n", 1)
    return prefix + text.replace("\n", newline)


def fix(tmp_path, *paths):
    proc = run(["check", "--fix", "--unsafe-fixes", *paths], tmp_path)
    no_traceback(proc)
    return proc


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"], ids=["LF", "CRLF", "CR"])
def test_line_endings_are_kept(tmp_path, newline):
    (tmp_path / "m.py").write_bytes(SRC.replace("\n", newline).encode())
    proc = fix(tmp_path, "m.py")
    assert proc.returncode == 0, output(proc)
    assert (tmp_path / "m.py").read_bytes() == expected(newline).encode()


def test_bom_and_a_latin1_cookie_are_kept(tmp_path):
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbf" + SRC.encode())
    latin = "# -*- coding: latin-1 -*-\n" + SRC.replace("import torch\n", "import torch  # caf\xe9\n")
    (tmp_path / "latin.py").write_bytes(latin.encode("latin-1"))
    proc = fix(tmp_path, "bom.py", "latin.py")
    assert proc.returncode == 0, output(proc)
    assert (tmp_path / "bom.py").read_bytes() == b"\xef\xbb\xbf" + expected().encode()
    want = "# -*- coding: latin-1 -*-\n" + expected().replace("import torch\n", "import torch  # caf\xe9\n")
    assert (tmp_path / "latin.py").read_bytes() == want.encode("latin-1")


def test_a_form_feed_does_not_move_the_fix_and_a_comment_is_not_the_import(tmp_path):
    src = SRC.replace("import torch\n", "import torch\n\x0c\n# import spmd_types (not yet)\n")
    (tmp_path / "m.py").write_bytes(src.encode())
    proc = fix(tmp_path, "m.py")
    assert proc.returncode == 0, output(proc)
    got = (tmp_path / "m.py").read_bytes().decode()
    assert got == src.replace("F.linear(x, w1)", FIXED_CALL).replace(
        "import torch.nn.functional as F\n", "import spmd_types\nimport torch.nn.functional as F\n"
    )


def test_a_read_only_file_is_reported_and_the_others_are_fixed(tmp_path):
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text(SRC)
    os.chmod(tmp_path / "b.py", 0o444)
    proc = fix(tmp_path, ".")
    assert proc.returncode == 2, output(proc)
    assert "b.py: the file is read-only" in proc.stderr
    assert (tmp_path / "b.py").read_text() == SRC
    assert (tmp_path / "a.py").read_text() == expected()
    assert (tmp_path / "c.py").read_text() == expected()


def test_a_symlink_leaving_the_tree_is_not_followed(tmp_path):
    outside = tmp_path / "outside"
    tree = tmp_path / "tree"
    outside.mkdir()
    tree.mkdir()
    (outside / "lib.py").write_text(SRC)
    (tree / "link.py").symlink_to(outside / "lib.py")
    (tree / "own.py").write_text(SRC)
    proc = fix(tree, ".")
    assert proc.returncode == 2, output(proc)
    assert "outside the checked tree" in proc.stderr
    assert (outside / "lib.py").read_text() == SRC
    assert (tree / "link.py").is_symlink()
    assert (tree / "own.py").read_text() == expected()


def test_a_symlink_inside_the_tree_rewrites_its_target_and_stays_a_link(tmp_path):
    (tmp_path / "real.py").write_text(SRC)
    (tmp_path / "alias.py").symlink_to(tmp_path / "real.py")
    proc = fix(tmp_path, "alias.py")
    assert proc.returncode == 0, output(proc)
    assert (tmp_path / "alias.py").is_symlink()
    assert (tmp_path / "real.py").read_text() == expected()


def test_a_file_changed_since_the_check_is_left_alone(tmp_path, registry):
    path = tmp_path / "m.py"
    path.write_text(SRC)
    diags = check_source(SRC, str(path), registry=registry)
    assert diags and diags[0].frame
    changed = SRC.replace("def mlp(", "def other(")
    path.write_text(changed)
    outcome = apply_fixes(str(path), diags)
    assert outcome.applied == 0
    assert "changed on disk" in (outcome.error or "")
    assert path.read_text() == changed


def test_no_temporary_file_is_left_behind(tmp_path):
    (tmp_path / "m.py").write_text(SRC)
    fix(tmp_path, "m.py")
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".registry")) == ["m.py"]


def test_two_concurrent_fix_runs_do_not_corrupt_or_blame_the_parser(tmp_path):
    for i in range(12):
        (tmp_path / f"m{i}.py").write_text(SRC)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "spmdcheck", "check", "--fix", "--unsafe-fixes", "-j1", "."]
    procs = [
        subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert "Traceback" not in out + err
        assert "would not parse" not in err
        assert p.returncode in (0, 2), out + err
    for i in range(12):
        assert (tmp_path / f"m{i}.py").read_text() == expected()


def test_fixing_every_fixture_twice_changes_nothing_the_second_time(tmp_path):
    shutil.copytree(ROOT / "fixtures", tmp_path / "fixtures")
    first = run(["check", "--fix", "--unsafe-fixes", "--output-format", "json", "fixtures"], tmp_path, timeout=900)
    no_traceback(first)
    assert first.returncode in (0, 1), output(first)[-3000:]
    snapshot = {p: p.read_bytes() for p in (tmp_path / "fixtures").rglob("*.py")}
    changed = [p for p in snapshot if p.read_bytes() != (ROOT / p.relative_to(tmp_path)).read_bytes()]
    assert changed, "the fixtures have fixable findings: the first run must change some files"
    second = run(["check", "--fix", "--unsafe-fixes", "--output-format", "json", "fixtures"], tmp_path, timeout=900)
    no_traceback(second)
    applied = [line for line in second.stderr.splitlines() if ": applied" in line]
    assert not applied, second.stderr[-3000:]
    moved = {str(p.relative_to(tmp_path)) for p in snapshot if p.read_bytes() != snapshot[p]}
    assert not moved, moved


# Packages whose follow-up fix needs the rest of the package: a fix in one file changes what a helper in
# another file receives (layers.py's norm gets model.py's converted value), or a file's next finding is typed
# from another module (train.py's return, from model.py's block). Later rounds check with the program.
FOLLOW_UP_IN_THE_PACKAGE = ["idioms_trainer_bug_reduce_wrong_axis", "own_parallel_state_bug_reduce_over_dp"]


@pytest.mark.parametrize("package", FOLLOW_UP_IN_THE_PACKAGE)
def test_one_fix_run_is_enough_when_a_follow_up_needs_the_package(tmp_path, package):
    shutil.copytree(ROOT / "fixtures" / "programs" / package, tmp_path / package)
    first = fix(tmp_path, package)
    assert ": applied" in first.stderr, output(first)
    fixed = {p: p.read_bytes() for p in (tmp_path / package).rglob("*.py")}
    second = fix(tmp_path, package)
    assert ": applied" not in second.stderr, output(second)
    assert {p: p.read_bytes() for p in fixed} == fixed
