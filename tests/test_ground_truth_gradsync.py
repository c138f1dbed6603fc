"""Ground truth for gradient synchronisation (issue 21): the fixtures/programs/gradsync_* packages run one
training step on gloo CPU ranks and their parameters after the optimizer step are compared with the one-rank
reference (the ok twin with every mesh dim of size 1: the whole model, the whole batch).

* the bug twin and the ok twin train the same model: on one rank both match the reference;
* on 2 and 4 ranks ((2,) and (4,) for dp; (1, 2) and (2, 2) for dp x tp) the ok twin's parameters match the
  reference on every rank, and the bug twin's differ (or it raises, or it hangs).

Select with ``pytest -m ground_truth``; ``python -m tests.ground_truth.gradsync`` prints every run with its
largest difference. See docs/ground_truth.md, "Gradient synchronisation packages".
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.ground_truth

torch = pytest.importorskip("torch", reason="the gradient-synchronisation ground truth needs torch (test extra)")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with the gloo backend is not available", allow_module_level=True)

from conftest import expected_diagnostics  # noqa: E402
from ground_truth.gradsync import (  # noqa: E402
    ENTRY,
    PENDING,
    PROPOSED_CODES,
    ROOT,
    Runner,
    coordinates,
    discover,
    modules,
)

PACKAGES = discover()
BUGS = [p for p in PACKAGES if p.is_bug]
RUNS = [(p, shape) for p in PACKAGES for shape in p.shapes]
KINDS = ("sp_norm", "moe", "accum_hooks", "ddp", "clip", "bucket", "microbatch", "fsdp2", "megatron", "deepspeed",
         "spmd_types")


@pytest.fixture(scope="module")
def runner():
    r = Runner()
    yield r
    r.close()


def test_every_kind_has_its_pair_and_every_module_the_headers():
    oks = {p.family for p in PACKAGES if not p.is_bug}
    assert {f"gradsync_{kind}" for kind in KINDS} <= oks
    assert oks == {p.family for p in BUGS}, "an ok package without a bug twin"
    for p in BUGS:
        assert p.twin is not None and p.twin.is_dir(), f"{p.name} has no ok twin"
    for p in PACKAGES:
        assert (p.path / ENTRY).is_file(), p.name
        expected = set()
        pending = set()
        for path in modules(p.path):
            lines = path.read_text(encoding="utf-8").splitlines()
            if path.name == "__init__.py":
                assert not lines, f"{path}: __init__.py files are empty"
                continue
            assert lines[0].startswith("# spmdcheck: mesh = ["), path
            # a bug the checker cannot find yet says so on line 2 of every module (its corpus test is a strict
            # expected failure); one it finds says so nowhere
            pending.add(bool(PENDING.match(lines[1])))
            expected |= {(path.name, *e) for e in expected_diagnostics("\n".join(lines))}
        assert len(pending) == 1 and (p.is_bug or pending == {False}), f"{p.name}: line 2 of some modules only"
        assert bool(expected) == p.is_bug, f"{p.name}: bug packages expect a diagnostic, ok packages none"
        assert all(code in PROPOSED_CODES and severity == "error" for _, _, code, severity in expected), p.name


def test_the_proposed_codes_are_documented():
    doc = (ROOT / "docs" / "ground_truth.md").read_text(encoding="utf-8")
    for code, name in PROPOSED_CODES.items():
        assert f"| {code} | `{name}` |" in doc, code
    used = {code for p in BUGS for path in modules(p.path) for _, code, _ in expected_diagnostics(path.read_text())}
    assert used == set(PROPOSED_CODES), "a proposed code no package expects, or the reverse"


def test_coordinates_are_row_major():
    assert [coordinates(r, (2, 2)) for r in range(4)] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert coordinates(1, (1, 2)) == (0, 1) and coordinates(3, (4,)) == (3,)


@pytest.mark.parametrize("program", BUGS, ids=[p.name for p in BUGS])
def test_one_rank_run_of_the_bug_twin_is_the_reference(runner, program):
    """The twins train the same model: on one rank a missing or wrong reduction cannot show."""
    run = runner.run(program, (1,) * len(program.axes))
    assert run.outcome == "match", run.summary()


@pytest.mark.parametrize("program,shape", RUNS, ids=[f"{p.name}-{'x'.join(map(str, s))}" for p, s in RUNS])
def test_distributed_step(runner, program, shape):
    run = runner.run(program, shape)
    if program.is_bug:
        assert run.outcome != "match", f"the bug twin matches its reference: {run.summary()}"
    else:
        assert run.outcome == "match", run.summary()
