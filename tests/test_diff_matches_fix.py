"""`--diff` shows what `--fix --unsafe-fixes` writes, file for file, also when a fix's effect reaches another
file of the program (a finding there in a later round: `idioms_trainer_bug_unreduced_head`'s loss fix makes
its train.py's `backward()` fixable). Each bug package is copied twice: one copy gets the diff applied with
`patch`, the other is fixed in place; the two trees must be identical."""

from __future__ import annotations

import filecmp
import pathlib
import shutil
import subprocess
import sys

import pytest

PROGRAMS = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "programs"
# the packages whose fixes reach another file, and every fourth other bug package (the diff costs two runs)
_CROSS_FILE = ["idioms_trainer_bug_unreduced_head", "idioms_trainer_bug_reduce_wrong_axis"]
_OTHERS = [p.name for p in sorted(PROGRAMS.iterdir()) if "_bug_" in p.name and p.name not in _CROSS_FILE][::4]


def _spmdcheck(args: list[str], cwd: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spmdcheck", "check", *args, "--no-cache"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _differences(left: pathlib.Path, right: pathlib.Path) -> list[str]:
    found: list[str] = []
    compare = filecmp.dircmp(left, right, ignore=[".spmdcheck_cache", "__pycache__"])
    todo = [(compare, "")]
    while todo:
        node, prefix = todo.pop()
        found += [prefix + name for name in node.diff_files + node.left_only + node.right_only]
        todo += [(sub, f"{prefix}{name}/") for name, sub in node.subdirs.items()]
    return found


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs the patch command")
@pytest.mark.parametrize("package", _CROSS_FILE + _OTHERS)
def test_the_diff_is_what_fix_writes(package: str, tmp_path: pathlib.Path) -> None:
    shown, fixed = tmp_path / "shown", tmp_path / "fixed"
    for copy in (shown, fixed):
        shutil.copytree(PROGRAMS / package, copy / package)
    diff = _spmdcheck([package, "--diff"], shown)
    assert diff.returncode in (0, 1), diff.stderr
    assert "fix(es)" in diff.stderr or "no fixes" in diff.stderr, diff.stderr  # a run really happened
    if diff.stdout:
        subprocess.run(["patch", "-p1", "-s"], input=diff.stdout, text=True, cwd=shown, check=True)
    fix = _spmdcheck([package, "--fix", "--unsafe-fixes"], fixed)
    assert fix.returncode in (0, 1), fix.stderr
    assert _differences(shown / package, fixed / package) == []
