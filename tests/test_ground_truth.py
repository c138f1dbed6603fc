"""Ground truth: every fixture runs on 2 and 4 gloo ranks and is judged against its one-rank reference.

* spmdcheck silent (no error, no wrong-values warning) => the run matches the reference at N=2 and N=4;
* spmdcheck claims wrong values (corpus.CLAIMS_WRONG) => the run differs, crashes or hangs for some N;
* spmd-types' runtime checker (second opinion) agrees with spmdcheck, or the difference is a row of the
  deliberate-differences table in docs/ground_truth.md.

Select with ``pytest -m ground_truth``. One pool of rank processes serves the whole session.
See docs/ground_truth.md for the conventions and the tables.
"""
from __future__ import annotations

import pathlib
import re

import pytest

pytestmark = pytest.mark.ground_truth

torch = pytest.importorskip("torch", reason="the ground-truth harness needs torch (test extra)")
pytest.importorskip("torch.distributed", reason="torch.distributed is not available")
pytest.importorskip("spmd_types", reason="the ground-truth harness needs spmd-types==0.3.1 (test extra)")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with the gloo backend is not available", allow_module_level=True)

from ground_truth import layout  # noqa: E402
from ground_truth.corpus import discover, doc_table  # noqa: E402
from ground_truth.harness import Harness  # noqa: E402
from ground_truth.spec import I as I_  # noqa: E402
from ground_truth.spec import P as P_  # noqa: E402
from ground_truth.spec import R as R_  # noqa: E402
from ground_truth.spec import S, read_program  # noqa: E402
from ground_truth.sweep import run_fixture  # noqa: E402

PROGRAMS = sorted((pathlib.Path(__file__).parent / "ground_truth" / "programs").glob("*.py"))
FIXTURES = discover()
DIFFERENCES = "Deliberate differences from spmd-types"
MESH_DEPENDENT = "Mesh-size-dependent programs"
INVISIBLE = "Claims execution cannot see"
OPEN = "Open disagreements"
NOT_RUNNABLE = "Not runnable"


@pytest.fixture(scope="session")
def harness():
    h = Harness()
    yield h
    h.close()


@pytest.fixture(scope="session")
def records(harness, registry):
    cache: dict = {}

    def get(fx):  # noqa: ANN001, ANN202
        if fx.rel not in cache:
            cache[fx.rel] = run_fixture(harness, fx, registry)
        return cache[fx.rel]

    return get


# --------------------------------------------------------------------------- the harness itself
def test_layout_roundtrip():
    g = torch.randn(8, 12)
    axes, sizes = ("dp", "tp"), (2, 2)
    for types in ({"dp": S(0), "tp": S(1)}, {"dp": S(0), "tp": S(0)}, {"dp": P_, "tp": R_}, {"dp": P_, "tp": P_},
                  {"dp": R_, "tp": I_}):
        parts = layout.split_global(g, types, axes, sizes, "t")
        asm = layout.assemble(parts, types, axes, sizes, "t")
        assert asm.problems == [] and layout.close(asm.value, g), types
    broken = [g + r for r in range(4)]
    assert layout.assemble(broken, {"dp": R_, "tp": I_}, axes, sizes, "t").problems


def test_mesh_sizes():
    assert layout.mesh_sizes(("tp",), 4) == (4,)
    assert layout.mesh_sizes(("dp", "tp"), 2) == (1, 2)
    assert layout.mesh_sizes(("dp", "tp"), 4) == (2, 2)
    assert layout.mesh_sizes(("dp", "tp"), 1) == (1, 1)


@pytest.mark.parametrize("path", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_harness_program(harness, path):
    """Hand-written programs with a known outcome: correct ones match, bugs differ, divergent collectives hang."""
    text = path.read_text(encoding="utf-8")
    want = re.search(r"^# EXPECT: (\w+)", text, re.MULTILINE).group(1)
    verdict = harness.judge(read_program(text, str(path)))
    assert verdict.runnable, verdict.not_runnable
    got = {w.outcome for w in verdict.worlds}
    assert got == {want}, verdict.summary()


def test_pool_recovers_after_hang(harness):
    hang = (pathlib.Path(__file__).parent / "ground_truth" / "programs" / "tp_mlp_bug_hang.py")
    ok = hang.with_name("tp_mlp_ok.py")
    spec = read_program(hang.read_text(encoding="utf-8"), str(hang) + "#again")  # a fresh cache key
    rebuilds = harness.pool("gloo", 2).stats.hangs
    assert harness.judge(spec).worlds[0].outcome == "hang"
    assert harness.pool("gloo", 2).stats.hangs == rebuilds + 1
    again = read_program(ok.read_text(encoding="utf-8"), str(ok) + "#after-hang")
    assert harness.judge(again).matches


# --------------------------------------------------------------------------- every fixture
def _ids(fixtures):  # noqa: ANN001, ANN202
    return [f.rel for f in fixtures]


def test_fixture_corpus_is_present():
    assert FIXTURES, "no fixtures found"


@pytest.mark.parametrize("fx", FIXTURES, ids=_ids(FIXTURES))
def test_execution_agrees_with_spmdcheck(records, fx):
    rec = records(fx)
    open_rows = doc_table(OPEN)
    if not rec.runnable:
        reason = rec.fixture.not_runnable or (rec.verdict.not_runnable if rec.verdict else "not run")
        assert fx.rel in doc_table(NOT_RUNNABLE), (
            f"{fx.rel} cannot run ({reason}): improve the harness or list it under '{NOT_RUNNABLE}'")
        pytest.skip(f"not runnable: {reason}")
    v = rec.verdict
    story = f"spmdcheck: {fx.spmdcheck_summary()}\nexecution: {v.summary()}\noutput types from {v.output_types_from}"
    if fx.rel in open_rows:
        if rec.agrees is False or (fx.silent and not v.matches):
            pytest.xfail(f"open disagreement (docs/ground_truth.md): {open_rows[fx.rel][-1]}")
        pytest.fail(f"{fx.rel} is listed under '{OPEN}' but spmdcheck and execution now agree: remove the row\n"
                    + story)
    if fx.silent:
        if v.matches:
            return
        if v.matches_up_to_scale and fx.rel in doc_table(MESH_DEPENDENT):
            return
        hint = (f" (it differs only by a factor of axis sizes: if that is the program's meaning, list it under "
                f"'{MESH_DEPENDENT}')" if v.matches_up_to_scale else "")
        pytest.fail(f"spmdcheck is silent but the run does not match the reference{hint}\n{story}")
    elif fx.claims_wrong:
        if v.wrong:
            return
        assert fx.rel in doc_table(INVISIBLE), (
            f"spmdcheck claims wrong values ({', '.join(sorted(fx.claims_wrong))}) but the run matches its reference "
            f"at every N: a false positive, or a claim execution cannot see (list it under '{INVISIBLE}')\n{story}")


@pytest.mark.parametrize("fx", FIXTURES, ids=_ids(FIXTURES))
def test_runtime_checker_differences_are_documented(records, fx):
    rec = records(fx)
    if rec.checker is None:
        pytest.skip("the runtime checker did not run (fixture not runnable)")
    table = doc_table(DIFFERENCES)
    pair = rec.checker_pair
    if pair is None:
        assert fx.rel not in table, (
            f"{fx.rel} is a row of '{DIFFERENCES}' but spmdcheck and spmd-types now agree "
            f"({rec.checker.outcome}): remove the row")
        return
    mine, theirs = pair
    assert fx.rel in table, (
        f"undocumented difference: spmdcheck is {mine} ({fx.spmdcheck_summary()}), spmd-types' runtime checker "
        f"{theirs} ({rec.checker.message[:300]}); add a row with the reason to '{DIFFERENCES}'")
    row = table[fx.rel]
    assert row[:2] == [mine, theirs], f"the row says {row[:2]}, the run gives {[mine, theirs]}"


def test_doc_tables_name_existing_fixtures():
    names = {f.rel for f in FIXTURES}
    for heading in (DIFFERENCES, MESH_DEPENDENT, INVISIBLE, OPEN, NOT_RUNNABLE):
        stale = sorted(set(doc_table(heading)) - names)
        assert not stale, f"'{heading}' names fixtures that do not exist: {stale}"
