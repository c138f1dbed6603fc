"""Whole programs (fixtures/programs/<name>/) seen by the harness: one package per program, paired with
its ok twin, run through its entry module ``train.py`` exactly as a single-file program runs.

A program's claim is checked against execution: an ``_ok`` package matches its one-rank reference at
N = 2 and 4; a ``_bug_`` package is wrong (differs, crashes or hangs) at some N, judged like a single-file
bug (against the global reference when its twin matches it, else against the twin's own run).
"""
from __future__ import annotations

import pathlib
import re
from dataclasses import dataclass

from .corpus import PROGRAMS
from .harness import Harness, Verdict
from .spec import ProgramSpec, read_package

_BUG = re.compile(r"^(?P<name>.+?)_bug_(?P<what>.+)$")


@dataclass
class Package:
    path: pathlib.Path
    family: str  # the name shared by a bug and its ok twin
    is_bug: bool
    twin_path: pathlib.Path | None

    @property
    def name(self) -> str:
        return self.path.name


def discover_packages(root: pathlib.Path = PROGRAMS) -> list[Package]:
    out = []
    if not root.is_dir():
        return out
    for path in sorted(p for p in root.iterdir() if (p / "__init__.py").is_file()):
        m = _BUG.match(path.name)
        family = m.group("name") if m else path.name.removesuffix("_ok")
        twin = root / f"{family}_ok" if m else None
        out.append(Package(path, family, bool(m), twin if twin is not None and twin.is_dir() else None))
    return out


def spec_of(pkg: Package) -> ProgramSpec:
    return read_package(str(pkg.path))


def judge_package(h: Harness, pkg: Package) -> tuple[Verdict, Verdict | None]:
    """The package's verdict and, for a bug, its twin's (both with the family's seed, so the same inputs)."""
    twin = read_package(str(pkg.twin_path)) if pkg.twin_path is not None else None
    verdict = h.judge(spec_of(pkg), twin, seed_key=f"programs/{pkg.family}", stop_when_wrong=pkg.is_bug)
    twin_verdict = h.judge(twin, None, seed_key=f"programs/{pkg.family}") if twin is not None else None
    return verdict, twin_verdict
