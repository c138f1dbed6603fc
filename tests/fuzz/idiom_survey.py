"""The idiom rewrites (tests/fuzz/idioms.py) applied to generated programs and to the fixtures, and their
verdicts compared (issue 20, item 5; docs/ground_truth.md, "Idiom rewrites").

A generated program has one function (``step``) and no class, loop or program-defined callee: a family that
needs one rewrites the program's ``helper`` or ``module`` rewrite (tests/fuzz/metamorphic.py) -- the registry
dispatches to the helper ``part`` or the module ``Block``, the dynamic attributes are the module's weights,
a constructor argument is the module's -- and the line maps compose. The ``generator`` family passes live
values of ``step`` through a generator function (``a_t, b_t = iterate((a, b))``), as the ``tuple`` rewrite
passes them through a tuple.

A fixture (one file of fixtures/, or a package of fixtures/programs/, checked as one program) is rewritten
as it is. The verdict is the multiset of (code, path, line) of the diagnostics; the rewrite's lines are mapped
back, and a finding on a line the rewrite added is always a difference. When a family's rewrite of a generated
program was made on an earlier rewrite that itself changes the verdict (that rewrite's own test is
tests/test_metamorphic.py), the family is held to the earlier rewrite's verdict, and the survey names the case.
"""
from __future__ import annotations

import hashlib
import pathlib
import re
import time
from collections import Counter
from dataclasses import dataclass, field

from .idioms import FAMILIES, TRANSFORMS, Transformed
from .metamorphic import (
    ORIGINAL,
    ROOT,
    Comparison,
    RandomChoices,
    Rewritten,
    compare,
    diagnose,
    each_distinct_program,
    original_findings,
    rewrite,
)
from .programs import Program

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures"
MESH = re.compile(r"^# spmdcheck: mesh = \[(.*)\]", re.MULTILINE)
# which earlier rewrite of a generated program a family works on ("" : the program itself)
BASES = {
    "registry": ["helper", "module", "package"],
    "dynattr": ["module"],
    "container": ["", "helper"],
    "config": ["", "", "module"],
    "decorator": ["", "helper", "module"],
    "generator": [""],
    "partial": ["", "helper"],
    "kwargs": ["", "helper"],
    "lambda": ["", "helper", "module"],
}


class ForcedChoices:
    """Choices from ``inner``, except that one option is always taken when it is offered."""

    def __init__(self, inner, forced: str) -> None:  # noqa: ANN001
        self.inner, self.forced = inner, forced

    def pick(self, options):  # noqa: ANN001, ANN201
        options = list(options)
        return self.forced if self.forced in options else self.inner.pick(options)

    def integer(self, lo: int, hi: int) -> int:
        return self.inner.integer(lo, hi)


def _identity(program: Program) -> Rewritten:
    n = len(program.source.splitlines())
    return Rewritten("", {ORIGINAL: program.source}, {(ORIGINAL, i): i for i in range(1, n + 1)}, "",
                     {i: (ORIGINAL, i) for i in range(1, n + 1)})


def _compose(kind: str, base: Rewritten, t: Transformed) -> Rewritten:
    line_map = {}
    back: dict[tuple[str, int], tuple[str, int]] = {}
    for new, mid in t.line_map.items():
        if mid is not None:
            back[mid] = new
            if mid in base.line_map:
                line_map[new] = base.line_map[mid]
    copies = {old: back[mid] for old, mid in base.copies.items() if mid in back}
    note = f"{base.kind} rewrite ({base.note}), then {t.note}" if base.kind else t.note
    return Rewritten(kind, t.files, line_map, note, copies)


def _generator_program(program: Program, c) -> Rewritten:  # noqa: ANN001
    """Live values of ``step`` through a generator: the ``tuple`` rewrite's ``packed = (a, b)`` becomes
    ``packed = iterate((a, b))`` (unpacked after it as before), ``iterate`` a generator function."""
    base = rewrite(program, "tuple", ForcedChoices(c, "unpack"))
    text = base.files[ORIGINAL]
    from .idioms import GENERATORS
    from .sourceedit import FileEdit

    edit = FileEdit(text)
    style = c.pick(list(GENERATORS))
    name = "Items" if style == "__iter__" else "iterate"
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines, 1) if ln.startswith("    packed = ("))
    src = lines[at - 1]
    how = c.pick(["unpacked", "list", "loop"])
    if how == "loop":
        edit.replace(at, 4, len(src), "packed = []")
        edit.add_lines(at + 1, [f"    for item in {name}({src.split(' = ', 1)[1]}):", "        packed.append(item)"])
    else:
        wrapped = f"{name}({src.split(' = ', 1)[1]})"
        edit.replace(at, 4, len(src), f"packed = {'list(' + wrapped + ')' if how == 'list' else wrapped}")
    step = next(i for i, ln in enumerate(lines, 1) if ln.startswith("def step("))
    edit.add_lines(step, [ln.format(name=name) for ln in GENERATORS[style]] + ["", ""])
    new, old_of = edit.apply()
    t = Transformed({ORIGINAL: new}, {(ORIGINAL, n): (None if o is None else (ORIGINAL, o)) for n, o in old_of.items()},
                    f"live values through `{name}` ({style}, {how})")
    return _compose("generator", Rewritten("", base.files, base.line_map, base.note, base.copies), t)


def rewrite_idiom(program: Program, family: str, c) -> Rewritten | None:  # noqa: ANN001
    """The ``family`` rewrite of a generated program (on the program, or on its helper or module rewrite); None
    when the program has nothing the family rewrites (no axis literal or flag for ``config``)."""
    return rewrite_idiom_on_base(program, family, c)[0]


def rewrite_idiom_on_base(program: Program, family: str, c) -> tuple[Rewritten | None, Rewritten | None]:  # noqa: ANN001
    """`rewrite_idiom`, and the earlier rewrite it was made on (None: made on the program itself)."""
    if family == "generator":
        return _generator_program(program, c), None
    for _ in range(6):
        base_kind = c.pick(BASES[family])
        base = rewrite(program, base_kind, c) if base_kind else _identity(program)
        t = TRANSFORMS[family](base.files, c, program.mesh)
        if t is not None:
            return _compose(family, base, t), (base if base_kind else None)
    return None, None


# --------------------------------------------------------------------------- fixtures
@dataclass
class Unit:
    """A fixture checked as one program: a file, or a package of fixtures/programs/."""

    name: str  # relative to fixtures/
    files: dict[str, str]  # path relative to fixtures/ -> text

    @property
    def axes(self) -> tuple[str, ...]:
        found = MESH.search(next(iter(self.files.values())))
        return tuple(re.findall(r'"(\w+)"', found.group(1))) if found else ()


def _parses(files: dict[str, str]) -> bool:
    try:
        for path, text in files.items():
            compile(text, path, "exec", dont_inherit=True, flags=0x400)  # ast.PyCF_ONLY_AST
    except SyntaxError:
        return False
    return True


def fixture_units(root: pathlib.Path = FIXTURES) -> list[Unit]:
    """Every fixture that parses (the rewrites read it with ``ast``)."""
    units = []
    programs = root / "programs"
    for path in sorted(root.rglob("*.py")):
        if programs in path.parents or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(root).as_posix()
        units.append(Unit(rel, {rel: path.read_text(encoding="utf-8")}))
    for pkg in sorted(p for p in programs.iterdir() if (p / "__init__.py").is_file()):
        files = {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8") for p in sorted(pkg.rglob("*.py"))
                 if "__pycache__" not in p.parts}
        units.append(Unit(pkg.relative_to(root).as_posix(), files))
    return [u for u in units if _parses(u.files)]


def _unit_root(unit: Unit, tag: str) -> str:
    return f"{ROOT}/fixtures-{hashlib.sha1(unit.name.encode()).hexdigest()[:10]}-{tag}"


def unit_findings(unit: Unit, registry=None) -> Counter:  # noqa: ANN001
    got = diagnose(unit.files, _unit_root(unit, "original"), (), registry)
    return Counter((d.code, path, d.line) for path, ds in got.items() for d in ds)


@dataclass
class FixtureComparison:
    unit: Unit
    family: str
    transformed: Transformed
    before: Counter
    after: Counter

    @property
    def same(self) -> bool:
        return self.before == self.after

    def report(self) -> str:
        def fmt(c: Counter) -> str:
            return ", ".join(f"{code}@{path}:{line}" + (f" x{k}" if k > 1 else "")
                             for (code, path, line), k in sorted(c.items(), key=str)) or "none"

        changed = {p: t for p, t in self.transformed.files.items() if t != self.unit.files.get(p)}
        body = "\n".join(f"--- {p}\n" + "\n".join(f"{i:3} {ln}" for i, ln in enumerate(t.splitlines(), 1))
                         for p, t in changed.items())
        return (f"fixture {self.unit.name}, `{self.family}` rewrite: {self.transformed.note}\n"
                f"  before: {fmt(self.before)}\n  after (lines mapped back): {fmt(self.after)}\n"
                f"  missing after the rewrite: {fmt(self.before - self.after)}\n"
                f"  new after the rewrite: {fmt(self.after - self.before)}\n{body}")


def compare_unit(unit: Unit, family: str, registry=None, before: Counter | None = None,  # noqa: ANN001
                 ) -> FixtureComparison | None:
    t = TRANSFORMS[family](unit.files, RandomChoices(f"{family}:{unit.name}"), unit.axes)
    return None if t is None else compare_transformed(unit, family, t, registry, before)


def compare_transformed(unit: Unit, family: str, t: Transformed, registry=None,  # noqa: ANN001
                        before: Counter | None = None) -> FixtureComparison:
    before = unit_findings(unit, registry) if before is None else before
    got = diagnose(t.files, _unit_root(unit, family), (), registry)
    after: Counter = Counter()
    for path, ds in got.items():
        for d in ds:
            old = t.line_map.get((path, d.line))
            after[(d.code, path, old[1]) if old else (d.code, path, f"{d.line} (new)")] += 1
    return FixtureComparison(unit, family, t, before, after)


# --------------------------------------------------------------------------- the survey
@dataclass
class IdiomSurvey:
    programs: list[Program] = field(default_factory=list)
    results: dict[str, list[Comparison]] = field(default_factory=lambda: {f: [] for f in FAMILIES})
    fixtures: dict[str, list[FixtureComparison]] = field(default_factory=lambda: {f: [] for f in FAMILIES})
    fixture_units: int = 0
    seconds: float = 0.0
    families: tuple[str, ...] = FAMILIES  # the families surveyed
    # programs whose earlier rewrite (helper, module, package: tests/fuzz/metamorphic.py, tested on its own by
    # tests/test_metamorphic.py) changed the verdict, and the family's rewrite on it kept that verdict: the
    # family is held to the verdict of what it rewrote
    base_changes: dict[str, list[Comparison]] = field(default_factory=lambda: {f: [] for f in FAMILIES})

    def __repr__(self) -> str:
        return (f"IdiomSurvey({len(self.programs)} programs, "
                f"{sum(len(v) for v in self.fixtures.values())} fixture rewrites)")

    def failures(self, family: str) -> list[Comparison]:
        return [c for c in self.results[family] if not c.same]

    def fixture_failures(self, family: str) -> list[FixtureComparison]:
        return [c for c in self.fixtures[family] if not c.same]

    def table(self) -> str:
        """One row per family: programs and fixtures rewritten, verdicts preserved."""
        rows = ["| family | programs rewritten | verdicts preserved | fixtures rewritten | verdicts preserved |",
                "| --- | --- | --- | --- | --- |"]
        for f in self.families:
            n, ok = len(self.results[f]), len(self.results[f]) - len(self.failures(f))
            fn, fok = len(self.fixtures[f]), len(self.fixtures[f]) - len(self.fixture_failures(f))
            rows.append(f"| {f} | {n} | {ok} ({_pct(ok, n)}) | {fn} | {fok} ({_pct(fok, fn)}) |")
        return "\n".join(rows)

    def summary(self) -> str:
        lines = [f"idiom rewrites: {len(self.programs)} generated programs, {self.fixture_units} fixtures "
                 f"(files and packages), {self.seconds:.1f}s", self.table()]
        for f in self.families:
            for c in self.base_changes[f][:1]:
                lines.append(f"  {f}: {len(self.base_changes[f])} program(s) whose {c.rewritten.kind} rewrite, which "
                             f"the {f} rewrite was made on, changes the verdict (compared with that rewrite's), "
                             f"e.g. missing {dict(c.missing)}, new {dict(c.extra)}")
            fails = sorted(self.failures(f), key=lambda c: len(c.program.source))[:1]
            for c in fails:
                lines.append(f"  {f}, e.g. {c.rewritten.note}: missing {dict(c.missing)}, new {dict(c.extra)}")
            for c in self.fixture_failures(f)[:1]:
                lines.append(f"  {f}, e.g. fixture {c.unit.name}: {c.transformed.note}: missing "
                             f"{dict(c.before - c.after)}, new {dict(c.after - c.before)}")
        return "\n".join(lines)


def _pct(k: int, n: int) -> str:
    return f"{100 * k / n:.0f}%" if n else "-"


def survey_programs(out: IdiomSurvey, examples: int, seed_value: int, registry=None,  # noqa: ANN001
                    families: tuple[str, ...] = FAMILIES, branches: bool = True) -> None:
    """``examples`` distinct generated programs (hypothesis, seeded), each rewritten once by every family."""
    def rewrite_each(program: Program) -> None:
        out.programs.append(program)
        before = original_findings(program, registry)
        for family in families:
            rw, base = rewrite_idiom_on_base(program, family, RandomChoices(f"{family}:{program.source}"))
            if rw is None:
                continue
            cmp = compare(program, rw, registry, before)
            if not cmp.same and base is not None:
                base_cmp = compare(program, base, registry, before)
                if not base_cmp.same and base_cmp.after == cmp.after:
                    out.base_changes[family].append(base_cmp)
                    cmp = Comparison(program, rw, base_cmp.after, cmp.after, cmp.after_diagnostics)
            out.results[family].append(cmp)

    each_distinct_program(examples, seed_value, branches, rewrite_each)


def survey_fixtures(out: IdiomSurvey, per_family: int | None, registry=None,  # noqa: ANN001
                    families: tuple[str, ...] = FAMILIES, units: list[Unit] | None = None) -> None:
    """Every family on the fixtures it applies to (at most ``per_family`` of them, drawn by name's hash)."""
    units = fixture_units() if units is None else units
    order = sorted(units, key=lambda u: hashlib.sha1(u.name.encode()).hexdigest())
    before: dict[str, Counter] = {}
    used: set[str] = set()
    for family in families:
        for unit in order:
            if per_family is not None and len(out.fixtures[family]) >= per_family:
                break
            if TRANSFORMS[family](unit.files, RandomChoices(f"{family}:{unit.name}"), unit.axes) is None:
                continue
            if unit.name not in before:
                before[unit.name] = unit_findings(unit, registry)
            used.add(unit.name)
            cmp = compare_unit(unit, family, registry, before[unit.name])
            out.fixtures[family].append(cmp)
    out.fixture_units = len(used)


def survey(examples: int, seed_value: int, fixtures_per_family: int | None, registry=None,  # noqa: ANN001
           families: tuple[str, ...] = FAMILIES) -> IdiomSurvey:
    out = IdiomSurvey(families=families)
    t0 = time.perf_counter()
    survey_programs(out, examples, seed_value, registry, families)
    if fixtures_per_family != 0:
        survey_fixtures(out, fixtures_per_family, registry, families)
    out.seconds = time.perf_counter() - t0
    return out
