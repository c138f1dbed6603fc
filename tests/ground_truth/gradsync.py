"""Ground truth for gradient synchronisation (issue 21): the ``fixtures/programs/gradsync_*`` packages run one
training step on gloo CPU ranks, and their parameters after the optimizer step are compared with the same
package run on one rank (the model unsharded, the whole batch).

The package convention (docs/ground_truth.md, "Gradient synchronisation packages"):

* every module starts with the mesh header ``# spmdcheck: mesh = ["dp", "tp"]`` (the dims, in order) and
  a bug package's modules ``# spmdcheck-pending: issue 21`` on line 2 until the checker finds it; ``__init__.py``
  is empty; the entry module is ``train.py``;
* ``train.build(**sizes)`` (one keyword per mesh dim, e.g. ``build(dp=2, tp=2)``) creates the process groups,
  the model (every weight drawn whole from a seed, then this rank keeps its block) and the optimizer, and
  returns ``(model, optimizer, batch)``; the batch is the whole global batch, identical on every rank;
* ``train.step(model, optimizer, batch)`` runs one training step: forward, backward, gradient
  synchronisation, optimizer step;
* the ranks are laid out row-major over the mesh dims (``rank = dp_rank * tp + tp_rank``), as Megatron's
  groups are;
* a parameter sharded over tp says so the Megatron way, ``tensor_model_parallel = True`` and
  ``partition_dim``: it is compared with its block of the reference parameter; every other parameter with the
  reference parameter of the same name (an expert's name carries its global index);
* optional ``MESH_SHAPES = [(1, 2), (2, 2)]`` in ``train.py`` (default: ``(2,)`` and ``(4,)`` for ``["dp"]``,
  ``(1, 2)`` and ``(2, 2)`` for ``["dp", "tp"]``).

The reference is the ok twin with every mesh dim of size 1 (one rank, where every collective is an identity).
A rank whose parameters differ from the reference's (a gradient reduced wrongly, or ranks that diverge) makes
the run "differ"; a program that raises is an "error", one that does not answer in time a "hang".

The pools (one per world size, 1, 2 and 4) are ``pool.RankPool``s of the DTensor runner's kind: forked from
the forkserver of ``pool.py``, joined to a gloo group once, running package after package. What the two
runners share (the twins, the rank loop, the pools, the references, the sweep) is in ``twins.py``.
"""

from __future__ import annotations

import importlib
import os
import pathlib
import re
import shutil
import sys
import tempfile

from . import pool as rank_pool
from .twins import RUN_TIMEOUT, TwinProgram, TwinRunner, close, read_twin, serve_jobs, spawn_ranks, sweep
from .worker import FAKE_DEEPSPEED, FAKE_MEGATRON

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "fixtures" / "programs"
PREFIX = "gradsync_"
PENDING = re.compile(r"^#\s*spmdcheck-pending:\s*issue 21\s*$")
ENTRY = "train.py"
# The codes the packages expect, proposed for issue 21 (docs/ground_truth.md, "Proposed codes"): not in
# spmdcheck/diagnostics/codes.py until the analysis exists.
PROPOSED_CODES = {
    "SPMD601": "missing-gradient-reduction",
    "SPMD602": "double-gradient-reduction",
    "SPMD603": "gradient-reduction-wrong-group",
    "SPMD604": "accumulation-sync-misplaced",
    "SPMD605": "clip-norm-wrong-axes",
    "SPMD606": "gradient-averaged-twice",
}


# --------------------------------------------------------------------------- the packages
def read_package(path: pathlib.Path) -> TwinProgram:
    return read_twin(path, path / ENTRY)


def discover(root: pathlib.Path = PROGRAMS) -> list[TwinProgram]:
    return [read_package(p) for p in sorted(root.glob(f"{PREFIX}*")) if (p / "__init__.py").is_file()]


def modules(package: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)


# --------------------------------------------------------------------------- inside a rank
def rank_main(rank: int, world: int, port: int, conn) -> None:  # noqa: ANN001
    """Entry of a rank process: join the gloo group, then run the packages the parent sends."""
    serve_jobs(rank, world, port, conn, lambda job: run_package(job["root"], job["name"], job["sizes"]))


def run_package(root: str, name: str, sizes: dict[str, int]) -> dict:
    """Import the package's entry afresh, build it for ``sizes``, run one step; return this rank's parameters
    (with the tensor-parallel block each one holds, if any)."""
    import torch

    # a package may call Megatron's or DeepSpeed's API: the test-only stand-ins (worker.py)
    for folder in (FAKE_MEGATRON, FAKE_DEEPSPEED, root):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        train = importlib.import_module(f"{name}.train")
        torch.manual_seed(0)
        model, optimizer, batch = train.build(**sizes)
        train.step(model, optimizer, batch)
        params = {}
        for pname, param in model.named_parameters():
            pname = pname.removeprefix("module.")  # a DDP wrapper's prefix: the reference has none
            block = int(param.partition_dim) if getattr(param, "tensor_model_parallel", False) else None
            value = param.detach()
            if hasattr(value, "full_tensor"):  # a DTensor (FSDP2's `fully_shard`): compared whole
                value = value.full_tensor()
            params[pname] = (value.clone(), block)
        return {"params": params}
    finally:
        for mod in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
            del sys.modules[mod]


# --------------------------------------------------------------------------- the pools
class GradSyncPool(rank_pool.RankPool):
    """``pool.RankPool`` (forked from its forkserver, torch imported once) whose ranks run :func:`rank_main`
    (one package step) instead of the spmd_types worker; started as the DTensor runner starts its pool."""

    def start(self) -> None:
        ctx = rank_pool._context()
        spawn_ranks(self, ctx, rank_main, "gradsync")


# --------------------------------------------------------------------------- judging
def coordinates(rank: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The rank's index on every mesh dim, row-major (the last dim varies fastest)."""
    out = []
    for size in reversed(shape):
        out.append(rank % size)
        rank //= size
    return tuple(reversed(out))


def compare(reference: dict, answers: list[dict], axes: tuple[str, ...], shape: tuple[int, ...]):  # noqa: ANN201
    """Every rank's parameters after the step against the reference's (a tensor-parallel parameter against its
    block): (all close, max abs diff, what differs)."""
    worst, differing = 0.0, []
    want = {name: value for name, (value, _) in reference["params"].items()}
    tp = shape[axes.index("tp")] if "tp" in axes else 1
    held: set[str] = set()
    for rank, answer in enumerate(answers):
        tp_rank = coordinates(rank, shape)[axes.index("tp")] if "tp" in axes else 0
        got = answer["params"]
        held |= set(got)
        for name in sorted(got):  # a rank holds its own experts only: the names it has
            value, dim = got[name]
            expected = want.get(name)
            if expected is not None and dim is not None:
                expected = expected.chunk(tp, dim=dim)[tp_rank]
            ok, diff = close(value, expected)
            worst = max(worst, diff)
            if not ok:
                differing.append(f"rank {rank}: {name}")
    differing += [f"no rank: {name}" for name in sorted(set(want) - held)]
    return not differing, worst, differing


class Runner(TwinRunner):
    """The gradient-synchronisation pools, and the packages copied once under names of their own; a job is a
    package's name and the size of each mesh dim."""

    pool_class = GradSyncPool

    def __init__(self, timeout: float = RUN_TIMEOUT) -> None:
        super().__init__(timeout)
        self.copies: dict[pathlib.Path, str] = {}
        self.root = tempfile.mkdtemp(prefix="spmdcheck-gradsync-")

    def close(self) -> None:
        super().close()
        shutil.rmtree(self.root, ignore_errors=True)

    def _copy(self, package: pathlib.Path) -> str:
        """The package under a name of its own: a bug and its twin share module names, never cached modules."""
        if package not in self.copies:
            name = f"gt{len(self.copies)}_{package.name}"
            shutil.copytree(package, os.path.join(self.root, name), ignore=shutil.ignore_patterns("__pycache__"))
            self.copies[package] = name
        return self.copies[package]

    def job(self, path: pathlib.Path, axes: tuple[str, ...], shape: tuple[int, ...]) -> dict:
        return {"root": self.root, "name": self._copy(path), "sizes": dict(zip(axes, shape))}

    def compare(
        self, reference: dict, answers: list[dict], program: TwinProgram, shape: tuple[int, ...]
    ) -> tuple[bool, float, list[str]]:
        return compare(reference, answers, program.axes, shape)


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.ground_truth.gradsync [FILTER...]``: one line per package and mesh shape."""
    return sweep(Runner(), discover(), list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    raise SystemExit(main())
