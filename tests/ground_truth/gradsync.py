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
the forkserver of ``pool.py``, joined to a gloo group once, running package after package.
"""

from __future__ import annotations

import ast
import datetime
import importlib
import logging
import math
import os
import pathlib
import pickle
import re
import shutil
import sys
import tempfile
import traceback
import warnings
from dataclasses import dataclass

from . import pool as rank_pool
from .dtensor import RUN_TIMEOUT, Run, _close, default_shapes, spawn_ranks, sweep
from .spec import mesh_of, module_constants

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

_BUG = re.compile(r"^(?P<name>.+?)_bug_(?P<what>.+)$")


# --------------------------------------------------------------------------- the packages
@dataclass
class GradSyncPackage:
    path: pathlib.Path
    family: str  # the name a bug and its ok twin share
    is_bug: bool
    axes: tuple[str, ...]
    shapes: list[tuple[int, ...]]
    twin: pathlib.Path | None = None  # the ok twin of a bug

    @property
    def name(self) -> str:
        return self.path.name


def read_package(path: pathlib.Path) -> GradSyncPackage:
    entry = (path / ENTRY).read_text(encoding="utf-8")
    axes = mesh_of(entry)
    if not axes:
        raise ValueError(f"{path.name}/{ENTRY}: no `# spmdcheck: mesh = [...]` header")
    shapes = module_constants(ast.parse(entry)).get("MESH_SHAPES")
    shapes = [tuple(s) for s in shapes] if shapes else default_shapes(axes)  # type: ignore[union-attr]
    m_bug = _BUG.match(path.name)
    if not (m_bug or path.name.endswith("_ok")):
        raise ValueError(f"{path.name}: neither <name>_ok nor <name>_bug_<what>")
    family = m_bug.group("name") if m_bug else path.name.removesuffix("_ok")
    twin = path.with_name(f"{family}_ok") if m_bug else None
    return GradSyncPackage(path, family, bool(m_bug), axes, shapes, twin)


def discover(root: pathlib.Path = PROGRAMS) -> list[GradSyncPackage]:
    return [read_package(p) for p in sorted(root.glob(f"{PREFIX}*")) if (p / "__init__.py").is_file()]


def modules(package: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)


# --------------------------------------------------------------------------- inside a rank
def rank_main(rank: int, world: int, port: int, conn) -> None:  # noqa: ANN001
    """Entry of a rank process: join the gloo group, then run the packages the parent sends."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
        conn.send_bytes(pickle.dumps({"status": "ready", "pid": os.getpid()}))
    except Exception as exc:  # noqa: BLE001
        conn.send_bytes(pickle.dumps({"status": "error", "error": {"message": f"{type(exc).__name__}: {exc}"}}))
        return
    while True:
        try:
            job = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            break
        if job == "stop":
            break
        try:
            answer = {"status": "ok", **run_package(job["root"], job["name"], job["sizes"])}
        except BaseException as exc:  # noqa: BLE001 - a program's failure is an answer, never a dead rank
            text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            answer = {
                "status": "error",
                "error": {"message": f"{type(exc).__name__}: {str(exc)[:1000]}", "traceback": text[-3000:]},
            }
        conn.send_bytes(pickle.dumps(answer))
    try:
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001, S110 - the parent is gone or stopping us
        pass


def run_package(root: str, name: str, sizes: dict[str, int]) -> dict:
    """Import the package's entry afresh, build it for ``sizes``, run one step; return this rank's parameters
    (with the tensor-parallel block each one holds, if any)."""
    import torch

    if root not in sys.path:
        sys.path.insert(0, root)
    try:
        train = importlib.import_module(f"{name}.train")
        torch.manual_seed(0)
        model, optimizer, batch = train.build(**sizes)
        train.step(model, optimizer, batch)
        params = {}
        for pname, param in model.named_parameters():
            pname = pname.removeprefix("module.")  # a DDP wrapper's prefix: the reference has none
            block = int(param.partition_dim) if getattr(param, "tensor_model_parallel", False) else None
            params[pname] = (param.detach().clone(), block)
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
            ok, diff = _close(value, expected)
            worst = max(worst, diff)
            if not ok:
                differing.append(f"rank {rank}: {name}")
    differing += [f"no rank: {name}" for name in sorted(set(want) - held)]
    return not differing, worst, differing


class Runner:
    """The pools (one per world size, started on first use), the packages copied once under names of their
    own, and the references (one per family)."""

    def __init__(self, timeout: float = RUN_TIMEOUT) -> None:
        self.timeout = timeout
        self.pools: dict[int, GradSyncPool] = {}
        self.references: dict[str, dict] = {}
        self.copies: dict[pathlib.Path, str] = {}
        self.root = tempfile.mkdtemp(prefix="spmdcheck-gradsync-")

    def close(self) -> None:
        for p in self.pools.values():
            p.close()
        self.pools.clear()
        shutil.rmtree(self.root, ignore_errors=True)

    def _pool(self, world: int) -> GradSyncPool:
        if world not in self.pools:
            pool = GradSyncPool(world)
            pool.start()
            self.pools[world] = pool
        return self.pools[world]

    def _copy(self, package: pathlib.Path) -> str:
        """The package under a name of its own: a bug and its twin share module names, never cached modules."""
        if package not in self.copies:
            name = f"gt{len(self.copies)}_{package.name}"
            shutil.copytree(package, os.path.join(self.root, name), ignore=shutil.ignore_patterns("__pycache__"))
            self.copies[package] = name
        return self.copies[package]

    def execute(self, package: pathlib.Path, axes: tuple[str, ...], shape: tuple[int, ...]) -> tuple[str, object]:
        """("ok", [answer per rank]) | ("error", message) | ("hang", message)."""
        world = math.prod(shape)
        job = {"root": self.root, "name": self._copy(package), "sizes": dict(zip(axes, shape))}
        answers, broken = self._pool(world).run([job] * world, self.timeout)
        if broken:
            missing = [i for i, a in enumerate(answers) if a is None]
            return "hang", f"no answer from rank(s) {missing} within {self.timeout:.0f}s"
        errors = [a["error"] for a in answers if a["status"] != "ok"]  # type: ignore[index]
        if errors:
            return "error", errors[0]["message"]
        return "ok", answers

    def reference(self, program: GradSyncPackage) -> dict:
        """The ok twin with every mesh dim of size 1 (one rank: the whole model, the whole batch)."""
        ok_path = program.twin if program.is_bug and program.twin is not None else program.path
        if ok_path.name not in self.references:
            status, result = self.execute(ok_path, program.axes, (1,) * len(program.axes))
            if status != "ok":
                raise RuntimeError(f"the reference run of {ok_path.name} failed: {result}")
            self.references[ok_path.name] = result[0]  # type: ignore[index]
        return self.references[ok_path.name]

    def run(self, program: GradSyncPackage, shape: tuple[int, ...]) -> Run:
        reference = self.reference(program)
        status, result = self.execute(program.path, program.axes, shape)
        if status != "ok":
            return Run(shape, status, math.inf, str(result))
        same, worst, differing = compare(reference, result, program.axes, shape)  # type: ignore[arg-type]
        return Run(shape, "match" if same else "differ", worst, differing=differing)


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.ground_truth.gradsync [FILTER...]``: one line per package and mesh shape."""
    return sweep(Runner(), discover(), list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    raise SystemExit(main())
