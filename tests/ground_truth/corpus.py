"""The fixture corpus seen by the harness: pairing bug/ok twins, spmdcheck's verdict,
and the tables of docs/ground_truth.md the tests check against.
"""
from __future__ import annotations

import pathlib
import re
from dataclasses import dataclass, field

from .spec import ProgramSpec, SpecError, read_program

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
DOC = ROOT / "docs" / "ground_truth.md"

# Codes that claim the program computes wrong values or gradients (or deadlocks): an
# execution on N ranks must then differ from the reference, crash or hang for some N.
CLAIMS_WRONG = frozenset({
    "SPMD101", "SPMD102", "SPMD103", "SPMD104", "SPMD105", "SPMD106",
    "SPMD201",  # warnings, but each claims wrong values (a pending sum used as a value; two layouts
    "SPMD109",  # mixed in one op): counted, see docs/ground_truth.md
    "SPMD202",  # a warning too: per-rank means reduced as a sum are N times the global mean
    "SPMD301", "SPMD302", "SPMD305", "SPMD306", "SPMD404",
    "SPMD501",  # a collective under a rank-dependent condition: the run must hang (or differ)
})


@dataclass
class Fixture:
    path: pathlib.Path
    rel: str
    family: str  # folder/name shared by a bug and its ok twin
    is_bug: bool
    twin_path: pathlib.Path | None
    spec: ProgramSpec | None = None
    twin: ProgramSpec | None = None
    not_runnable: str | None = None
    diagnostics: list = field(default_factory=list)  # (line, code, severity, message)

    @property
    def errors(self) -> set[str]:
        return {c for _, c, s, _ in self.diagnostics if s == "error"}

    @property
    def codes(self) -> set[str]:
        return {c for _, c, _, _ in self.diagnostics}

    @property
    def claims_wrong(self) -> set[str]:
        return self.codes & CLAIMS_WRONG

    @property
    def silent(self) -> bool:
        """No error, and no warning that claims wrong values."""
        return not self.errors and not self.claims_wrong

    @property
    def flagged(self) -> bool:
        """What the runtime checker is compared with: any error-severity diagnostic."""
        return bool(self.errors)

    def spmdcheck_summary(self) -> str:
        if not self.diagnostics:
            return "silent"
        return ", ".join(f"{c}@{ln}" + ("" if s == "error" else "(w)") for ln, c, s, _ in self.diagnostics)


_BUG = re.compile(r"^(?P<name>.+?)_bug_(?P<what>.+)\.py$")
_OK = re.compile(r"^(?P<name>.+)_ok\.py$")


PROGRAMS = FIXTURES / "programs"  # whole packages, run as programs by programs.py, not file by file


def discover(root: pathlib.Path = FIXTURES) -> list[Fixture]:
    out = []
    for path in sorted(root.rglob("*.py")):
        if PROGRAMS in path.parents or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(root).as_posix()
        m_bug, m_ok = _BUG.match(path.name), _OK.match(path.name)
        name = (m_bug or m_ok).group("name") if (m_bug or m_ok) else path.stem
        family = f"{path.parent.relative_to(root).as_posix()}/{name}"
        twin = path.with_name(f"{name}_ok.py") if m_bug else None
        out.append(Fixture(path, rel, family, bool(m_bug), twin if twin is not None and twin.exists() else None))
    return out


def load(fx: Fixture) -> Fixture:
    text = fx.path.read_text(encoding="utf-8")
    try:
        fx.spec = read_program(text, str(fx.path))
    except SpecError as exc:
        fx.not_runnable = str(exc)
    if fx.twin_path is not None:
        try:
            fx.twin = read_program(fx.twin_path.read_text(encoding="utf-8"), str(fx.twin_path))
        except SpecError:
            fx.twin = None
    return fx


def spmdcheck_diagnostics(fx: Fixture, registry=None) -> list:  # noqa: ANN001
    from spmdcheck.api import Settings, check_source

    from .spec import HEADER_STRICT, mesh_of

    text = fx.path.read_text(encoding="utf-8")
    settings = Settings(mesh=mesh_of(text), strict=bool(HEADER_STRICT.search(text)))
    diags = check_source(text, str(fx.path), settings, registry)
    fx.diagnostics = [(d.line, d.code, d.severity, d.message) for d in diags]
    return fx.diagnostics


# --------------------------------------------------------------------------- the doc's tables
_ROW = re.compile(r"^\|\s*`(?P<fixture>[^`]+)`\s*\|(?P<rest>.*)\|\s*$")


def doc_table(heading: str, doc: pathlib.Path = DOC) -> dict[str, list[str]]:
    """Rows of the markdown table under ``## heading`` whose first cell is a `fixture`: fixture -> other cells."""
    if not doc.exists():
        return {}
    rows: dict[str, list[str]] = {}
    inside = False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            inside = line[3:].strip().lower().startswith(heading.lower())
            continue
        if inside:
            m = _ROW.match(line)
            if m:
                rows[m.group("fixture")] = [c.strip() for c in m.group("rest").split("|")]
    return rows
