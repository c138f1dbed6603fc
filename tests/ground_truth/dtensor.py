"""Ground truth for the DTensor fixtures (``fixtures/dtensor/``): run each program on gloo CPU ranks and
compare its loss and gradients with the same program on a one-rank mesh.

The program convention (docs/ground_truth.md, "DTensor fixtures"):

* line 1 ``# spmdcheck: mesh = ["tp"]`` names the mesh dims, in order;
* ``def build(mesh)`` returns ``(model, batch)``: the parallelized ``nn.Module`` (every weight made whole
  from a seeded ``torch.Generator`` and then distributed, so the model is the same at every mesh size) and
  a dict of plain input tensors, whole and identical on every rank (a leaf that requires grad has its
  gradient compared too);
* ``def step(model, batch)`` returns the loss (a plain scalar or a DTensor); the runner calls
  ``backward()`` on it (on ``full_tensor()`` for a DTensor), unless it needs no grad: then ``step`` ran its
  own backward (a chunked loss);
* optional ``MESH_SHAPES = [(2,), (4,)]``: the mesh shapes to run (default: ``(2,)`` and ``(4,)`` for a
  1-D mesh, ``(1, 2)`` and ``(2, 2)`` for a 2-D one).

The reference is the ok twin on a mesh of the same dims, every dim of size 1 (DTensor's collectives are then
identities, so a missing or wrong reduction cannot show). What is compared, on every rank: the loss, each
parameter's gradient as DTensor declares it (``grad.full_tensor()``: a Replicate gradient that differs
between ranks shows as a different value on some rank) and each input leaf's gradient.

One pool of rank processes per world size (1, 2, 4), from the forkserver of ``pool.py``; the ranks join a
gloo group once and run program after program. A program that does not answer within the timeout is a hang.
What this runner shares with the gradient-synchronisation one (the twins, the rank loop, the pools, the
references, the sweep) is in ``twins.py``.
"""

from __future__ import annotations

import pathlib
import re
import sys
import types

from . import pool as rank_pool
from .twins import RUN_TIMEOUT, TwinProgram, TwinRunner, close, read_twin, serve_jobs, spawn_ranks, sweep

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "dtensor"
PENDING = re.compile(r"^#\s*spmdcheck-pending:\s*issue 22\s*$")


def read_program(path: pathlib.Path) -> TwinProgram:
    return read_twin(path, path)


def discover(root: pathlib.Path = FIXTURES) -> list[TwinProgram]:
    return [read_program(p) for p in sorted(root.glob("*.py"))]


# --------------------------------------------------------------------------- inside a rank
def rank_main(rank: int, world: int, port: int, conn) -> None:  # noqa: ANN001
    """Entry of a rank process: join the gloo group, then run the programs the parent sends, each on a mesh
    made once per (dims, shape)."""
    meshes: dict = {}

    def answer(job: dict) -> dict:
        key = (tuple(job["axes"]), tuple(job["shape"]))
        if key not in meshes:
            from torch.distributed.device_mesh import init_device_mesh

            meshes[key] = init_device_mesh("cpu", key[1], mesh_dim_names=key[0])
        return run_program(job["source"], job["path"], meshes[key], job["id"])

    serve_jobs(rank, world, port, conn, answer)


def run_program(source: str, path: str, mesh, job_id: int) -> dict:  # noqa: ANN001
    """Load the program, build it on ``mesh``, run one step and backward; return the loss and gradients."""
    import torch
    from torch.distributed.tensor import DTensor

    name = f"_gt_dtensor_{job_id}"
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    try:
        exec(compile(source, path, "exec"), module.__dict__)  # noqa: S102 - the fixtures are our own programs
        torch.manual_seed(0)
        model, batch = module.build(mesh)
        loss = module.step(model, batch)
        if isinstance(loss, DTensor):
            loss = loss.full_tensor()
        if loss.requires_grad:  # else `step` ran its own backward
            loss.backward()
        grads: dict[str, object] = {}
        for pname, param in model.named_parameters():
            grad = param.grad
            if isinstance(grad, DTensor):
                grad = grad.full_tensor()  # a collective: every rank walks the parameters in the same order
            grads[f"param {pname}"] = None if grad is None else grad.detach().clone()
        for bname, value in batch.items():
            if isinstance(value, torch.Tensor) and value.requires_grad and value.is_leaf:
                grads[f"input {bname}"] = None if value.grad is None else value.grad.detach().clone()
        return {"loss": loss.detach().clone(), "grads": grads}
    finally:
        sys.modules.pop(name, None)


# --------------------------------------------------------------------------- the pools
class DTensorPool(rank_pool.RankPool):
    """``pool.RankPool`` whose ranks run :func:`rank_main` (DTensor programs) instead of the spmd_types worker."""

    def start(self) -> None:
        ctx = rank_pool._context()
        # Effective only while the forkserver has not started (no other pool yet): then every rank forks
        # with DTensor imported once, instead of importing it in each rank (seconds each on a busy machine).
        ctx.set_forkserver_preload(
            [
                "torch",
                "torch.distributed",
                "spmd_types",
                rank_pool.worker.__name__,
                "torch.distributed.tensor",
                "torch.distributed.tensor.parallel",
                "torch.distributed.tensor.experimental",
                __name__,
            ]
        )
        spawn_ranks(self, ctx, rank_main, "DTensor")


# --------------------------------------------------------------------------- judging
def compare(reference: dict, answers: list[dict]) -> tuple[bool, float, list[str]]:
    """Every rank's loss and gradients against the reference: (all close, max abs diff, what differs)."""
    worst, differing = 0.0, []
    want = {"loss": reference["loss"], **reference["grads"]}
    for rank, answer in enumerate(answers):
        got = {"loss": answer["loss"], **answer["grads"]}
        for key in sorted(set(want) | set(got)):
            ok, diff = close(got.get(key), want.get(key))
            worst = max(worst, diff)
            if not ok:
                differing.append(f"rank {rank}: {key}")
    return not differing, worst, differing


class Runner(TwinRunner):
    """The DTensor pools; a job is the program's source, run on a mesh of the shape asked for."""

    pool_class = DTensorPool

    def __init__(self, timeout: float = RUN_TIMEOUT) -> None:
        super().__init__(timeout)
        self._jobs = 0

    def job(self, path: pathlib.Path, axes: tuple[str, ...], shape: tuple[int, ...]) -> dict:
        self._jobs += 1
        return {
            "source": path.read_text(encoding="utf-8"),
            "path": str(path),
            "axes": list(axes),
            "shape": list(shape),
            "id": self._jobs,
        }

    def compare(
        self, reference: dict, answers: list[dict], program: TwinProgram, shape: tuple[int, ...]
    ) -> tuple[bool, float, list[str]]:
        return compare(reference, answers)


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.ground_truth.dtensor [FILTER...]``: one line per program and mesh shape."""
    return sweep(Runner(), discover(), list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    raise SystemExit(main())
