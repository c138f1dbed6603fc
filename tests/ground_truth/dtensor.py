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
"""

from __future__ import annotations

import ast
import datetime
import logging
import math
import os
import pathlib
import pickle
import re
import sys
import time
import traceback
import types
import warnings
from dataclasses import dataclass, field

from . import pool as rank_pool
from .spec import mesh_of, module_constants

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "dtensor"
PENDING = re.compile(r"^#\s*spmdcheck-pending:\s*issue 22\s*$")
RTOL, ATOL = 1e-4, 1e-5  # atol is scaled by the reference's largest magnitude (at least 1)
RUN_TIMEOUT = 60.0

_BUG = re.compile(r"^(?P<name>.+?)_bug_(?P<what>.+)\.py$")
_OK = re.compile(r"^(?P<name>.+)_ok\.py$")


# --------------------------------------------------------------------------- the programs
@dataclass
class DTensorProgram:
    path: pathlib.Path
    family: str  # the name a bug and its ok twin share
    is_bug: bool
    axes: tuple[str, ...]
    shapes: list[tuple[int, ...]]
    twin: pathlib.Path | None = None  # the ok twin of a bug

    @property
    def name(self) -> str:
        return self.path.name


def default_shapes(axes: tuple[str, ...]) -> list[tuple[int, ...]]:
    return [(2,), (4,)] if len(axes) == 1 else [(1,) * (len(axes) - 1) + (2,), (2,) * len(axes)]


def read_program(path: pathlib.Path) -> DTensorProgram:
    text = path.read_text(encoding="utf-8")
    axes = mesh_of(text)
    if not axes:
        raise ValueError(f"{path.name}: no `# spmdcheck: mesh = [...]` header")
    shapes = module_constants(ast.parse(text)).get("MESH_SHAPES")
    shapes = [tuple(s) for s in shapes] if shapes else default_shapes(axes)  # type: ignore[union-attr]
    m_bug, m_ok = _BUG.match(path.name), _OK.match(path.name)
    if not (m_bug or m_ok):
        raise ValueError(f"{path.name}: neither <name>_ok.py nor <name>_bug_<what>.py")
    family = (m_bug or m_ok).group("name")  # type: ignore[union-attr]
    twin = path.with_name(f"{family}_ok.py") if m_bug else None
    return DTensorProgram(path, family, bool(m_bug), axes, shapes, twin)


def discover(root: pathlib.Path = FIXTURES) -> list[DTensorProgram]:
    return [read_program(p) for p in sorted(root.glob("*.py"))]


# --------------------------------------------------------------------------- inside a rank
def rank_main(rank: int, world: int, port: int, conn) -> None:  # noqa: ANN001
    """Entry of a rank process: join the gloo group, then run the programs the parent sends."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)  # torch logs a traceback per rank for every sharding error a bug twin raises
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    try:
        dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
        conn.send_bytes(pickle.dumps({"status": "ready", "pid": os.getpid()}))
    except Exception as exc:  # noqa: BLE001
        conn.send_bytes(pickle.dumps({"status": "error", "error": {"message": f"{type(exc).__name__}: {exc}"}}))
        return
    meshes: dict = {}
    while True:
        try:
            job = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            break
        if job == "stop":
            break
        try:
            key = (tuple(job["axes"]), tuple(job["shape"]))
            if key not in meshes:
                from torch.distributed.device_mesh import init_device_mesh

                meshes[key] = init_device_mesh("cpu", key[1], mesh_dim_names=key[0])
            answer = {"status": "ok", **run_program(job["source"], job["path"], meshes[key], job["id"])}
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


def spawn_ranks(pool: rank_pool.RankPool, ctx, target, label: str) -> None:  # noqa: ANN001
    """Start `pool`'s ranks running `target(rank, world, port, conn)` and wait until each says it is ready (the
    DTensor and gradient-synchronisation pools start alike)."""
    t0 = time.perf_counter()
    port = rank_pool.free_port()
    pool.procs, pool.conns = [], []
    for rank in range(pool.world):
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=target,
            args=(rank, pool.world, port, child),
            daemon=True,
            name=f"gt-{label.lower()}{pool.world}-r{rank}",
        )
        proc.start()
        child.close()
        pool.procs.append(proc)
        pool.conns.append(parent)
    deadline = time.monotonic() + pool.start_timeout
    for rank, conn in enumerate(pool.conns):
        left = deadline - time.monotonic()
        if left <= 0 or not conn.poll(left):
            pool.close()
            raise RuntimeError(f"rank {rank} of the {label} pool (world {pool.world}) did not start")
        msg = pickle.loads(conn.recv_bytes())
        if msg.get("status") != "ready":
            pool.close()
            raise RuntimeError(f"rank {rank} failed to start: {msg.get('error', {}).get('message')}")
    pool.stats.started += 1
    pool.stats.start_seconds += time.perf_counter() - t0


# --------------------------------------------------------------------------- judging
@dataclass
class Run:
    """One program on one mesh shape: "match", "differ", "error" or "hang" against the reference."""

    shape: tuple[int, ...]
    outcome: str
    max_abs: float = 0.0
    detail: str = ""
    differing: list[str] = field(default_factory=list)  # which values differ (rank: name)

    def summary(self) -> str:
        size = "x".join(map(str, self.shape))
        if self.outcome in ("match", "differ"):
            extra = f", e.g. {', '.join(self.differing[:3])}" if self.differing else ""
            return f"{size}: {self.outcome} (max abs diff {self.max_abs:.3g}{extra})"
        return f"{size}: {self.outcome} ({self.detail[:300]})"


def _close(got, want) -> tuple[bool, float]:  # noqa: ANN001
    import torch

    if got is None or want is None:
        return got is None and want is None, 0.0 if got is None and want is None else math.inf
    if got.shape != want.shape:
        return False, math.inf
    diff = (got.double() - want.double()).abs().max().item() if got.numel() else 0.0
    scale = max(1.0, want.abs().max().item() if want.numel() else 0.0)
    return bool(torch.allclose(got, want, rtol=RTOL, atol=ATOL * scale)), diff


def compare(reference: dict, answers: list[dict]) -> tuple[bool, float, list[str]]:
    """Every rank's loss and gradients against the reference: (all close, max abs diff, what differs)."""
    worst, differing = 0.0, []
    want = {"loss": reference["loss"], **reference["grads"]}
    for rank, answer in enumerate(answers):
        got = {"loss": answer["loss"], **answer["grads"]}
        for key in sorted(set(want) | set(got)):
            ok, diff = _close(got.get(key), want.get(key))
            worst = max(worst, diff)
            if not ok:
                differing.append(f"rank {rank}: {key}")
    return not differing, worst, differing


class Runner:
    """The pools (one per world size, started on first use) and the references (one per family)."""

    def __init__(self, timeout: float = RUN_TIMEOUT) -> None:
        self.timeout = timeout
        self.pools: dict[int, DTensorPool] = {}
        self.references: dict[tuple[str, tuple[int, ...]], dict] = {}
        self._jobs = 0

    def close(self) -> None:
        for p in self.pools.values():
            p.close()
        self.pools.clear()

    def _pool(self, world: int) -> DTensorPool:
        if world not in self.pools:
            pool = DTensorPool(world)
            pool.start()
            self.pools[world] = pool
        return self.pools[world]

    def execute(self, path: pathlib.Path, axes: tuple[str, ...], shape: tuple[int, ...]) -> tuple[str, object]:
        """("ok", [answer per rank]) | ("error", message) | ("hang", message)."""
        world = math.prod(shape)
        self._jobs += 1
        job = {
            "source": path.read_text(encoding="utf-8"),
            "path": str(path),
            "axes": list(axes),
            "shape": list(shape),
            "id": self._jobs,
        }
        answers, broken = self._pool(world).run([job] * world, self.timeout)
        if broken:
            missing = [i for i, a in enumerate(answers) if a is None]
            return "hang", f"no answer from rank(s) {missing} within {self.timeout:.0f}s"
        errors = [a["error"] for a in answers if a["status"] != "ok"]  # type: ignore[index]
        if errors:
            return "error", errors[0]["message"]
        return "ok", answers

    def reference(self, program: DTensorProgram) -> dict:
        """The ok twin on a mesh of the same dims with every dim of size 1 (rank 0's answer)."""
        ok_path = program.twin if program.is_bug and program.twin is not None else program.path
        shape = (1,) * len(program.axes)
        key = (str(ok_path), shape)
        if key not in self.references:
            status, result = self.execute(ok_path, program.axes, shape)
            if status != "ok":
                raise RuntimeError(f"the reference run of {ok_path.name} failed: {result}")
            self.references[key] = result[0]  # type: ignore[index]
        return self.references[key]

    def run(self, program: DTensorProgram, shape: tuple[int, ...]) -> Run:
        reference = self.reference(program)
        status, result = self.execute(program.path, program.axes, shape)
        if status != "ok":
            return Run(shape, status, math.inf, str(result))
        same, worst, differing = compare(reference, result)  # type: ignore[arg-type]
        return Run(shape, "match" if same else "differ", worst, differing=differing)


def sweep(runner: Runner, programs: list, filters: list[str]) -> int:
    """Run every program (matching a filter) on one rank and on each of its mesh shapes, print one line per
    program and run; 1 when a bug twin matches, an ok twin differs or a one-rank run differs. The gradient-
    synchronisation runner (gradsync.py) sweeps its packages with it too."""
    t0 = time.perf_counter()
    bad = 0
    try:
        for program in programs:
            if filters and not any(f in program.name for f in filters):
                continue
            shapes = [(1,) * len(program.axes), *program.shapes]
            runs = [runner.run(program, s) for s in shapes]
            expected = [r.outcome == "match" for r in runs[:1]] + [
                (r.outcome != "match") if program.is_bug else (r.outcome == "match") for r in runs[1:]
            ]
            bad += not all(expected)
            flag = "ok  " if all(expected) else "FAIL"
            print(f"{flag} {program.name}", flush=True)
            for r in runs:
                print(f"       {r.summary()}", flush=True)
    finally:
        runner.close()
    print(f"{time.perf_counter() - t0:.1f}s", flush=True)
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.ground_truth.dtensor [FILTER...]``: one line per program and mesh shape."""
    return sweep(Runner(), discover(), list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    raise SystemExit(main())
