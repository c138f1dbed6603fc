"""Run a program on N ranks and judge it against its reference.

``Harness.judge(spec)`` runs ``spec``'s entry on one rank with the global
tensors (the reference: every mesh axis has size 1, every collective is the
identity), then on N = 2 and 4 gloo ranks with the per-rank blocks of the same
tensors, and reassembles outputs and gradients by their declared types
(layout.py). ``Harness.runtime_check(spec)`` runs the forward under
spmd-types' own runtime checker on a fake process group: the second opinion.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from .layout import (
    LayoutError,
    assemble,
    close,
    has_global_meaning,
    max_err,
    mesh_sizes,
    rank_cotangent,
    seed_for,
    seeded_randn,
    split_global,
)
from .pool import RankPool
from .spec import ProgramSpec, TypeMap, format_types, inferred_return_types

WORLDS = (2, 4)
TIMEOUT = 5.0  # seconds a program may take on every rank before it is a hang
NEW_MESH_TIMEOUT = 30.0  # first program on a pool or mesh: group creation and lazy imports


@dataclass
class RankRun:
    """The raw answers of one run: per-rank results, or why there are none."""

    world: int
    status: str  # ok | hang | crash | unsupported
    answers: list[dict | None]
    message: str = ""
    seconds: float = 0.0

    def outputs(self) -> list[list[torch.Tensor | None]]:
        return [a["outputs"] for a in self.answers]  # type: ignore[index]

    def grads(self, name: str) -> list[torch.Tensor | None]:
        return [a["grads"].get(name) for a in self.answers]  # type: ignore[index]

    @property
    def self_backward(self) -> bool:
        return any(a and a.get("self_backward") for a in self.answers)


@dataclass
class WorldVerdict:
    world: int
    outcome: str  # match | differs | hang | crash | not-runnable
    reference: str  # global | twin | invariants | none
    details: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def wrong(self) -> bool:
        """The run does not compute what the program means: differs, hangs or crashes."""
        return self.outcome in ("differs", "hang", "crash")

    def short(self) -> str:
        head = f"N={self.world}: {self.outcome}" + (f" (vs {self.reference})" if self.outcome in ("match", "differs")
                                                     else "")
        return head + (f": {self.details[0]}" if self.details else "")


@dataclass
class Verdict:
    path: str
    worlds: list[WorldVerdict]
    output_types: list[TypeMap] | None
    output_types_from: str
    not_runnable: str | None = None

    @property
    def runnable(self) -> bool:
        return self.not_runnable is None

    @property
    def matches(self) -> bool:
        return self.runnable and all(w.outcome == "match" for w in self.worlds)

    @property
    def wrong(self) -> bool:
        return self.runnable and any(w.wrong for w in self.worlds)

    def summary(self) -> str:
        if self.not_runnable:
            return f"not runnable: {self.not_runnable}"
        return "; ".join(w.short() for w in self.worlds)


@dataclass
class CheckerVerdict:
    """spmd-types' runtime checker on the program's forward (and its own backward, if any)."""

    outcome: str  # passed | raised | crash | not-runnable
    message: str = ""

    @property
    def raised(self) -> bool:
        return self.outcome == "raised"


def _types_payload(types: TypeMap) -> dict:
    return {a: (t.kind, t.dim) for a, t in types.items()}


class Harness:
    """Pools for the reference (1 rank), each N in ``worlds`` and the fake-group checker; lazily started."""

    def __init__(self, worlds: tuple[int, ...] = WORLDS, timeout: float = TIMEOUT) -> None:
        self.worlds = worlds
        self.timeout = timeout
        self.pools: dict[tuple[str, int], RankPool] = {}
        self._meshes_seen: dict[tuple[str, int], set] = {}
        self._started: dict[tuple[str, int], int] = {}
        self._job = 0
        self._twin_cache: dict = {}

    # ------------------------------------------------------------------ pools
    def pool(self, kind: str, world: int) -> RankPool:
        key = (kind, world)
        if key not in self.pools:
            p = RankPool(world, kind)
            p.start()
            self.pools[key] = p
        return self.pools[key]

    def close(self) -> None:
        for p in self.pools.values():
            p.close()
        self.pools.clear()

    def stats(self) -> dict[str, object]:
        return {f"{k}{w}": p.stats for (k, w), p in self.pools.items()}

    def _warm(self, kind: str, world: int, axes: tuple[str, ...], sizes: tuple[int, ...]) -> None:
        """Create the mesh's groups (and finish lazy imports) with a trivial program and a long timeout,
        so that the short timeout of the real program measures the program alone."""
        pool = self.pool(kind, world)
        if pool.stats.started != self._started.get((kind, world)):
            self._meshes_seen[(kind, world)] = set()
            self._started[(kind, world)] = pool.stats.started
        seen = self._meshes_seen.setdefault((kind, world), set())
        if (axes, sizes) in seen:
            return
        self._job += 1
        job = {"id": self._job, "source": "def step():\n    return None\n", "path": "<warm-up>", "entry": "step",
               "axes": axes, "sizes": sizes, "inputs": {}, "cotangents": [], "seed": 0, "mode": "run",
               "strict": False, "input_types": {}}
        answers, broken = pool.run([job] * len(pool.conns), NEW_MESH_TIMEOUT)
        if broken or any(a is None or a.get("status") != "ok" for a in answers):
            raise RuntimeError(f"the {kind} pool of world {world} cannot build the mesh {axes}={sizes}: {answers}")
        self._started[(kind, world)] = pool.stats.started
        seen.add((axes, sizes))

    def _run(self, kind: str, world: int, jobs: list[dict], axes: tuple[str, ...], sizes: tuple[int, ...]) -> RankRun:
        self._warm(kind, world, tuple(axes), tuple(sizes))
        pool = self.pool(kind, world)
        t0 = time.perf_counter()
        answers, broken = pool.run(jobs, self.timeout)
        seconds = time.perf_counter() - t0
        timeout = self.timeout
        errors = [a["error"] for a in answers if a is not None and a.get("status") == "error"]
        if errors:
            first = errors[0]
            status = "unsupported" if any(e["unsupported"] for e in errors) else "crash"
            return RankRun(world, status, answers, f"{first['type']}: {first['message'].splitlines()[0][:300]}"
                           if first["message"] else first["type"], seconds)
        if broken:
            missing = [i for i, a in enumerate(answers) if a is None]
            return RankRun(world, "hang", answers, f"no answer within {timeout:.0f}s from rank(s) {missing}", seconds)
        return RankRun(world, "ok", answers, "", seconds)

    def _job_dict(self, spec: ProgramSpec, axes, sizes, inputs: dict, cotangents: list, seed: int,  # noqa: ANN001
                  mode: str = "run") -> dict:
        self._job += 1
        return {
            "id": self._job, "source": spec.source, "path": spec.path, "entry": spec.entry,
            "axes": tuple(axes), "sizes": tuple(sizes), "inputs": inputs, "cotangents": cotangents,
            "seed": seed, "mode": mode, "strict": spec.strict,
            "input_types": {p.name: _types_payload(spec.full_types(p.types)) for p in spec.tensor_params},
        }

    # ------------------------------------------------------------------ inputs
    @staticmethod
    def global_inputs(spec: ProgramSpec, seed_key: str) -> dict[str, torch.Tensor]:
        return {p.name: seeded_randn(p.shape, "input", seed_key, p.name) for p in spec.tensor_params}

    def rank_inputs(self, spec: ProgramSpec, glob: dict[str, torch.Tensor], sizes: tuple[int, ...],
                    seed_key: str) -> list[dict[str, torch.Tensor]]:
        world = math.prod(sizes)
        per_rank: list[dict[str, torch.Tensor]] = [{} for _ in range(world)]
        for p in spec.tensor_params:
            blocks = split_global(glob[p.name], spec.full_types(p.types), spec.mesh, sizes, "input", seed_key, p.name)
            for r in range(world):
                per_rank[r][p.name] = blocks[r]
        return per_rank

    # ------------------------------------------------------------------ output types
    def output_types(self, spec: ProgramSpec, twin: ProgramSpec | None) -> tuple[list[TypeMap] | None, str]:
        """The declared type of what ``step`` returns: its annotation, else the twin's, else spmdcheck's inference
        (of the twin when there is one: a bug must be judged against what the program is meant to compute)."""
        if spec.returns is not None:
            return [spec.full_types(t) for t in spec.returns], "annotation"
        if twin is not None and twin.returns is not None:
            return [spec.full_types(t) for t in twin.returns], "twin's annotation"
        source = twin if twin is not None else spec
        inferred = inferred_return_types(source.source, source.mesh, source.entry)
        if inferred is not None:
            return [spec.full_types(t) for t in inferred], ("twin's inferred type" if twin is not None
                                                             else "inferred by spmdcheck")
        return None, "unknown"

    # ------------------------------------------------------------------ judging
    def judge(self, spec: ProgramSpec, twin: ProgramSpec | None = None, seed_key: str | None = None) -> Verdict:
        seed_key = seed_key or spec.path
        seed = seed_for("program", seed_key) % (2 ** 31)
        out_types, source = self.output_types(spec, twin)
        verdict = Verdict(spec.path, [], out_types, source)
        glob = self.global_inputs(spec, seed_key)
        ones = (1,) * len(spec.mesh)
        ref = self._run("gloo", 1, [self._job_dict(spec, spec.mesh, ones, glob, [], seed)], spec.mesh, ones)
        if ref.status == "unsupported":
            verdict.not_runnable = f"the reference run needs something the harness lacks: {ref.message}"
            return verdict
        params_meaningful = all(has_global_meaning(spec.full_types(p.types)) for p in spec.tensor_params)
        for world in self.worlds:
            verdict.worlds.append(self._judge_world(spec, twin, world, glob, ref, out_types, seed, seed_key,
                                                    params_meaningful))
            if verdict.worlds[-1].outcome == "not-runnable":
                verdict.not_runnable = verdict.worlds[-1].details[0]
        return verdict

    def _judge_world(self, spec: ProgramSpec, twin: ProgramSpec | None, world: int, glob: dict, ref: RankRun,
                     out_types: list[TypeMap] | None, seed: int, seed_key: str,
                     params_meaningful: bool) -> WorldVerdict:
        sizes = mesh_sizes(spec.mesh, world)
        try:
            inputs = self.rank_inputs(spec, glob, sizes, seed_key)
        except LayoutError as exc:
            return WorldVerdict(world, "not-runnable", "none", [f"inputs do not split on {sizes}: {exc}"])
        if ref.status == "ok":
            ref_outs = ref.answers[0]["outputs"]  # type: ignore[index]
            self_backward = ref.self_backward
        else:
            ref_outs, self_backward = [], False
        types_known = out_types is not None and len(out_types) == len(ref_outs)
        outs_meaningful = types_known and all(has_global_meaning(t) for t in out_types)  # type: ignore[union-attr]
        global_ref = ref.status == "ok" and params_meaningful and (outs_meaningful or self_backward)
        cotangents: list[list] = [[] for _ in range(world)]
        if ref.status == "ok" and types_known and not self_backward:
            for i, (o, t) in enumerate(zip(ref_outs, out_types)):  # type: ignore[arg-type]
                if o is None or not o.is_floating_point():
                    for r in range(world):
                        cotangents[r].append(None)
                    continue
                g = rank_cotangent(tuple(o.shape), seed, i, 0)  # what the reference rank drew
                if has_global_meaning(t):
                    try:
                        pieces = split_global(g, {a: x.grad for a, x in t.items()}, spec.mesh, sizes,
                                              "cotangent", seed_key, i)
                    except LayoutError:
                        pieces = [None] * world
                else:
                    pieces = [None] * world
                for r in range(world):
                    cotangents[r].append(pieces[r])
        jobs = [self._job_dict(spec, spec.mesh, sizes, inputs[r], cotangents[r], seed) for r in range(world)]
        run = self._run("gloo", world, jobs, spec.mesh, sizes)
        if run.status == "unsupported":
            return WorldVerdict(world, "not-runnable", "none", [f"needs something the harness lacks: {run.message}"],
                                run.seconds)
        if run.status == "hang":
            return WorldVerdict(world, "hang", "none", [run.message], run.seconds)
        if run.status == "crash":
            return WorldVerdict(world, "crash", "none", [run.message], run.seconds)
        if ref.status != "ok":
            # runs on N ranks but not on one: the reference itself is broken
            return WorldVerdict(world, "crash", "none", [f"the one-rank reference fails: {ref.message}"], run.seconds)

        details: list[str] = []
        reference = "global" if global_ref else "invariants"
        twin_run: RankRun | None = None
        if not global_ref and twin is not None:
            twin_run = self._twin_run(twin, world, sizes, inputs, cotangents, seed, seed_key)
            if twin_run is not None and twin_run.status == "ok":
                reference = "twin"
        n_out = len(run.answers[0]["outputs"])  # type: ignore[index]
        if ref_outs is not None and n_out != len(ref_outs):
            details.append(f"returns {n_out} values on {world} ranks, {len(ref_outs)} on one")
        # outputs
        for i in range(min(n_out, len(ref_outs))):
            per_rank = [o[i] for o in run.outputs()]
            if any(x is None for x in per_rank):
                continue
            if types_known:
                t = out_types[i]  # type: ignore[index]
                asm = assemble(per_rank, t, spec.mesh, sizes, f"output {i} {format_types(t)}")
                details += asm.problems
                if global_ref and asm.value is not None and ref_outs[i] is not None and has_global_meaning(t):
                    if not close(asm.value, ref_outs[i]):
                        details.append(f"output {i} {format_types(t)} != reference ({max_err(asm.value, ref_outs[i])})")
            if reference == "twin":
                twin_outs = twin_run.outputs()  # type: ignore[union-attr]
                for r in range(world):
                    a = per_rank[r]
                    b = twin_outs[r][i] if i < len(twin_outs[r]) else None
                    if b is not None and not close(a, b):
                        details.append(f"output {i} on rank {r} != the correct twin's ({max_err(a, b)})")
                        break
        # gradients
        for p in spec.tensor_params:
            if not glob[p.name].is_floating_point():
                continue
            t = spec.full_types(p.types)
            gt = {a: x.grad for a, x in t.items()}
            per_rank = [g if g is not None else torch.zeros_like(inputs[r][p.name])
                        for r, g in enumerate(run.grads(p.name))]
            asm = assemble(per_rank, gt, spec.mesh, sizes, f"grad of {p.name} {format_types(gt)}")
            details += asm.problems
            if global_ref and asm.value is not None:
                want = ref.grads(p.name)[0]
                want = want if want is not None else torch.zeros_like(glob[p.name])
                if not close(asm.value, want):
                    details.append(f"grad of {p.name} {format_types(gt)} != reference ({max_err(asm.value, want)})")
            if reference == "twin":
                for r, (a, b) in enumerate(zip(per_rank, twin_run.grads(p.name))):  # type: ignore[union-attr]
                    b = b if b is not None else torch.zeros_like(inputs[r][p.name])
                    if not close(a, b):
                        details.append(f"grad of {p.name} on rank {r} != the correct twin's ({max_err(a, b)})")
                        break
        return WorldVerdict(world, "differs" if details else "match", reference, details, run.seconds)

    def _twin_run(self, twin: ProgramSpec, world: int, sizes, inputs, cotangents, seed: int,  # noqa: ANN001
                  seed_key: str) -> RankRun | None:
        names = {p.name for p in twin.tensor_params}
        if any(set(inp) != names for inp in inputs):
            return None
        key = (twin.path, world, seed_key)
        if key not in self._twin_cache:
            jobs = [self._job_dict(twin, twin.mesh, sizes, inputs[r], cotangents[r], seed) for r in range(world)]
            self._twin_cache[key] = self._run("gloo", world, jobs, twin.mesh, sizes)
        return self._twin_cache[key]

    # ------------------------------------------------------------------ second opinion
    def runtime_check(self, spec: ProgramSpec, seed_key: str | None = None) -> CheckerVerdict:
        """Run the forward (and the program's own backward, if any) under ``spmd_types.checker.typecheck()``
        on a fake process group whose every axis has size 2 (size-1 axes would be dropped unchecked)."""
        seed_key = seed_key or spec.path
        sizes = (2,) * len(spec.mesh)
        world = 2 ** len(spec.mesh)
        glob = self.global_inputs(spec, seed_key)
        try:
            inputs = self.rank_inputs(spec, glob, sizes, seed_key)[0]
        except LayoutError as exc:
            return CheckerVerdict("not-runnable", str(exc))
        job = self._job_dict(spec, spec.mesh, sizes, inputs, [], seed_for("program", seed_key) % (2 ** 31),
                             mode="typecheck")
        run = self._run("fake", world, [job], spec.mesh, sizes)
        if run.status == "ok":
            return CheckerVerdict("passed")
        if run.status == "hang":
            return CheckerVerdict("crash", run.message)
        err = run.answers[0]["error"]  # type: ignore[index]
        if err["spmd_type_error"]:
            return CheckerVerdict("raised", run.message)
        if run.status == "unsupported":
            return CheckerVerdict("not-runnable", run.message)
        return CheckerVerdict("crash", run.message)
