"""Ground truth for the DTensor fixtures (fixtures/dtensor/): each pair runs on gloo CPU ranks.

* the bug twin and the ok twin compute the same model: on a one-rank mesh both match the reference (the ok
  twin on a mesh of the same dims with every dim of size 1);
* on 2 and 4 ranks (1-D meshes; 1x2 and 2x2 for dp x tp) the ok twin's loss and gradients match the
  reference on every rank, and the bug twin's differ, or it raises, or it hangs (a timeout).

Select with ``pytest -m ground_truth``; ``python -m tests.ground_truth.dtensor`` prints every run with its
largest difference. See docs/ground_truth.md, "DTensor fixtures".
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.ground_truth

torch = pytest.importorskip("torch", reason="the DTensor ground truth needs torch (test extra)")
pytest.importorskip("torch.distributed.tensor", reason="torch.distributed.tensor (DTensor) is not available")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with the gloo backend is not available", allow_module_level=True)

from conftest import expected_diagnostics  # noqa: E402
from ground_truth.dtensor import FIXTURES, PENDING, Runner, discover  # noqa: E402

PROGRAMS = discover()
BUGS = [p for p in PROGRAMS if p.is_bug]
RUNS = [(p, shape) for p in PROGRAMS for shape in p.shapes]


@pytest.fixture(scope="module")
def runner():
    r = Runner()
    yield r
    r.close()


def test_every_bug_has_an_ok_twin_and_every_file_the_headers():
    oks = {p.family for p in PROGRAMS if not p.is_bug}
    assert len(BUGS) >= 10 and len(oks) >= 10
    for p in BUGS:
        assert p.twin is not None and p.twin.exists(), f"{p.name} has no ok twin"
    assert oks == {p.family for p in BUGS}, "an ok file without a bug twin"
    for p in PROGRAMS:
        lines = p.path.read_text(encoding="utf-8").splitlines()
        assert lines[0].startswith("# spmdcheck: mesh = ["), p.name
        # a bug the checker cannot find yet says so (its corpus test is a strict expected failure); an ok twin is
        # silent and must stay so: it carries no marker
        marked = any(PENDING.match(line) for line in lines[1:3])
        assert p.is_bug or not marked, f"{p.name}: `# spmdcheck-pending: issue 22` on bug files only"
        expected = expected_diagnostics("\n".join(lines))
        assert bool(expected) == p.is_bug, f"{p.name}: bug files expect a diagnostic, ok files none"
    assert sorted(FIXTURES.glob("*.py")) == [p.path for p in PROGRAMS]


@pytest.mark.parametrize("program", BUGS, ids=[p.name for p in BUGS])
def test_one_rank_run_of_the_bug_twin_is_the_reference(runner, program):
    """The twins compute the same model: on one rank a missing or wrong reduction cannot show."""
    run = runner.run(program, (1,) * len(program.axes))
    assert run.outcome == "match", run.summary()


@pytest.mark.parametrize("program,shape", RUNS, ids=[f"{p.name}-{'x'.join(map(str, s))}" for p, s in RUNS])
def test_distributed_run(runner, program, shape):
    run = runner.run(program, shape)
    if program.is_bug:
        assert run.outcome != "match", f"the bug twin matches its reference: {run.summary()}"
    else:
        assert run.outcome == "match", run.summary()


HANGS = """# spmdcheck: mesh = ["tp"]
import torch
import torch.distributed as dist
from torch import nn


def build(mesh):
    return nn.Linear(2, 2), {}


def step(model, batch):
    if dist.get_rank() == 0:
        dist.all_reduce(torch.ones(1))  # the other rank never joins
    return model.weight.sum()
"""


def test_a_program_that_hangs_is_a_hang_and_the_pool_recovers(runner, tmp_path):
    program = tmp_path / "hangs_bug_rank0_collective.py"
    program.write_text(HANGS, encoding="utf-8")
    runner.timeout, before = 5.0, runner.timeout
    try:
        status, detail = runner.execute(program, ("tp",), (2,))
    finally:
        runner.timeout = before
    assert status == "hang", detail
    ok = next(p for p in PROGRAMS if not p.is_bug and len(p.axes) == 1)
    assert runner.run(ok, (2,)).outcome == "match"
