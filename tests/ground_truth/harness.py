"""Run a program on N ranks and judge it against its reference.

``Harness.judge(spec, twin)`` runs ``spec``'s entry on one rank with the global
tensors (the reference: every mesh axis has size 1, every collective is the
identity), then on N = 2 and 4 gloo ranks with the per-rank blocks of the same
tensors, reassembles outputs and gradients by their declared types
(layout.py) and compares. A bug fixture is compared with the global reference
when its correct twin matches that reference (the reference is valid for the
family), otherwise with the twin's own N-rank run. ``Harness.runtime_check``
runs the forward under spmd-types' runtime checker on a fake process group.
"""
from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field

import torch

from .layout import (
    Assembly,
    LayoutError,
    assemble,
    close,
    coords_of,
    has_global_meaning,
    max_err,
    mesh_sizes,
    rank_cotangent,
    seed_for,
    seeded_randn,
    split_global,
)
from .pool import RankPool
from .spec import PACKAGE_ENTRY, AxisType, ProgramSpec, TypeMap, format_types, inferred_return_types

WORLDS = (2, 4)
# A program slower than this on any rank hangs. Generous: under pytest-xdist the ranks share two cores with
# another worker's tests, and a correct program must never be judged a hang by load (5 s flaked there).
TIMEOUT = float(os.environ.get("GROUND_TRUTH_TIMEOUT", "15"))
NEW_MESH_TIMEOUT = 60.0  # the warm-up of a new pool or mesh: group creation and lazy imports
LOW_PRECISION = ("bfloat16", "float16", ".half()")
# The first program on a mesh pays for group creation and lazy initialisation (autograd threads, the
# collectives' first use): a warm-up with a long timeout takes that cost off the real programs' clock.
WARM_UP = """
import torch
import spmd_types as spmd


def step():
    x = torch.ones(2, 4, requires_grad=True)
    y = x * 1.0
    for axis in spmd.current_mesh_all_names():
        y = spmd.all_reduce(y, axis, src=spmd.P, dst=spmd.R)
    (torch.tanh(y) * y).sum().backward()
    return None
"""


@dataclass
class RankRun:
    """The raw answers of one run: per-rank results, or why there are none."""

    world: int
    status: str  # ok | hang | crash | unsupported
    answers: list[dict | None]
    message: str = ""
    seconds: float = 0.0

    @property
    def self_backward(self) -> bool:
        return any(a and a.get("self_backward") for a in self.answers)


@dataclass
class Execution:
    """One program run on one world, with its values reassembled by their types."""

    spec: ProgramSpec
    world: int
    sizes: tuple[int, ...]
    run: RankRun
    inputs: list[dict[str, torch.Tensor]] = field(default_factory=list)
    outputs: list[Assembly] = field(default_factory=list)
    grads: dict[str, Assembly] = field(default_factory=dict)
    per_rank_outputs: list[list[torch.Tensor | None]] = field(default_factory=list)
    per_rank_grads: dict[str, list[torch.Tensor]] = field(default_factory=dict)
    grad_types: dict[str, TypeMap] = field(default_factory=dict)
    skipped_grads: list[str] = field(default_factory=list)  # inputs mutated in place: no gradient to speak of

    @property
    def ok(self) -> bool:
        return self.run.status == "ok"

    def problems(self) -> list[str]:
        return [p for a in [*self.outputs, *self.grads.values()] for p in a.problems]


@dataclass
class WorldVerdict:
    world: int
    outcome: str  # match | differs | hang | crash | not-runnable
    reference: str  # global | twin | invariants | none
    details: list[str] = field(default_factory=list)
    seconds: float = 0.0
    scaled_only: bool = False  # every difference from the global reference is a factor of axis sizes

    @property
    def wrong(self) -> bool:
        """The run does not compute what the program means: differs, hangs or crashes."""
        return self.outcome in ("differs", "hang", "crash")

    def short(self) -> str:
        head = f"N={self.world}: {self.outcome}"
        if self.outcome in ("match", "differs"):
            head += f" (vs {self.reference})"
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
    def matches_up_to_scale(self) -> bool:
        return self.runnable and all(w.outcome == "match" or w.scaled_only for w in self.worlds)

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

    outcome: str  # passed | raised (SpmdTypeError, or spmd_types' API rejects the call) | crash | not-runnable
    message: str = ""

    @property
    def raised(self) -> bool:
        return self.outcome == "raised"


def _types_payload(types: TypeMap) -> dict:
    return {a: (t.kind, t.dim) for a, t in types.items()}


def _grad_types(types: TypeMap) -> TypeMap:
    return {a: t.grad for a, t in types.items()}


class Harness:
    """Pools for the reference (1 rank), each N in ``worlds`` and the fake-group checker; lazily started."""

    def __init__(self, worlds: tuple[int, ...] = WORLDS, timeout: float = TIMEOUT) -> None:
        self.worlds = worlds
        self.timeout = timeout
        self.pools: dict[tuple[str, int], RankPool] = {}
        self._meshes_seen: dict[tuple[str, int], set] = {}
        self._started: dict[tuple[str, int], int] = {}
        self._job = 0
        self._cache: dict = {}
        self._package_root: str | None = None

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
        if self._package_root is not None:
            shutil.rmtree(self._package_root, ignore_errors=True)
            self._package_root = None

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
        job = {"id": self._job, "source": WARM_UP, "path": "<warm-up>", "entry": "step",
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
        errors = [a["error"] for a in answers if a is not None and a.get("status") == "error"]
        if errors:
            first = errors[0]
            status = "unsupported" if any(e["unsupported"] for e in errors) else "crash"
            line = first["message"].splitlines()[0][:300] if first["message"] else ""
            return RankRun(world, status, answers, f"{first['type']}: {line}", seconds)
        if broken:
            missing = [i for i, a in enumerate(answers) if a is None]
            return RankRun(world, "hang", answers, f"no answer within {self.timeout:.0f}s from rank(s) {missing}",
                           seconds)
        return RankRun(world, "ok", answers, "", seconds)

    def _job_dict(self, spec: ProgramSpec, sizes, inputs: dict, cotangents: list, seed: int,  # noqa: ANN001
                  mode: str = "run") -> dict:
        self._job += 1
        return {
            "id": self._job, "source": spec.source, "path": spec.path, "entry": spec.entry,
            "axes": tuple(spec.mesh), "sizes": tuple(sizes), "inputs": inputs, "cotangents": cotangents,
            "seed": seed, "mode": mode, "strict": spec.strict,
            # what the runtime checker is told: the declared axes only (strict mode must see a missing axis)
            "input_types": {p.name: _types_payload(p.types) for p in spec.tensor_params if p.types is not None},
            "package": self._package(spec),
        }

    def _package(self, spec: ProgramSpec) -> dict | None:
        """A package program is copied once, under a name of its own, into a directory the ranks put on
        sys.path: each job imports it afresh (the ranks drop its modules afterwards), and two programs with
        the same module names never share a cached module."""
        if spec.package_dir is None:
            return None
        key = ("package", spec.package_dir)
        if key not in self._cache:
            if self._package_root is None:
                self._package_root = tempfile.mkdtemp(prefix="spmdcheck-gt-")
            name = f"gt{len(self._cache)}_{os.path.basename(os.path.normpath(spec.package_dir))}"
            shutil.copytree(spec.package_dir, os.path.join(self._package_root, name),
                            ignore=shutil.ignore_patterns("__pycache__"))
            self._cache[key] = {"root": self._package_root, "name": name,
                                "entry": PACKAGE_ENTRY.removesuffix(".py")}
        return self._cache[key]

    # ------------------------------------------------------------------ inputs and types
    @staticmethod
    def global_inputs(spec: ProgramSpec, seed_key: str) -> dict[str, torch.Tensor]:
        return {p.name: seeded_randn(p.shape, "input", seed_key, p.name) for p in spec.tensor_params}

    @staticmethod
    def rank_inputs(spec: ProgramSpec, glob: dict[str, torch.Tensor], sizes: tuple[int, ...],
                    seed_key: str) -> list[dict[str, torch.Tensor]]:
        world = math.prod(sizes)
        per_rank: list[dict[str, torch.Tensor]] = [{} for _ in range(world)]
        for p in spec.tensor_params:
            blocks = split_global(glob[p.name], spec.full_types(p.types), spec.mesh, sizes, "input", seed_key, p.name)
            for r in range(world):
                per_rank[r][p.name] = blocks[r]
        return per_rank

    def output_types(self, spec: ProgramSpec, twin: ProgramSpec | None) -> tuple[list[TypeMap] | None, str]:
        """The declared type of what ``step`` returns: its annotation, else the twin's, else spmdcheck's inference
        (of the twin when there is one: a bug is judged by what the program is meant to compute)."""
        if spec.returns is not None:
            return [spec.full_types(t) for t in spec.returns], "annotation"
        if twin is not None and twin.returns is not None:
            return [spec.full_types(t) for t in twin.returns], "twin's annotation"
        source = twin if twin is not None else spec
        key = ("inferred", source.path)
        if key not in self._cache:
            self._cache[key] = inferred_return_types(source.source, source.mesh, source.entry)
        inferred = self._cache[key]
        if inferred is not None:
            return [spec.full_types(t) for t in inferred], ("twin's inferred type" if twin is not None
                                                             else "inferred by spmdcheck")
        return None, "unknown"

    # ------------------------------------------------------------------ executing
    def execute(self, spec: ProgramSpec, world: int, seed_key: str, out_types: list[TypeMap] | None) -> Execution:
        """Run ``spec`` on ``world`` ranks (1: the reference) and reassemble what it computed. Cached."""
        key = ("exec", spec.path, world, seed_key, repr(out_types))
        if key in self._cache:
            return self._cache[key]
        seed = seed_for("program", seed_key) % (2 ** 31)
        sizes = mesh_sizes(spec.mesh, world)
        glob = self.global_inputs(spec, seed_key)
        try:
            inputs = self.rank_inputs(spec, glob, sizes, seed_key)
        except LayoutError as exc:
            ex = Execution(spec, world, sizes, RankRun(world, "unsupported", [], f"inputs do not split on {sizes}: "
                                                       f"{exc}"))
            self._cache[key] = ex
            return ex
        ref = None if world == 1 else self.execute(spec, 1, seed_key, out_types)
        cotangents = self._cotangents(spec, world, sizes, out_types, ref, seed, seed_key)
        jobs = [self._job_dict(spec, sizes, inputs[r], cotangents[r], seed) for r in range(world)]
        run = self._run("gloo", world, jobs, spec.mesh, sizes)
        ex = Execution(spec, world, sizes, run, inputs)
        if run.status == "ok":
            self._assemble(ex, out_types)
        self._cache[key] = ex
        return ex

    def _cotangents(self, spec: ProgramSpec, world: int, sizes, out_types, ref: Execution | None,  # noqa: ANN001
                    seed: int, seed_key: str) -> list[list]:
        """Per rank, per output: the cotangent (a tensor), or a recipe the rank draws from.

        With a declared output type of global meaning, the cotangent is the reference's random cotangent g
        split by the gradient type (R output: P pieces summing to g; P output: g on every rank; S(d): blocks).
        Otherwise each rank draws a random tensor of its local shape, equal on the ranks of an axis where the
        cotangent is R or I (on every rank when the output type is unknown), so that the cross-rank invariants
        of the gradients stay testable."""
        n_out = len(out_types) if out_types is not None else 8
        per_rank: list[list] = [[] for _ in range(world)]
        ref_outs = ref.per_rank_outputs[0] if ref is not None and ref.ok and ref.per_rank_outputs else None
        for i in range(n_out):
            t = out_types[i] if out_types is not None else None
            pieces = None
            if world == 1:
                pieces = [None]
            elif t is not None and has_global_meaning(t) and ref_outs is not None and i < len(ref_outs) \
                    and ref_outs[i] is not None and ref_outs[i].is_floating_point():
                g = rank_cotangent(tuple(ref_outs[i].shape), seed, i, 0)  # what the reference drew
                try:
                    pieces = split_global(g, _grad_types(t), spec.mesh, sizes, "cotangent", seed_key, i)
                except LayoutError:
                    pieces = None
            if pieces is None:
                pieces = []
                for r in range(world):
                    coords = coords_of(r, sizes)
                    # equal on the ranks of an axis where the cotangent is R or I; with no known output type
                    # equal everywhere, which is a valid cotangent for every type (P pieces, R, I, V and S alike)
                    same = tuple(-1 if t is None or t[a].grad.kind in ("R", "I") else c
                                 for a, c in zip(spec.mesh, coords))
                    pieces.append({"seed_parts": ("cotangent-recipe", seed, i, same)})
            for r in range(world):
                per_rank[r].append(pieces[r])
        return per_rank

    def _assemble(self, ex: Execution, out_types: list[TypeMap] | None) -> None:
        spec, sizes = ex.spec, ex.sizes
        answers = ex.run.answers
        n_out = len(answers[0]["outputs"])  # type: ignore[index]
        ex.per_rank_outputs = [a["outputs"] for a in answers]  # type: ignore[index]
        for i in range(n_out):
            per_rank = [o[i] if i < len(o) else None for o in ex.per_rank_outputs]
            if any(x is None for x in per_rank):
                ex.outputs.append(Assembly(None, [], True))
                continue
            if out_types is None or i >= len(out_types):
                ex.outputs.append(Assembly(None, [], True))
                continue
            t = out_types[i]
            ex.outputs.append(assemble(per_rank, t, spec.mesh, sizes, f"output {i} {format_types(t)}"))
        # inputs, then module-level parameters typed at run time; an input the program mutated in place (a
        # buffer updated under no_grad) has no gradient with respect to the value it was given
        mutated = {m for a in answers for m in (a.get("mutated") or [])}  # type: ignore[union-attr]
        ex.skipped_grads = sorted(mutated)
        typed: dict[str, TypeMap] = {p.name: spec.full_types(p.types) for p in spec.tensor_params
                                     if p.name not in mutated}
        for name, kinds in (answers[0].get("module_types") or {}).items():  # type: ignore[union-attr]
            if kinds is not None:
                typed[f"<module>.{name}"] = {a: AxisType(kinds.get(a, "R")) for a in spec.mesh}
        for name, t in typed.items():
            gt = _grad_types(t)
            per_rank = []
            for r, a in enumerate(answers):
                g = (a["grads"] if not name.startswith("<module>.") else a["module_grads"]).get(  # type: ignore[index]
                    name.removeprefix("<module>."))
                if g is None:
                    base = ex.inputs[r].get(name) if not name.startswith("<module>.") else None
                    g = torch.zeros_like(base) if base is not None else None
                per_rank.append(g)
            if any(g is None for g in per_rank) or not all(g.is_floating_point() for g in per_rank):
                continue
            ex.per_rank_grads[name] = per_rank
            ex.grad_types[name] = gt
            ex.grads[name] = assemble(per_rank, gt, spec.mesh, sizes, f"grad of {name} {format_types(gt)}")

    # ------------------------------------------------------------------ judging
    def judge(self, spec: ProgramSpec, twin: ProgramSpec | None = None, seed_key: str | None = None,
              stop_when_wrong: bool = False) -> Verdict:
        """``stop_when_wrong``: skip the larger worlds once one is wrong (enough to show a bug's claim; spares
        a second hang)."""
        seed_key = seed_key or spec.path
        out_types, source = self.output_types(spec, twin)
        verdict = Verdict(spec.path, [], out_types, source)
        ref = self.execute(spec, 1, seed_key, out_types)
        if ref.run.status == "unsupported":
            verdict.not_runnable = f"the one-rank reference needs something the harness lacks: {ref.run.message}"
            return verdict
        for world in self.worlds:
            wv = self._judge_world(spec, twin, world, seed_key, out_types, ref)
            verdict.worlds.append(wv)
            if wv.outcome == "not-runnable":
                verdict.not_runnable = wv.details[0]
            if stop_when_wrong and wv.wrong:
                break
        return verdict

    def _judge_world(self, spec: ProgramSpec, twin: ProgramSpec | None, world: int, seed_key: str,
                     out_types: list[TypeMap] | None, ref: Execution) -> WorldVerdict:
        ex = self.execute(spec, world, seed_key, out_types)
        st = ex.run.status
        if st == "unsupported":
            return WorldVerdict(world, "not-runnable", "none", [f"needs something the harness lacks: {ex.run.message}"],
                                ex.run.seconds)
        if st in ("hang", "crash"):
            return WorldVerdict(world, st, "none", [ex.run.message], ex.run.seconds)
        if not ref.ok:
            return WorldVerdict(world, "crash", "none", [f"runs on {world} ranks but the one-rank reference fails: "
                                                         f"{ref.run.message}"], ex.run.seconds)
        lowp = any(s in spec.source for s in LOW_PRECISION)
        details = ex.problems()
        reference, scaled_only = "global", False
        use_twin = False
        if twin is not None:
            twin_ref = self.execute(twin, 1, seed_key, out_types)
            twin_ex = self.execute(twin, world, seed_key, out_types)
            if twin_ex.ok and twin_ref.ok:
                twin_vs_global = compare(twin_ex, twin_ref, lowp or any(s in twin.source for s in LOW_PRECISION),
                                         scale_axes=False)
                use_twin = bool(twin_vs_global) or bool(twin_ex.problems())

        params_meaningful = all(has_global_meaning(spec.full_types(p.types)) for p in spec.tensor_params)
        outs_meaningful = out_types is not None and all(has_global_meaning(t) for t in out_types)
        if use_twin:
            reference = "twin"
            details += compare(ex, twin_ex, lowp, scale_axes=False, per_rank=True)
        elif params_meaningful:
            # gradients have a global meaning only if the cotangents had one (or the program seeded backward itself)
            grads_meaningful = outs_meaningful or ex.run.self_backward
            diffs = compare(ex, ref, lowp, scale_axes=True, grads=grads_meaningful)
            details += diffs
            scaled_only = bool(diffs) and not ex.problems() and all(d.startswith("scaled:") for d in diffs)
            compared = [a for a in ex.outputs if a.value is not None]
            if grads_meaningful:
                compared += [a for a in ex.grads.values() if a.value is not None]
            if not compared:
                reference = "invariants"
        else:
            reference = "invariants"  # a V input: no global tensor to run on one rank
        return WorldVerdict(world, "differs" if details else "match", reference, details, ex.run.seconds,
                            scaled_only)

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
        job = self._job_dict(spec, sizes, inputs, [], seed_for("program", seed_key) % (2 ** 31), mode="typecheck")
        run = self._run("fake", world, [job], spec.mesh, sizes)
        if run.status == "ok":
            return CheckerVerdict("passed")
        if run.status == "hang":
            return CheckerVerdict("crash", run.message)
        err = run.answers[0]["error"]  # type: ignore[index]
        if err["spmd_type_error"] or err["from_spmd_types"]:  # SpmdTypeError, or its API rejecting a src/dst pair
            return CheckerVerdict("raised", run.message)
        if run.status == "unsupported":
            return CheckerVerdict("not-runnable", run.message)
        return CheckerVerdict("crash", run.message)


def _scale_factors(sizes: tuple[int, ...]) -> list[float]:
    """Products of axis sizes and their inverses: how a mesh-size-dependent program (a mean over a local shard
    declared a summand, an average over ranks) differs from its one-rank run."""
    factors: set[float] = set()
    nontrivial = [s for s in sizes if s > 1]
    for mask in range(1, 2 ** len(nontrivial)):
        prod = math.prod(s for k, s in enumerate(nontrivial) if mask >> k & 1)
        factors.update({float(prod), 1.0 / prod})
    return sorted(factors)


def compare(ex: Execution, other: Execution, lowp: bool, scale_axes: bool, per_rank: bool = False,
            grads: bool = True) -> list[str]:
    """Differences between two executions' reassembled outputs and gradients (``other`` is the reference).
    Without a global value on both sides, and ``per_rank``, compares rank by rank when the layouts agree."""
    out: list[str] = []

    def one(what: str, a: Assembly | None, b: Assembly | None, ra: list | None, rb: list | None) -> None:
        if a is not None and b is not None and a.value is not None and b.value is not None:
            if close(a.value, b.value, lowp):
                return
            if scale_axes and a.value.shape == b.value.shape:
                for c in _scale_factors(ex.sizes):
                    if close(a.value, b.value * c, lowp):
                        out.append(f"scaled: {what} = {c:g} x the reference's")
                        return
            out.append(f"{what} != the {'twin' if per_rank else 'reference'}'s ({max_err(a.value, b.value)})")
        elif per_rank and ra is not None and rb is not None and len(ra) == len(rb):
            for r, (x, y) in enumerate(zip(ra, rb)):
                if x is not None and y is not None and not close(x, y, lowp):
                    out.append(f"{what} on rank {r} != the twin's ({max_err(x, y)})")
                    return

    n = min(len(ex.outputs), len(other.outputs))
    if len(ex.per_rank_outputs[0]) != len(other.per_rank_outputs[0]):
        out.append(f"returns {len(ex.per_rank_outputs[0])} values, the reference {len(other.per_rank_outputs[0])}")
    for i in range(n):
        ra = [o[i] for o in ex.per_rank_outputs]
        rb = [o[i] for o in other.per_rank_outputs] if other.world == ex.world else None
        one(f"output {i}", ex.outputs[i], other.outputs[i], ra, rb)
    for name, asm in ex.grads.items():
        if not grads or name not in other.grads:
            continue
        rb = other.per_rank_grads[name] if other.world == ex.world else None
        one(f"grad of {name} {format_types(ex.grad_types[name])}", asm, other.grads[name],
            ex.per_rank_grads[name], rb)
    return out
