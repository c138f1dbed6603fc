"""What the twin-program runners share (``dtensor.py``: the DTensor fixtures; ``gradsync.py``: the
gradient-synchronisation packages): a program and its ok twin, named ``<name>_ok`` and ``<name>_bug_<what>``,
run on gloo CPU ranks and compared with the ok twin on one rank.

Here: reading a twin's name and mesh (``read_twin``), the rank processes' loop (``serve_jobs``: join the gloo
group once, then answer job after job), starting a pool of them (``spawn_ranks``), the runner that keeps
the pools and the one-rank references (``TwinRunner``: a subclass says what a job is and how answers
compare), the tolerance (``close``) and the sweep that prints every run (``sweep``).
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
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

from . import pool as rank_pool
from .spec import mesh_of, module_constants

RTOL, ATOL = 1e-4, 1e-5  # atol is scaled by the reference's largest magnitude (at least 1)
RUN_TIMEOUT = 60.0

_BUG = re.compile(r"^(?P<name>.+?)_bug_(?P<what>.+)$")
_OK = re.compile(r"^(?P<name>.+)_ok$")


# --------------------------------------------------------------------------- the programs
@dataclass
class TwinProgram:
    """A program (a file, or a package folder) of a bug/ok pair, and the mesh shapes it runs on."""

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


def read_twin(path: pathlib.Path, entry: pathlib.Path) -> TwinProgram:
    """The program at `path` (a `.py` file, or a package folder whose module `entry` holds the headers): its
    mesh from the `# spmdcheck: mesh = [...]` header, its shapes from an optional `MESH_SHAPES`, its family
    and twin from its name."""
    text = entry.read_text(encoding="utf-8")
    axes = mesh_of(text)
    if not axes:
        raise ValueError(f"{entry.relative_to(path.parent)}: no `# spmdcheck: mesh = [...]` header")
    shapes = module_constants(ast.parse(text)).get("MESH_SHAPES")
    shapes = [tuple(s) for s in shapes] if shapes else default_shapes(axes)  # type: ignore[union-attr]
    suffix = path.suffix  # ".py" for a file, none for a package
    stem = path.name.removesuffix(suffix)
    m_bug, m_ok = _BUG.match(stem), _OK.match(stem)
    if not (m_bug or m_ok):
        raise ValueError(f"{path.name}: neither <name>_ok{suffix} nor <name>_bug_<what>{suffix}")
    family = (m_bug or m_ok).group("name")  # type: ignore[union-attr]
    twin = path.with_name(f"{family}_ok{suffix}") if m_bug else None
    return TwinProgram(path, family, bool(m_bug), axes, shapes, twin)


# --------------------------------------------------------------------------- inside a rank
def serve_jobs(rank: int, world: int, port: int, conn, answer: Callable[[dict], dict]) -> None:  # noqa: ANN001
    """A rank process's life: join the gloo group, then answer each job the parent sends with `answer(job)`
    (a program's failure is an "error" answer, never a dead rank) until it says "stop"."""
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
    while True:
        try:
            job = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            break
        if job == "stop":
            break
        try:
            reply = {"status": "ok", **answer(job)}
        except BaseException as exc:  # noqa: BLE001 - a program's failure is an answer, never a dead rank
            text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            reply = {
                "status": "error",
                "error": {"message": f"{type(exc).__name__}: {str(exc)[:1000]}", "traceback": text[-3000:]},
            }
        conn.send_bytes(pickle.dumps(reply))
    try:
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001, S110 - the parent is gone or stopping us
        pass


# --------------------------------------------------------------------------- the pools
def spawn_ranks(pool: rank_pool.RankPool, ctx, target, label: str) -> None:  # noqa: ANN001
    """Start `pool`'s ranks running `target(rank, world, port, conn)` (the DTensor and gradient-synchronisation
    pools start alike)."""
    pool.spawn(ctx, target, lambda rank, port: (rank, pool.world, port), pool.world, label)


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


def close(got, want) -> tuple[bool, float]:  # noqa: ANN001
    """Whether two tensors (or two Nones) agree within the tolerance, and their largest absolute difference."""
    import torch

    if got is None or want is None:
        return got is None and want is None, 0.0 if got is None and want is None else math.inf
    if got.shape != want.shape:
        return False, math.inf
    diff = (got.double() - want.double()).abs().max().item() if got.numel() else 0.0
    scale = max(1.0, want.abs().max().item() if want.numel() else 0.0)
    return bool(torch.allclose(got, want, rtol=RTOL, atol=ATOL * scale)), diff


class TwinRunner:
    """The pools (one per world size, started on first use) and the references (the ok twin with every mesh
    dim of size 1, one per twin). A subclass names its `pool_class` and says what a job is (`job`) and how a
    run's answers compare with the reference's (`compare`)."""

    pool_class: type[rank_pool.RankPool]

    def __init__(self, timeout: float = RUN_TIMEOUT) -> None:
        self.timeout = timeout
        self.pools: dict[int, rank_pool.RankPool] = {}
        self.references: dict[tuple[str, tuple[int, ...]], dict] = {}

    def close(self) -> None:
        for p in self.pools.values():
            p.close()
        self.pools.clear()

    def _pool(self, world: int) -> rank_pool.RankPool:
        if world not in self.pools:
            pool = self.pool_class(world)
            pool.start()
            self.pools[world] = pool
        return self.pools[world]

    def job(self, path: pathlib.Path, axes: tuple[str, ...], shape: tuple[int, ...]) -> dict:
        """What each rank is sent to run `path` on a mesh of `shape`."""
        raise NotImplementedError

    def compare(
        self, reference: dict, answers: list[dict], program: TwinProgram, shape: tuple[int, ...]
    ) -> tuple[bool, float, list[str]]:
        """Every rank's answer against the reference: (all close, max abs diff, what differs)."""
        raise NotImplementedError

    def execute(self, path: pathlib.Path, axes: tuple[str, ...], shape: tuple[int, ...]) -> tuple[str, object]:
        """("ok", [answer per rank]) | ("error", message) | ("hang", message)."""
        world = math.prod(shape)
        job = self.job(path, axes, shape)
        answers, broken = self._pool(world).run([job] * world, self.timeout)
        if broken:
            missing = [i for i, a in enumerate(answers) if a is None]
            return "hang", f"no answer from rank(s) {missing} within {self.timeout:.0f}s"
        errors = [a["error"] for a in answers if a["status"] != "ok"]  # type: ignore[index]
        if errors:
            return "error", errors[0]["message"]
        return "ok", answers

    def reference(self, program: TwinProgram) -> dict:
        """The ok twin with every mesh dim of size 1 (one rank, where every collective is an identity)."""
        ok_path = program.twin if program.is_bug and program.twin is not None else program.path
        shape = (1,) * len(program.axes)
        key = (str(ok_path), shape)
        if key not in self.references:
            status, result = self.execute(ok_path, program.axes, shape)
            if status != "ok":
                raise RuntimeError(f"the reference run of {ok_path.name} failed: {result}")
            self.references[key] = result[0]  # type: ignore[index]
        return self.references[key]

    def run(self, program: TwinProgram, shape: tuple[int, ...]) -> Run:
        reference = self.reference(program)
        status, result = self.execute(program.path, program.axes, shape)
        if status != "ok":
            return Run(shape, status, math.inf, str(result))
        same, worst, differing = self.compare(reference, result, program, shape)  # type: ignore[arg-type]
        return Run(shape, "match" if same else "differ", worst, differing=differing)


def sweep(runner: TwinRunner, programs: list[TwinProgram], filters: list[str]) -> int:
    """Run every program (matching a filter) on one rank and on each of its mesh shapes, print one line per
    program and run; 1 when a bug twin matches, an ok twin differs or a one-rank run differs."""
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
