"""Differential fuzzing: random rank-local programs, spmdcheck's verdict against execution on gloo ranks.

Soundness (asserted on every program): spmdcheck silent (no error, no warning that claims wrong values)
=> the run on N = 2 and 4 ranks matches the one-rank reference. A violation fails the test with the
program hypothesis shrank it to (save it as a fixture with ``SPMDCHECK_FUZZ_SAVE=fixtures/fuzz_regressions``
or ``python -m tests.fuzz --shrink --save ...``). Precision (of the programs spmdcheck flags, the share
whose run is wrong) and the false-positive classes are recorded and printed at the end of the session.

CI: at least 500 distinct programs, seeded (reproducible), one pool of rank processes for all of them.
Longer runs: ``SPMDCHECK_FUZZ_EXAMPLES=5000`` (and ``SPMDCHECK_FUZZ_SEED=...``). See docs/ground_truth.md,
"Differential fuzzing".
"""
from __future__ import annotations

import json
import os

import pytest

pytestmark = pytest.mark.ground_truth

torch = pytest.importorskip("torch", reason="the fuzzer runs programs with torch (test extra)")
pytest.importorskip("torch.distributed", reason="torch.distributed is not available")
pytest.importorskip("spmd_types", reason="the fuzzer needs spmd-types==0.3.1 (test extra)")
pytest.importorskip("hypothesis", reason="the fuzzer needs hypothesis (test extra)")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with the gloo backend is not available", allow_module_level=True)

from fuzz.programs import MAX_STATEMENTS, MIN_STATEMENTS, programs  # noqa: E402
from fuzz.runner import SoundnessViolation, Stats, fuzz  # noqa: E402
from ground_truth.harness import Harness  # noqa: E402
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402

EXAMPLES = int(os.environ.get("SPMDCHECK_FUZZ_EXAMPLES", "500"))  # distinct programs
SEED = int(os.environ.get("SPMDCHECK_FUZZ_SEED", "20250"))
SAVE = os.environ.get("SPMDCHECK_FUZZ_SAVE")  # a directory: write a shrunk violation there as a fixture
REPORT = os.environ.get("SPMDCHECK_FUZZ_REPORT")  # a path: write the numbers there as JSON


@pytest.fixture(scope="session")
def fuzz_harness():
    """One pool of rank processes (1, 2 and 4 ranks) for every generated program."""
    h = Harness()
    yield h
    h.close()


@pytest.fixture(scope="session")
def fuzz_stats(request):
    stats = Stats()
    yield stats
    if not stats.programs:
        return
    if REPORT:
        with open(REPORT, "w", encoding="utf-8") as fh:
            json.dump(stats.as_dict(), fh, indent=1)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capman = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capman is not None:
        with capman.global_and_fixture_disabled():
            reporter.write_line("")
            reporter.write_sep("-", "spmdcheck differential fuzzing")
            reporter.write_line(stats.report(examples=False))


def test_generator_stays_in_range():
    """The strategy's own contract: 8-30 statements, a `def step`, and the harness can read every program."""
    from ground_truth.spec import read_program

    @seed(SEED)
    @settings(max_examples=60, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(programs())
    def check(program):  # noqa: ANN001, ANN202
        assert MIN_STATEMENTS <= program.statements <= MAX_STATEMENTS
        spec = read_program(program.source, "<fuzz>")
        assert spec.mesh == program.mesh and spec.returns is not None
        assert {p.name for p in spec.tensor_params} == {p.name for p in program.params}

    check()


def test_soundness(fuzz_harness, fuzz_stats, registry):
    """spmdcheck silent => the run matches the one-rank reference at N = 2 and 4, on every generated program.

    All programs are judged first (so the session's numbers cover the whole run); on a violation the same
    seeded search runs again, stops at the first violation and lets hypothesis shrink it."""
    fuzz(fuzz_harness, fuzz_stats, EXAMPLES, SEED, registry)
    assert fuzz_stats.programs >= EXAMPLES, f"only {fuzz_stats.programs} distinct programs"
    if not fuzz_stats.violations:
        return
    try:
        fuzz(fuzz_harness, Stats(), EXAMPLES, SEED, registry, stop_at_violation=True)
    except SoundnessViolation as exc:
        if SAVE:
            from fuzz.regressions import save_fixture

            print(f"\nthe shrunk violation is saved as {save_fixture(exc.outcome, SAVE)}")
        raise AssertionError(
            f"{len(fuzz_stats.violations)} of {fuzz_stats.programs} programs violate soundness; the first one, "
            f"shrunk by hypothesis:\n{exc}") from None
    pytest.fail(f"{len(fuzz_stats.violations)} soundness violations, but the replay did not reproduce them:\n"
                + "\n\n".join(f"{o.summary()}\n{o.program.source}" for o in fuzz_stats.violations[:3]))


def test_both_verdicts_are_common(fuzz_stats):
    """The generator is worth running: both verdicts appear often, and its correct-by-construction programs
    really are correct (a mismatch there is a generator bug, which would hide checker bugs)."""
    if fuzz_stats.programs < EXAMPLES:
        pytest.skip("the soundness run did not complete")  # e.g. run alone: it reads test_soundness' numbers
    d = fuzz_stats.as_dict()
    assert d["silent"] >= 0.25 * d["programs"], d
    assert d["flagged"] >= 0.25 * d["programs"], d
    bugs = fuzz_stats.generator_bugs
    assert not bugs, "correct-by-construction programs whose run does not match:\n" + "\n\n".join(
        f"{o.summary()}\n{o.program.source}" for o in bugs[:3])
