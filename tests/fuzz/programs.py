"""A hypothesis strategy for random rank-local SPMD programs in the fixture convention.

Each program is the source text of a runnable fixture (docs/ground_truth.md, "The program
convention"): a ``# spmdcheck: mesh = [...]`` header, ``GLOBAL_SHAPES``, and a module-level
``def step(...)`` whose tensor parameters and result are ``Annotated[torch.Tensor, {...}]``.
The harness runs it unchanged.

The generator keeps, for every value, its global shape and its *intended* SPMD type on each
mesh axis, and only emits steps that fit both: every program is well-shaped at every mesh size
the harness uses (tp up to 4; dp x tp up to 2 x 2), so a shape error is a generator bug, never a
finding. The body is a stream of steps on one activation (plus side values it can reuse):

* column-parallel (weight sharded on its output dim), row-parallel (sharded on its input dim)
  and replicated products, written ``F.linear`` (with or without bias), ``x @ w.T``,
  ``x @ w``, ``torch.matmul`` or ``torch.einsum`` with an explicit equation, over weights
  stored (out, in) or (in, out);
* element-wise non-linear ops (relu, gelu, tanh, silu, sigmoid, exp of a bounded value),
  scalar scaling, affine shifts, biases, learnable scales, residual adds;
* sums: an RMS norm over the features (local, or over tp-sharded features with a reduction of
  the sum of squares), centring over the tokens (a sum over the possibly sharded token dim,
  reduced), and a final scalar loss;
* the spmd_types collectives and conversions (all_reduce to R/I, all_gather, reduce_scatter,
  convert I->R / R->S / I->S, reinterpret V->P), the Megatron mappings (copy_to /
  reduce_from / scatter_to / gather_from tensor-model-parallel region, gather_from /
  scatter_to / reduce_scatter_to sequence-parallel region, the last-dim all-gather /
  reduce-scatter), and raw ``dist.all_reduce`` in place: on a detached statistic, or on the
  autograd path where I is meant (forward sum, identity backward: all_reduce(P -> I));
* P inputs (pending sums), reduced before use or added to another pending sum;
* the end: the activation (reduced if pending), a scalar loss (reduced over every axis it is
  sharded on; sometimes ``loss.backward()`` in ``step``), or a pair.

A *correct* program only takes steps that are right by the types. A *mutated* one has one or two
steps replaced by a classic bug (``MUTATIONS``) that keeps every local shape (except the wrong
gather dim, which is a shape bug by nature): the generator then goes on as if the correct step had
been taken, and the result annotation is what the correct program returns. Each body line
carries a tag (``ok:<step>:<form>`` or ``mut:<kind>:<form>``) so that a diagnostic can be traced
to the step that caused it. Every annotation names every mesh axis (spmdcheck reads an axis an
annotation leaves out as unknown, the harness as R); a last-dim shard is written S(1) or S(-1).

With ``branches=True`` (``BRANCH_MUTATIONS``), also a value made in the arms of an if/else (or an assignment
and a one-armed if) on a condition that is the same on every rank, then changed in place (``mul_``, ``*=``,
``add_``...), sometimes followed by ``assert_type``; mutated: the arm that runs gives another type, or a number
or a P input is added in place to the wrong type. Off, the generator draws exactly what it drew without them.

Hypothesis shrinks toward the first element of every choice: short programs, the tp-only mesh,
plain forms, no mutation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from hypothesis import strategies as st

MIN_STATEMENTS, MAX_STATEMENTS = 8, 30

# The classic bugs a mutated program may contain (kind -> what it does).
MUTATIONS = {
    "drop_reduce": "a pending sum's all-reduce (or the reduction of a sum of squares / token sum) is left out",
    "swap_dst": "a reduction or gather produces I where R is needed, or R where I is needed",
    "double_reduce": "an already reduced (R/I) value is all-reduced again",
    "drop_convert": "an I activation enters a column-parallel product without convert(I->R) / copy_to",
    "reduce_for_copy": "reduce_from_tensor_model_parallel_region where copy_to_... was meant",
    "copy_for_reduce": "copy_to_tensor_model_parallel_region where reduce_from_... was meant",
    "bias_before_reduce": "a bias is added to a pending sum (F.linear with bias on a row-parallel product)",
    "nonlinear_pending": "a non-linear op is applied to a pending sum",
    "affine_pending": "a number is added to a pending sum",
    "square_pending": "a pending sum is multiplied by itself",
    "wrong_axis": "a tp pending sum is all-reduced over dp",
    "raw_autograd": "a raw in-place dist.all_reduce on the autograd path where R is meant (no backward: P -> I)",
    "mean_then_reduce": "a mean over a sharded dim (local count) is reduced as if it were a sum",
    "local_mean": "a mean over a sharded dim is used without any reduction",
    "scatter_on_R": "Megatron's scatter (backward: all-gather) applied to an R value",
    "invariant_weight": "a weight declared I on an axis where the activation is sharded or R",
    "invariant_mix": "an I value is combined with an R or sharded one",
    "partial_unreduced": "a P input is added to an R activation without reducing it",
    "wrong_gather_dim": "an all-gather names the other dim than the one that is sharded",
    "loss_dst_R": "the loss is all-reduced to R and backward() is called on it",
}
# The mutations of branch + in-place programs (``programs(branches=True)``; kept apart so that the default
# stream of programs, which tests/test_fuzz.py's seeded run judges, is unchanged).
BRANCH_MUTATIONS = {
    "branch_type": "the arm of an if/else that runs gives the value another type (a pending sum where R/I is "
                   "meant, or R where a pending sum is meant); an in-place op follows the join",
    "inplace_affine_pending": "a number is added in place to a pending sum (x.add_(1.0), x += 1.0)",
    "inplace_partial": "a P input is added in place to an R or I value (x.add_(p), x += p)",
}
ALL_MUTATIONS = {**MUTATIONS, **BRANCH_MUTATIONS}
# Not a mutation: backward() on a loss that is still a per-rank partial sum (V) computes exactly the gradients of
# the declared P loss (reinterpret(V -> P) moves no data; docs/ground_truth.md, "Claims execution cannot see").

KIND_ANN = {"R": "R", "I": "I", "P": "P", "S0": "S(0)", "S1": "S(1)"}
PENDING = ("P", "Vp")  # P: declared partial; Vp: spmdcheck's local view of a sharded contraction (V + pending)

MEGATRON_NAMES = (
    "all_gather_last_dim_from_tensor_parallel_region",
    "copy_to_tensor_model_parallel_region",
    "gather_from_sequence_parallel_region",
    "gather_from_tensor_model_parallel_region",
    "reduce_from_tensor_model_parallel_region",
    "reduce_scatter_last_dim_to_tensor_parallel_region",
    "reduce_scatter_to_sequence_parallel_region",
    "scatter_to_sequence_parallel_region",
    "scatter_to_tensor_model_parallel_region",
)


# --------------------------------------------------------------------------- values and programs
@dataclass
class Val:
    name: str
    shape: tuple[int, ...]
    t: dict[str, str]  # axis -> R | I | P | Vp | S0 | S1 (the intended type)
    grad: bool = True
    bounded: bool = False  # |value| <= 1 (after tanh/sigmoid): exp is safe
    mag: float = 1.0  # a rough bound on the typical magnitude (inputs are standard normal)
    role: str = "value"  # value | activation | weight | bias | scale | partial input

    @property
    def pending(self) -> bool:
        return any(k in PENDING for k in self.t.values())


@dataclass
class Param:
    name: str
    shape: tuple[int, ...]
    t: dict[str, str]
    role: str
    spelling: dict[str, str] = field(default_factory=dict)  # axis -> "S(1)" / "S(-1)" for a last-dim shard


@dataclass
class Program:
    source: str
    mesh: tuple[str, ...]
    body: list[tuple[str, str]]  # (code, tag)
    first_body_line: int  # 1-based line number of the first body statement in ``source``
    mutations: list[str]
    out_mode: str
    params: list[Param] = field(default_factory=list)
    goals: list[str] = field(default_factory=list)  # the mutation kinds the generator aimed for

    def __repr__(self) -> str:  # what hypothesis prints for a falsifying example: the source says the rest
        return f"Program({self.statements} statements, mesh={list(self.mesh)}, mutations={self.mutations})"

    @property
    def mutated(self) -> bool:
        return bool(self.mutations)

    @property
    def statements(self) -> int:
        return len(self.body)

    def tag_at(self, line: int) -> str:
        """The generator tag of a source line ('header' outside the body)."""
        i = line - self.first_body_line
        if 0 <= i < len(self.body):
            return self.body[i][1]
        return "signature" if line < self.first_body_line else "header"

    def mutation_lines(self) -> list[int]:
        return [self.first_body_line + i for i, (_, tag) in enumerate(self.body) if tag.startswith("mut:")]


def ann(t: dict[str, str], mesh: tuple[str, ...], spelling: dict[str, str] | None = None) -> str:
    spelling = spelling or {}
    return "{" + ", ".join(f'"{a}": {spelling.get(a, KIND_ANN[t[a]])}' for a in mesh) + "}"


# --------------------------------------------------------------------------- the generator
class Gen:
    def __init__(self, draw, mesh: tuple[str, ...], T: int, H: int, F: int, mutations: int) -> None:  # noqa: ANN001, N803
        self.draw = draw
        self.mesh = mesh
        self.dp = "dp" in mesh
        self.T, self.H, self.F = T, H, F
        self.body: list[tuple[str, str]] = []
        self.params: list[Param] = []
        self.vals: list[Val] = []
        self.mut_budget = mutations
        self.targets: list[str] = []  # the mutation kinds this program still aims for
        self.goals: list[str] = []
        self.allowed: set[str] = set(MUTATIONS)  # the kinds a forced mutation may take
        self.mutations: list[str] = []
        self.counter = 0
        self.tp_group_none = False
        self.cur_mag = 1.0  # the magnitude of the value the current step works on (the default for new values)
        self.branches = False  # offer the branch and in-place steps (they draw nothing when off)
        self.limit = MAX_STATEMENTS  # the body length a branch step (up to 7 lines) must stay within

    # ------------------------------------------------------------------ drawing
    def pick(self, options):  # noqa: ANN001, ANN201
        return self.draw(st.sampled_from(list(options)))

    def coin(self, percent: int) -> bool:
        """True with about ``percent`` %; shrinks to False."""
        return self.draw(st.integers(0, 99)) >= 100 - percent

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, code: str, tag: str) -> None:
        self.body.append((code, tag))

    def mutate(self, kind: str) -> str:
        self.mutations.append(kind)
        self.mut_budget -= 1
        if kind in self.targets:
            self.targets.remove(kind)
        return f"mut:{kind}"

    # ------------------------------------------------------------------ values
    def types(self, tp: str, dp: str | None = None) -> dict[str, str]:
        t = {"tp": tp}
        if self.dp:
            t = {"dp": dp or "R", "tp": tp}
        return t

    def spell(self, shape: tuple[int, ...], t: dict[str, str]) -> dict[str, str]:
        """How a last-dim shard is written: S(1) / S(0) (the dim's index) or S(-1)."""
        out = {}
        for a, k in t.items():
            if k in ("S0", "S1") and int(k[1]) == len(shape) - 1 and self.coin(40):
                out[a] = "S(-1)"
        return out

    def param(self, prefix: str, shape: tuple[int, ...], t: dict[str, str], role: str) -> Val:
        name = self.fresh(prefix)
        self.params.append(Param(name, shape, t, role, self.spell(shape, t)))
        v = Val(name, shape, t, grad=True, role=role)
        self.vals.append(v)
        return v

    def value(self, prefix: str, code: str, tag: str, shape: tuple[int, ...], t: dict[str, str],
              grad: bool = True, bounded: bool = False, mag: float | None = None) -> Val:
        name = self.fresh(prefix)
        self.emit(f"{name} = {code}", tag)
        v = Val(name, shape, dict(t), grad, bounded, mag=self.cur_mag if mag is None else mag)
        self.vals.append(v)
        return v

    def weight_dp(self, v: Val) -> str:
        return "I" if self.dp and v.t.get("dp") == "I" else "R"

    def vec_types(self, v: Val) -> dict[str, str]:
        """The type of a bias / scale vector along ``v``'s last dim."""
        tp = v.t["tp"]
        vt = "S0" if tp == "S1" else ("I" if tp == "I" else "R")
        return self.types(vt, self.weight_dp(v))

    # ------------------------------------------------------------------ element-wise steps
    def nonlin(self, v: Val, tag_kind: str = "ok") -> Val:
        forms = ["torch.relu({})", "F.gelu({})", "torch.tanh({})", "F.silu({})", "torch.sigmoid({})"]
        if v.bounded:
            forms.append("torch.exp({})")
        f = self.pick(forms)
        tag = self.mutate("nonlinear_pending") if tag_kind == "mut" else "ok:nonlinear"
        bounded = f.startswith(("torch.tanh", "torch.sigmoid"))
        return self.value("h", f.format(v.name), f"{tag}:{f.split('(')[0]}", v.shape, v.t,
                          bounded=bounded, mag=1.0 if bounded else (3.0 if f.startswith("torch.exp") else v.mag))

    def scale(self, v: Val) -> Val:
        # no negation: ``h + (-h)`` would cancel to rounding noise, and comparing noise is not a verdict
        f = self.pick(["{} * 0.5", "{} / 2", "{} * 2.0", "2.0 * {}", "{}.float()"])
        factor = {"{} * 2.0": 2.0, "2.0 * {}": 2.0, "{}.float()": 1.0}.get(f, 0.5)
        return self.value("h", f.format(v.name), f"ok:scale:{f.format('x')}", v.shape, v.t, bounded=v.bounded,
                          mag=v.mag * factor)

    def affine(self, v: Val, tag_kind: str = "ok") -> Val:
        f = self.pick(["{} + 1", "{} - 0.5", "1.0 + {}"])
        tag = self.mutate("affine_pending") if tag_kind == "mut" else "ok:affine"
        return self.value("h", f.format(v.name), f"{tag}:{f.format('x')}", v.shape, v.t, mag=v.mag + 1)

    def bias(self, v: Val, tag_kind: str = "ok") -> Val:
        b = self.param("b", (v.shape[-1],), self.vec_types(v), "bias")
        tag = self.mutate("bias_before_reduce") if tag_kind == "mut" else "ok:bias"
        return self.value("h", f"{v.name} + {b.name}", f"{tag}:x + b", v.shape, v.t, mag=v.mag + 1)

    def gamma(self, v: Val) -> Val:
        g = self.param("g", (v.shape[-1],), self.vec_types(v), "scale")
        return self.value("h", f"{v.name} * {g.name}", "ok:scale_vector:x * g", v.shape, v.t)

    def residual_candidates(self, v: Val) -> list[Val]:
        return [u for u in self.vals if u is not v and u.shape == v.shape and u.t == v.t
                and u.role in ("value", "activation", "partial input")]

    def residual(self, v: Val) -> Val:
        u = self.pick(self.residual_candidates(v))
        kind = "pending" if v.pending else ("stat" if not u.grad else "value")
        return self.value("h", f"{v.name} + {u.name}", f"ok:residual:{kind}", v.shape, v.t, mag=v.mag + u.mag)

    def square_pending(self, v: Val) -> Val:
        return self.value("h", f"{v.name} * {v.name}", f"{self.mutate('square_pending')}:x * x", v.shape, v.t,
                          mag=v.mag ** 2)

    def mix_candidates(self, v: Val) -> list[Val]:
        """Values of v's shape that are I on tp where v is not (or the reverse), equal elsewhere."""
        out = []
        for u in self.vals:
            if u is v or u.shape != v.shape or not u.grad or u.role not in ("value", "activation"):
                continue
            a, b = v.t["tp"], u.t["tp"]
            if {a, b} in ({"I", "R"},) and all(u.t[x] == v.t[x] for x in self.mesh if x != "tp"):
                out.append(u)
        return out

    def invariant_mix(self, v: Val) -> Val:
        u = self.pick(self.mix_candidates(v))
        return self.value("h", f"{v.name} + {u.name}", f"{self.mutate('invariant_mix')}:{v.t['tp']} + {u.t['tp']}",
                          v.shape, v.t, mag=v.mag + u.mag)

    # ------------------------------------------------------------------ norms and token sums
    # The norms use eps = 0.1, not 1e-6: a row that is (almost) zero -- relu can make one -- would otherwise have
    # its rounding noise multiplied by 1000, and the run would differ from the reference by noise.
    def rmsnorm_local(self, v: Val) -> Val:
        if self.coin(50):
            return self.value("h", f"{v.name} * torch.rsqrt({v.name}.pow(2).mean(dim=-1, keepdim=True) + 0.1)",
                              "ok:rmsnorm:one line", v.shape, v.t, mag=1.0)
        ms = self.value("ms", f"{v.name}.pow(2).mean(dim=-1, keepdim=True)", "ok:rmsnorm:mean",
                        v.shape[:-1] + (1,), v.t)
        return self.value("h", f"{v.name} * torch.rsqrt({ms.name} + 0.1)", "ok:rmsnorm:scale", v.shape, v.t, mag=1.0)

    def rmsnorm_sharded(self, v: Val, mutation: str | None = None) -> Val:
        """RMS norm over tp-sharded features: the sum of squares is a pending sum, reduced to R."""
        K = v.shape[-1]  # noqa: N806
        st_shape = v.shape[:-1] + (1,)
        st_t = dict(v.t, tp="Vp")
        if mutation in ("local_mean", "mean_then_reduce"):
            tag = self.mutate(mutation)
            ms = self.value("ms", f"{v.name}.pow(2).mean(dim=-1, keepdim=True)", f"{tag}:mean over sharded dim",
                            st_shape, st_t)
            if mutation == "mean_then_reduce":
                ms = self.value("ms", f'spmd.all_reduce({ms.name}, "tp", src=P, dst=R)', "ok:rmsnorm_sharded:reduce",
                                st_shape, dict(v.t, tp="R"))
            return self.value("h", f"{v.name} * torch.rsqrt({ms.name} + 0.1)", "ok:rmsnorm_sharded:scale",
                              v.shape, v.t, mag=2.0)
        ss = self.value("ss", f"{v.name}.pow(2).sum(dim=-1, keepdim=True)", "ok:rmsnorm_sharded:sum of squares",
                        st_shape, st_t)
        if mutation == "drop_reduce":
            ss = self.value("ss", ss.name, f"{self.mutate('drop_reduce')}:sum of squares", st_shape, dict(v.t, tp="R"))
        else:
            dst = "R"
            tag = "ok:rmsnorm_sharded:reduce"
            if mutation == "swap_dst":
                dst, tag = "I", f"{self.mutate('swap_dst')}:sum of squares to I"
            ss = self.value("ss", f'spmd.all_reduce({ss.name}, "tp", src=P, dst={dst})', tag, st_shape,
                            dict(v.t, tp="R"))
        return self.value("h", f"{v.name} * torch.rsqrt({ss.name} / {K} + 0.1)", "ok:rmsnorm_sharded:scale",
                          v.shape, v.t, mag=2.0)

    def center(self, v: Val, mutation: str | None = None) -> Val:
        """Subtract half the mean over the tokens: a sum over dim 0, reduced on the axes that shard the tokens.
        (Half: a full centring makes every token-constant term -- a bias -- vanish, and the gradient of that
        bias is then rounding noise, which no tolerance can compare.)"""
        sharded = [a for a in self.mesh if v.t[a] == "S0"]
        shape = (1,) + v.shape[1:]
        mu_t = {a: ("Vp" if v.t[a] == "S0" else v.t[a]) for a in self.mesh}
        if mutation in ("mean_then_reduce", "local_mean"):
            tag = self.mutate(mutation)
            mu = self.value("mu", f"{v.name}.mean(dim=0, keepdim=True)", f"{tag}:mean over sharded tokens", shape, mu_t)
            if mutation == "mean_then_reduce":
                for a in sharded:
                    mu_t[a] = "R"
                    mu = self.value("mu", f'spmd.all_reduce({mu.name}, "{a}", src=P, dst=R)', "ok:center:reduce",
                                    shape, mu_t)
            return self.value("h", f"{v.name} - 0.5 * {mu.name}", "ok:center:subtract", v.shape, v.t)
        mu = self.value("mu", f"{v.name}.sum(dim=0, keepdim=True)", "ok:center:token sum", shape, mu_t)
        victim = self.pick(sharded) if mutation in ("drop_reduce", "swap_dst") else None
        for a in sharded:
            mu_t[a] = "R"
            if a == victim and mutation == "drop_reduce":
                mu = self.value("mu", mu.name, f"{self.mutate('drop_reduce')}:token sum over {a}", shape, mu_t)
                continue
            dst, tag = "R", "ok:center:reduce"
            if a == victim and mutation == "swap_dst":
                dst, tag = "I", f"{self.mutate('swap_dst')}:token sum to I"
            mu = self.value("mu", f'spmd.all_reduce({mu.name}, "{a}", src=P, dst={dst})', tag, shape, mu_t)
        return self.value("h", f"{v.name} - 0.5 * {mu.name} / {self.T}", "ok:center:subtract", v.shape, v.t)

    # ------------------------------------------------------------------ products
    def _product(self, v: Val, out: int, tp_oi: str, tp_io: str, result_tp: str, tag: str, wdp: str | None = None,
                 bias_tp: str | None = None) -> Val:
        """x @ weight in one of the written forms; the weight is created (out, in) or (in, out)."""
        K = v.shape[-1]  # noqa: N806
        wdp = wdp or self.weight_dp(v)
        layout = self.pick(["oi", "io"]) if bias_tp is None else "oi"
        if layout == "oi":
            w = self.param("w", (out, K), self.types(tp_oi, wdp), "weight")
            forms = ['F.linear({x}, {w})', '{x} @ {w}.T', 'torch.matmul({x}, {w}.t())',
                     'torch.einsum("tk,mk->tm", {x}, {w})']
            if bias_tp is not None:
                forms = ['F.linear({x}, {w}, {b})']
        else:
            w = self.param("w", (K, out), self.types(tp_io, wdp), "weight")
            forms = ['{x} @ {w}', 'torch.matmul({x}, {w})', 'torch.einsum("tk,km->tm", {x}, {w})']
        f = self.pick(forms)
        b = self.param("b", (out,), self.types(bias_tp, "R"), "bias") if bias_tp is not None else None
        code = f.format(x=v.name, w=w.name, b=b.name if b else "")
        shape = v.shape[:-1] + (out,)
        t = dict(v.t, tp=result_tp)
        label = f.format(x="x", w="w", b="b")
        return self.value("h", code, f"{tag}:{label} [{layout}]", shape, t,
                          mag=v.mag * K ** 0.5 + (1 if b is not None else 0))

    def width(self) -> int:
        return self.pick([self.H, self.F])

    def col_matmul(self, v: Val, tag: str = "ok:column") -> Val:
        with_bias = self.coin(25)
        return self._product(v, self.width(), "S0", "S1", "S1", tag, bias_tp="S0" if with_bias else None)

    def row_matmul(self, v: Val, mutation: str | None = None) -> Val:
        if mutation == "bias_before_reduce":
            return self._product(v, self.width(), "S1", "S0", "Vp", self.mutate(mutation), bias_tp="R")
        return self._product(v, self.width(), "S1", "S0", "Vp", "ok:row")

    def rep_matmul(self, v: Val, mutation: str | None = None) -> Val:
        wtp = "I" if v.t["tp"] == "I" else "R"
        tag = "ok:replicated"
        wdp = None
        if mutation == "invariant_weight":
            tag = self.mutate(mutation)
            if self.dp and (v.t["tp"] == "I" or self.coin(50)):
                wdp = "I"
            else:
                wtp = "I"
        return self._product(v, self.width(), wtp, wtp, v.t["tp"], tag, wdp=wdp)

    # ------------------------------------------------------------------ tp transitions
    def to_R(self, v: Val, mutation: str | None = None) -> Val:  # noqa: N802 - from I
        t = dict(v.t, tp="R")
        if mutation == "drop_convert":
            return self.value("h", v.name, f"{self.mutate(mutation)}:alias", v.shape, t)
        if mutation == "reduce_for_copy":
            return self.value("h", f"reduce_from_tensor_model_parallel_region({v.name})",
                              f"{self.mutate(mutation)}:reduce_from", v.shape, t)
        f = self.pick(['spmd.convert({}, "tp", src=I, dst=R)', "copy_to_tensor_model_parallel_region({})"])
        return self.value("h", f.format(v.name), f"ok:convert I->R:{f.split('(')[0]}", v.shape, t)

    def to_S0(self, v: Val, mutation: str | None = None) -> Val:  # noqa: N802 - split the tokens
        t = dict(v.t, tp="S0")
        shape = v.shape
        if v.t["tp"] == "I":
            forms = ['spmd.convert({}, "tp", src=I, dst=S(0))', "scatter_to_sequence_parallel_region({})"]
        else:
            forms = ['spmd.convert({}, "tp", src=R, dst=S(0))']
        tag = "ok:split tokens"
        if mutation == "scatter_on_R":
            forms, tag = ["scatter_to_sequence_parallel_region({})"], self.mutate(mutation)
        f = self.pick(forms)
        return self.value("h", f.format(v.name), f"{tag}:{f.split('(')[0]}", shape, t)

    def to_S1(self, v: Val, mutation: str | None = None) -> Val:  # noqa: N802 - split the features
        t = dict(v.t, tp="S1")
        if v.t["tp"] == "I":
            forms = ['spmd.convert({}, "tp", src=I, dst=S(1))', "scatter_to_tensor_model_parallel_region({})",
                     'spmd.convert({}, "tp", src=I, dst=S(-1))']
        else:
            forms = ['spmd.convert({}, "tp", src=R, dst=S(1))', 'spmd.convert({}, "tp", src=R, dst=S(-1))']
        tag = "ok:split features"
        if mutation == "scatter_on_R":
            forms, tag = ["scatter_to_tensor_model_parallel_region({})"], self.mutate(mutation)
        f = self.pick(forms)
        return self.value("h", f.format(v.name), f"{tag}:{f.split('(')[0]}", v.shape, t)

    def gather(self, v: Val, mutation: str | None = None) -> Val:
        """S(0) or S(1) on tp -> R or I."""
        d = 0 if v.t["tp"] == "S0" else 1
        dst = self.pick(["R", "I"])
        forms = {
            (0, "R"): ['spmd.all_gather({}, "tp", src=S(0), dst=R)', "gather_from_sequence_parallel_region({})"],
            (0, "I"): ['spmd.all_gather({}, "tp", src=S(0), dst=I)',
                       "gather_from_sequence_parallel_region({}, tensor_parallel_output_grad=False)"],
            (1, "R"): ['spmd.all_gather({}, "tp", src=S(1), dst=R)', 'spmd.all_gather({}, "tp", src=S(-1), dst=R)',
                       "all_gather_last_dim_from_tensor_parallel_region({})"],
            (1, "I"): ['spmd.all_gather({}, "tp", src=S(1), dst=I)', "gather_from_tensor_model_parallel_region({})"],
        }
        t = dict(v.t, tp=dst)
        tag = f"ok:gather S({d})->{dst}"
        emit_dst = dst
        if mutation == "swap_dst":
            emit_dst = "I" if dst == "R" else "R"
            tag = f"{self.mutate(mutation)}:gather S({d})->{emit_dst} for {dst}"
        f = self.pick(forms[(d, emit_dst)])
        if mutation == "wrong_gather_dim":
            f = f'spmd.all_gather({{}}, "tp", src=S({1 - d}), dst={dst})'
            tag = f"{self.mutate(mutation)}:S({1 - d}) for S({d})"
        return self.value("h", f.format(v.name), f"{tag}:{f.split('(')[0]}", v.shape, t)

    def reduce(self, v: Val, mutation: str | None = None, dst: str | None = None) -> Val:
        """A pending sum on tp -> R or I."""
        if mutation == "raw_autograd":
            dst = "R"  # a raw all_reduce has no backward: it is all_reduce(P -> I), a bug only where R is meant
        dst = dst or self.pick(["R", "I"])
        t = dict(v.t, tp=dst)
        if dst == "I" and mutation is None and self.coin(10):
            # a raw in-place all_reduce on the autograd path: forward sum, identity backward -- exactly
            # reduce_from_tensor_model_parallel_region, i.e. all_reduce(P -> I): correct where I is meant
            x = v
            if v.t["tp"] == "Vp":
                x = self.value("h", f'spmd.reinterpret({v.name}, "tp", src=V, dst=P)', "ok:reinterpret V->P",
                               v.shape, dict(v.t, tp="P"))
            self.emit(f"dist.all_reduce({x.name}{self.raw_group()})", "ok:raw all_reduce as P->I:in place")
            return self.value("h", x.name, "ok:raw all_reduce as P->I:alias", v.shape, t)
        src = "V" if v.t["tp"] == "Vp" and self.coin(20) else "P"
        forms = {"R": [f'spmd.all_reduce({{}}, "tp", src={src}, dst=R)', 'spmd.all_reduce({}, "tp", dst=R)'],
                 "I": [f'spmd.all_reduce({{}}, "tp", src={src}, dst=I)',
                       "reduce_from_tensor_model_parallel_region({})"]}
        tag = f"ok:reduce->{dst}"
        if mutation == "drop_reduce":
            return self.value("h", v.name, f"{self.mutate(mutation)}:alias", v.shape, t)
        if mutation == "raw_autograd":
            tag = self.mutate(mutation)
            group = self.raw_group()
            x = v
            if v.t["tp"] == "Vp" and self.coin(50):
                x = self.value("h", f'spmd.reinterpret({v.name}, "tp", src=V, dst=P)', "ok:reinterpret V->P",
                               v.shape, dict(v.t, tp="P"))
            self.emit(f"dist.all_reduce({x.name}{group})", f"{tag}:in place")
            return self.value("h", x.name, f"{tag}:alias", v.shape, t)
        emit_dst = dst
        if mutation == "swap_dst":
            emit_dst = "I" if dst == "R" else "R"
            tag = f"{self.mutate(mutation)}:{emit_dst} for {dst}"
        f = self.pick(forms[emit_dst])
        if mutation == "wrong_axis":
            f = f'spmd.all_reduce({{}}, "dp", src=P, dst={dst})'
            tag = f"{self.mutate(mutation)}:dp for tp"
        if mutation == "copy_for_reduce":
            f = "copy_to_tensor_model_parallel_region({})"
            tag = f"{self.mutate(mutation)}:copy_to"
        return self.value("h", f.format(v.name), f"{tag}:{f.split('(')[0]}", v.shape, t)

    def reduce_scatter(self, v: Val) -> Val:
        d = self.pick([0, 1])
        forms = {0: ['spmd.reduce_scatter({}, "tp", src=P, dst=S(0))',
                     "reduce_scatter_to_sequence_parallel_region({})"],
                 1: ['spmd.reduce_scatter({}, "tp", src=P, dst=S(1))',
                     "reduce_scatter_last_dim_to_tensor_parallel_region({})",
                     'spmd.reduce_scatter({}, "tp", src=P, dst=S(-1))']}
        f = self.pick(forms[d])
        return self.value("h", f.format(v.name), f"ok:reduce_scatter->S({d}):{f.split('(')[0]}", v.shape,
                          dict(v.t, tp=f"S{d}"))

    def reinterpret(self, v: Val) -> Val:
        return self.value("h", f'spmd.reinterpret({v.name}, "tp", src=V, dst=P)', "ok:reinterpret V->P", v.shape,
                          dict(v.t, tp="P"))

    def double_reduce(self, v: Val) -> Val:
        f = self.pick(['spmd.all_reduce({}, "tp", src=P, dst=R)', 'spmd.all_reduce({}, "tp", src=P, dst=I)',
                       "reduce_from_tensor_model_parallel_region({})"])
        return self.value("h", f.format(v.name), f"{self.mutate('double_reduce')}:{f.split('(')[0]}", v.shape, v.t)

    # ------------------------------------------------------------------ P inputs and raw collectives
    def p_input(self, v: Val) -> Val:
        return self.param("p", v.shape, dict(v.t, tp="P"), "partial input")

    def add_partial(self, v: Val, mutation: str | None = None) -> Val:
        p = self.p_input(v)
        tp = v.t["tp"]
        if mutation == "partial_unreduced":
            return self.value("h", f"{v.name} + {p.name}", f"{self.mutate(mutation)}:{tp} + P", v.shape, v.t,
                              mag=v.mag + 1)
        if tp in PENDING:
            return self.value("h", f"{v.name} + {p.name}", f"ok:add P input:{tp} + P", v.shape, v.t, mag=v.mag + 1)
        if tp == "S0":
            f = self.pick(['spmd.reduce_scatter({}, "tp", src=P, dst=S(0))',
                           "reduce_scatter_to_sequence_parallel_region({})"])
        elif tp == "S1":
            f = self.pick(['spmd.reduce_scatter({}, "tp", src=P, dst=S(1))',
                           "reduce_scatter_last_dim_to_tensor_parallel_region({})"])
        else:
            f = self.pick([f'spmd.all_reduce({{}}, "tp", src=P, dst={tp})'] +
                          (["reduce_from_tensor_model_parallel_region({})"] if tp == "I" else []))
        r = self.value("r", f.format(p.name), f"ok:add P input:reduce {f.split('(')[0]}", v.shape, v.t)
        return self.value("h", f"{v.name} + {r.name}", f"ok:add P input:{tp} + reduced", v.shape, v.t, mag=v.mag + 1)

    def raw_group(self) -> str:
        if not self.dp and self.coin(30):
            return ""
        return ", group=parallel_state.get_tensor_model_parallel_group()"

    def raw_stat(self, v: Val) -> Val:
        """A detached statistic of a pending sum, all-reduced in place with raw torch.distributed."""
        tp = v.t["tp"]
        if tp == "Vp" and not self.coin(15):
            c = self.value("c", f'spmd.reinterpret({v.name}.detach().clone(), "tp", src=V, dst=P)',
                           "ok:raw stat:detach + reinterpret", v.shape, dict(v.t, tp="P"), grad=False)
            tag = "ok:raw stat:all_reduce"
        else:
            c = self.value("c", f"{v.name}.detach().clone()", "ok:raw stat:detach", v.shape, dict(v.t, tp="P"),
                           grad=False)
            tag = "ok:raw stat:all_reduce" if tp == "P" else "ok:raw stat unmarked:all_reduce of V"
        self.emit(f"dist.all_reduce({c.name}{self.raw_group()})", tag)
        c.t = dict(v.t, tp="R")
        return v


    # ------------------------------------------------------------------ branches and in-place ops
    # A value made in the arms of an if/else (or an assignment and a one-armed if), then changed in place.
    # The condition reads a dim of the first input that no axis shards, so it is the same on every rank and
    # at every mesh size, and the generator knows which arm runs; the arms are copies (``* 1.0``,
    # ``.clone()``: a fresh tensor, so the in-place op never touches a value autograd saved or a leaf).
    BRANCH_LINES = 7  # the most lines a branch or in-place step emits

    def condition(self, value: bool) -> str:
        x = self.params[0]  # the activation input: (T, H), dim 1 is never sharded
        H = x.shape[1]  # noqa: N806
        forms = ([f"{x.name}.shape[1] == {H}", f"{x.name}.shape[-1] > 2", f"{x.name}.dim() == 2",
                  f"{x.name}.size(1) == {H}"] if value else
                 [f"{x.name}.shape[1] != {H}", f"{x.name}.shape[-1] < 2", f"{x.name}.dim() == 3"])
        return self.pick(forms)

    def copy_of(self, u: Val) -> str:
        return self.pick(["{} * 1.0", "{}.clone()", "1.0 * {}"]).format(u.name)

    def same_type_candidates(self, v: Val) -> list[Val]:
        return [u for u in self.vals if u is not v and u.shape == v.shape and u.t == v.t and u.grad
                and u.role in ("value", "activation", "partial input")]

    def wrong_type_source(self, v: Val) -> Val:
        """A value of v's local shape on every axis but another type on tp: a pending sum where R/I is meant, an
        R value where a pending sum is meant (an earlier one of the program if there is one, else a new input)."""
        want_pending = not v.pending
        full = ("R", "I", "P", "Vp")
        pool = [u for u in self.vals if u is not v and u.shape == v.shape and u.grad and u.t["tp"] in full
                and (u.t["tp"] in PENDING) == want_pending and u.t["tp"] != "I"
                and all(u.t[a] == v.t[a] for a in self.mesh if a != "tp")
                and u.role in ("value", "activation", "partial input")]
        if pool and self.coin(50):
            return self.pick(pool)
        if want_pending:
            return self.p_input(v)
        return self.param("u", v.shape, dict(v.t, tp="R"), "activation")

    def branch(self, v: Val, mutation: str | None = None) -> Val:
        taken = self.pick(["if", "else"])
        one_armed = self.coin(30)
        other = self.pick([v, *self.same_type_candidates(v)])
        good, bad = (v, other) if self.coin(50) else (other, v)  # both right: which one runs is drawn
        tag_wrong = ""
        if mutation == "branch_type":
            wrong = self.wrong_type_source(v)
            tag_wrong = f"{self.mutate(mutation)}:{KIND_ANN.get(wrong.t['tp'], 'V')} for {KIND_ANN.get(v.t['tp'], 'V')}"
            good, bad = wrong, good  # the wrong-typed source is the one that runs
        name = self.fresh("h")
        cond = self.condition(taken == "if")
        run_tag = tag_wrong or "ok:branch:runs"
        if one_armed:
            # ``h = A; if cond: h = B``: B runs when the condition holds
            first, second = (bad, good) if taken == "if" else (good, bad)
            second_tag = run_tag if taken == "if" else "ok:branch:skipped"
            first_tag = run_tag if taken != "if" else "ok:branch:overwritten"
            self.emit(f"{name} = {self.copy_of(first)}", first_tag)
            self.emit(f"if {cond}:", "ok:branch:condition")
            self.emit(f"    {name} = {self.copy_of(second)}", second_tag)
        else:
            arms = (good, bad) if taken == "if" else (bad, good)
            self.emit(f"if {cond}:", "ok:branch:condition")
            self.emit(f"    {name} = {self.copy_of(arms[0])}", run_tag if taken == "if" else "ok:branch:skipped")
            self.emit("else:", "ok:branch:else")
            self.emit(f"    {name} = {self.copy_of(arms[1])}", run_tag if taken == "else" else "ok:branch:skipped")
        h = Val(name, v.shape, dict(v.t), True, good.bounded, mag=good.mag)
        self.vals.append(h)
        if self.coin(80):
            self.inplace_on(h)
        return h

    def inplace(self, v: Val, mutation: str | None = None) -> Val:
        """A fresh copy of v, changed in place (right, or a mutation that adds a number to a pending sum or a P
        input to an R/I value)."""
        name = self.fresh("h")
        self.emit(f"{name} = {self.copy_of(v)}", "ok:inplace:copy")
        h = Val(name, v.shape, dict(v.t), True, v.bounded, mag=v.mag)
        self.vals.append(h)
        if mutation == "inplace_affine_pending":
            f = self.pick(["{}.add_(1.0)", "{} += 1.0", "{}.sub_(0.5)"])
            self.emit(f.format(name), f"{self.mutate(mutation)}:{f.format('x')}")
            h.mag += 1
        elif mutation == "inplace_partial":
            p = self.p_input(v)
            f = self.pick(["{}.add_({})", "{} += {}"])
            self.emit(f.format(name, p.name), f"{self.mutate(mutation)}:{f.format('x', 'p')}")
            h.mag += 1
        else:
            self.inplace_on(h)
        return h

    def inplace_on(self, h: Val) -> None:
        """A right in-place op on h (a fresh copy): scaling, a number (not on a pending sum), a value of h's type,
        a P input on a pending sum; sometimes an ``assert_type`` of h's (unchanged) type after it."""
        forms = [("{}.mul_(2.0)", 2.0), ("{} *= 0.5", 0.5), ("{}.div_(2.0)", 0.5)]
        if not h.pending:
            forms.append(("{}.add_(1.0)", None))
        same = self.same_type_candidates(h)
        if same:
            forms += [("{}.add_(" + u.name + ")", u) for u in same[-2:]] + [("{} += " + same[-1].name, same[-1])]
        f, what = self.pick(forms)
        self.emit(f.format(h.name), "ok:inplace:" + f.format("x"))
        if isinstance(what, float):
            h.mag *= what
        elif what is None:
            h.mag += 1
        else:
            h.mag += what.mag
        if h.mag > 6 or h.mag < 0.2:  # rescaled in place, as the tame step would, so the next step sees ~1
            factor = 2.0 ** -round(math.log2(h.mag))
            self.emit(f"{h.name}.mul_({factor:g})", "ok:inplace:tame")
            h.mag *= factor
        # spmdcheck's local view of a pending sum (Vp) has no annotation: only other types are asserted
        if all(k in KIND_ANN for k in h.t.values()) and self.coin(40):
            self.emit(f"spmd.assert_type({h.name}, {ann(h.t, self.mesh)})", "ok:inplace:assert_type")

    def branch_room(self) -> bool:
        return self.branches and len(self.body) + self.BRANCH_LINES <= self.limit

    # ------------------------------------------------------------------ choosing a step
    def ok_steps(self, v: Val) -> list:
        """(name, function) pairs, repeated by weight: products and collectives more often than scaling."""
        tp = v.t["tp"]
        out = [("scale", self.scale), ("gamma", self.gamma)]
        if not v.pending:
            out += [("nonlin", self.nonlin)] * 2 + [("affine", self.affine), ("bias", self.bias)]
            if v.shape[-1] > 1:
                out.append(("rmsnorm", self.rmsnorm_sharded if tp == "S1" else self.rmsnorm_local))
            if v.shape[0] > 1 and tp in ("R", "I", "S0", "S1"):
                out.append(("center", self.center))
        if self.residual_candidates(v):
            out.append(("residual", self.residual))
        if tp == "I":
            out += [("rep_matmul", self.rep_matmul)] + [("to_R", self.to_R)] * 4 + [
                ("to_S0", self.to_S0), ("to_S1", self.to_S1), ("add_partial", self.add_partial)]
        elif tp == "R":
            out += [("col_matmul", self.col_matmul)] * 4 + [
                ("rep_matmul", self.rep_matmul), ("to_S0", self.to_S0), ("to_S1", self.to_S1),
                ("add_partial", self.add_partial)]
        elif tp == "S0":
            out += [("rep_matmul", self.rep_matmul)] * 2 + [("gather", self.gather)] * 3 + [
                ("add_partial", self.add_partial)]
        elif tp == "S1":
            out += [("row_matmul", self.row_matmul)] * 4 + [("gather", self.gather), ("add_partial", self.add_partial)]
        elif tp in PENDING:
            out += [("reduce", self.reduce)] * 4 + [("reduce_scatter", self.reduce_scatter)] * 2 + [
                ("rep_matmul", self.rep_matmul), ("raw_stat", self.raw_stat)]
            if tp == "Vp":
                out.append(("reinterpret", self.reinterpret))
            if tp == "P":
                out.append(("add_partial", self.add_partial))
        if self.branch_room():
            out += [("branch", self.branch)] * 2 + [("inplace", self.inplace)]
        return out

    def mut_steps(self, v: Val) -> list:
        tp = v.t["tp"]
        out: list = []
        if tp in PENDING:
            out += [("nonlinear_pending", lambda v: self.nonlin(v, "mut")),
                    ("affine_pending", lambda v: self.affine(v, "mut")),
                    ("bias_before_reduce", lambda v: self.bias(v, "mut")),
                    ("square_pending", self.square_pending),
                    ("drop_reduce", lambda v: self.reduce(v, "drop_reduce")),
                    ("swap_dst", lambda v: self.reduce(v, "swap_dst")),
                    ("copy_for_reduce", lambda v: self.reduce(v, "copy_for_reduce")),
                    ("raw_autograd", lambda v: self.reduce(v, "raw_autograd"))]
            if self.dp:
                out.append(("wrong_axis", lambda v: self.reduce(v, "wrong_axis")))
        if tp == "S1":
            out += [("bias_before_reduce", lambda v: self.row_matmul(v, "bias_before_reduce")),
                    ("mean_then_reduce", lambda v: self.rmsnorm_sharded(v, "mean_then_reduce")),
                    ("local_mean", lambda v: self.rmsnorm_sharded(v, "local_mean")),
                    ("drop_reduce", lambda v: self.rmsnorm_sharded(v, "drop_reduce")),
                    ("swap_dst", lambda v: self.rmsnorm_sharded(v, "swap_dst")),
                    ("swap_dst", lambda v: self.gather(v, "swap_dst")),
                    ("wrong_gather_dim", lambda v: self.gather(v, "wrong_gather_dim"))]
        if tp == "S0":
            out += [("swap_dst", lambda v: self.gather(v, "swap_dst")),
                    ("wrong_gather_dim", lambda v: self.gather(v, "wrong_gather_dim")),
                    ("invariant_weight", lambda v: self.rep_matmul(v, "invariant_weight"))]
        if tp == "I":
            out += [("drop_convert", lambda v: self.col_matmul(v, self.mutate("drop_convert") + ":column on I")),
                    ("drop_convert", lambda v: self.to_R(v, "drop_convert")),
                    ("reduce_for_copy", lambda v: self.to_R(v, "reduce_for_copy")),
                    ("double_reduce", self.double_reduce)]
        if tp == "R":
            out += [("double_reduce", self.double_reduce),
                    ("scatter_on_R", lambda v: self.to_S0(v, "scatter_on_R")),
                    ("scatter_on_R", lambda v: self.to_S1(v, "scatter_on_R")),
                    ("partial_unreduced", lambda v: self.add_partial(v, "partial_unreduced")),
                    ("invariant_weight", lambda v: self.rep_matmul(v, "invariant_weight"))]
        if tp in ("R", "I") and self.mix_candidates(v):
            out.append(("invariant_mix", self.invariant_mix))
        if not v.pending and v.shape[0] > 1 and any(v.t[a] == "S0" for a in self.mesh):
            out += [("mean_then_reduce", lambda v: self.center(v, "mean_then_reduce")),
                    ("local_mean", lambda v: self.center(v, "local_mean")),
                    ("drop_reduce", lambda v: self.center(v, "drop_reduce")),
                    ("swap_dst", lambda v: self.center(v, "swap_dst"))]
        if self.dp and tp in ("R", "S0", "S1", "I") and not v.pending:
            out.append(("invariant_weight", lambda v: self.rep_matmul(v, "invariant_weight")))
        if self.branch_room():
            if tp in ("R", "I", "P", "Vp") and all(v.t[a] in KIND_ANN for a in self.mesh if a != "tp"):
                out += [("branch_type", lambda v: self.branch(v, "branch_type"))] * 2
            if tp in PENDING:
                out.append(("inplace_affine_pending", lambda v: self.inplace(v, "inplace_affine_pending")))
            if tp in ("R", "I"):
                out.append(("inplace_partial", lambda v: self.inplace(v, "inplace_partial")))
        return out

    def tame(self, v: Val) -> Val:
        """Scale a value that has grown large, or small, back to about 1 (a linear step: right for every type).
        Too large, and float32 rounding (reordered across ranks) exceeds the harness's tolerances on a small
        entry: a correct program would "differ". Too small, and the tolerance's absolute floor (1e-5) hides real
        differences: a bug would "match"."""
        factor = 2.0 ** -round(math.log2(v.mag))
        return self.value("h", f"{v.name} * {factor:g}", "ok:scale:tame", v.shape, v.t, bounded=v.bounded,
                          mag=v.mag * factor)

    def step(self, v: Val, force: bool = False) -> Val:
        """One step: a mutation of a target kind when one applies here (most of the time), any mutation
        with ``force``, else (while targets remain, often) a step round the cycle I -> R -> S(1) ->
        pending -> R/I, S(0) -> R/I that reaches every state where some kind applies, else a correct step."""
        self.cur_mag = v.mag
        if not 0.2 < v.mag < 6:
            return self.tame(v)
        if self.mut_budget > 0:
            all_muts = [m for m in self.mut_steps(v) if m[0] in self.allowed]
            hits = [m for m in all_muts if m[0] in self.targets]
            if hits and self.coin(80):
                return self.pick(hits)[1](v)
            if force and all_muts:
                return self.pick(all_muts)[1](v)
            if self.targets and self.coin(50):
                steer = {"I": self.to_R, "R": self.col_matmul, "S0": self.gather, "S1": self.row_matmul,
                         "Vp": self.reduce, "P": self.reduce}[v.t["tp"]]
                return steer(v)
        return self.pick(self.ok_steps(v))[1](v)

    # ------------------------------------------------------------------ the end
    def finish_tensor(self, v: Val, mutate: bool) -> Val:
        """Make the activation returnable: a pending tp sum is reduced, scattered or declared P."""
        if v.t["tp"] == "Vp" or (v.t["tp"] == "P" and self.coin(50)):
            if mutate:
                kinds = [k for k in ["drop_reduce", "swap_dst", "copy_for_reduce", "raw_autograd"]
                         + (["wrong_axis"] if self.dp else []) if k in self.allowed]
                if kinds:
                    return self.reduce(v, self.pick([k for k in kinds if k in self.targets] or kinds))
            how = self.pick(["reduce", "reduce_scatter", "reinterpret"] if v.t["tp"] == "Vp"
                            else ["reduce", "reduce_scatter"])
            return getattr(self, how)(v)
        return v

    def finish_loss(self, v: Val, mutate: bool) -> tuple[Val, bool]:
        """A scalar loss from the activation, reduced on every axis that shards it; maybe backward()."""
        # never a bare ``x.sum()``: its backward hands an expanded (stride-0) gradient to whatever produced x,
        # and spmd-types 0.3.1's all_reduce(dst=R) / convert(I->R) backward asserts a contiguous gradient
        # (docs/ground_truth.md, Findings) -- a crash of the library, not of the program
        if v.pending:
            forms = ["({} * 0.5).sum()"]
        else:
            forms = ["{}.pow(2).sum()", "({} * {}).sum()", "torch.tanh({}).sum()", "({} * 0.5).sum()"]
        f = self.pick(forms)
        lt = {a: ("Vp" if v.t[a] in ("S0", "S1") else v.t[a]) for a in self.mesh}
        mean_mut = (mutate and "mean_then_reduce" in self.allowed and not v.pending
                    and any(k == "Vp" for k in lt.values()) and self.coin(30))
        if mean_mut:
            code, tag = f"{v.name}.pow(2).mean()", f"{self.mutate('mean_then_reduce')}:loss mean over sharded dims"
        else:
            code, tag = f.replace("{}", v.name), "ok:loss:" + f.replace("{}", "x")
        loss = self.value("loss", code, tag, (), lt)
        if not mean_mut and not v.pending and self.coin(30):
            n = 1
            for s in v.shape:
                n *= s
            loss = self.value("loss", f"{loss.name} / {n}", "ok:loss:mean", (), lt)
        loss_targets = [k for k in ("loss_dst_R",) if k in self.targets]
        self_backward = bool(loss_targets) or self.coin(35)
        victim = None
        loss_kinds = [k for k in ("loss_dst_R",) if k in self.allowed]
        if mutate and self_backward and loss_kinds and any(lt[a] in PENDING for a in self.mesh):
            victim = self.pick([a for a in self.mesh if lt[a] in PENDING])
            kind = self.pick(loss_targets or loss_kinds)
        for a in self.mesh:
            k = lt[a]
            if k not in PENDING:
                continue
            if a == victim:
                lt[a] = "I"
                loss = self.value("loss", f'spmd.all_reduce({loss.name}, "{a}", src=P, dst=R)',
                                  f"{self.mutate(kind)}:R loss", (), lt)
                continue
            options = ["I", "R"] if not self_backward else ["I"]
            if k == "Vp":
                options.append("P")
            elif k == "P":
                options.append("keep")
            how = self.pick(options)
            if how == "keep":
                continue
            lt[a] = how
            if how == "P":
                loss = self.value("loss", f'spmd.reinterpret({loss.name}, "{a}", src=V, dst=P)',
                                  "ok:loss:reinterpret V->P", (), lt)
            else:
                loss = self.value("loss", f'spmd.all_reduce({loss.name}, "{a}", src=P, dst={how})',
                                  f"ok:loss:reduce->{how}", (), lt)
        if self_backward and all(lt[a] in ("I", "P") for a in self.mesh) or victim is not None:
            self.emit(f"{loss.name}.backward()", "ok:loss:backward")
        return loss, True


@st.composite
def programs(draw, mutate: bool | None = None, kinds: tuple[str, ...] | None = None,  # noqa: ANN001
             branches: bool = False) -> Program:
    """A random program in the fixture convention. ``mutate``: force a correct (False) or a mutated
    (True) program; None lets hypothesis choose (about half and half). ``kinds``: the mutation kinds to
    aim for (default: all of ``MUTATIONS``, and of ``BRANCH_MUTATIONS`` with ``branches``). ``branches``:
    also if/else and in-place steps (off, the draws are exactly those of the generator without them)."""
    mesh = draw(st.sampled_from([("tp",), ("tp",), ("dp", "tp")]))
    T = draw(st.sampled_from([8, 4]))  # noqa: N806
    H = draw(st.sampled_from([8, 4]))  # noqa: N806
    F = draw(st.sampled_from([8, 16]))  # noqa: N806
    if mutate is None:
        mutate = draw(st.booleans())
    n_mut = draw(st.sampled_from([1, 1, 1, 2])) if mutate else 0
    g = Gen(draw, mesh, T, H, F, n_mut)
    g.branches = branches
    out_mode = draw(st.sampled_from(["tensor", "tensor", "loss", "pair"]))
    allowed = [k for k in (kinds or (ALL_MUTATIONS if branches else MUTATIONS))
               if (k != "wrong_axis" or g.dp) and (not k.startswith("loss_") or out_mode == "loss")]
    g.targets = [draw(st.sampled_from(allowed)) for _ in range(n_mut)] if allowed else []
    g.allowed = set(allowed)
    g.goals = list(g.targets)
    target = draw(st.sampled_from(range(MIN_STATEMENTS, MAX_STATEMENTS + 1)))
    x_tp = draw(st.sampled_from(["I", "R", "S0"]))
    x = g.param("x", (T, H), g.types(x_tp, "S0"), "activation")
    v = x
    # a step emits at most 4 lines; the end takes what room is left (a pending sum's reduction and the return
    # need at most 4, a loss at most 6): optional end steps are skipped when they would not fit
    lo = min(max(MIN_STATEMENTS - 1, target - 6), MAX_STATEMENTS - 7)
    g.limit = lo
    while len(g.body) < lo:
        late = len(g.body) >= lo - 2 and not any(k.startswith("loss_") for k in g.targets)
        v = g.step(v, force=late)
    def room() -> int:
        return MAX_STATEMENTS - len(g.body)

    if not 0.2 < v.mag < 6 and room() >= 6:
        v = g.tame(v)
    if out_mode == "loss" and room() < 7:
        out_mode = "tensor"
    extra: Val | None = None
    if out_mode == "pair":
        pool = [u for u in g.vals if u is not v and not u.pending and u.role in ("value", "activation")]
        extra = draw(st.sampled_from(pool)) if pool else None
        if extra is None:
            out_mode = "tensor"
    if out_mode == "loss":
        v, _ = g.finish_loss(v, g.mut_budget > 0)
    else:
        g.limit = MAX_STATEMENTS - 1  # a forced step keeps v's type: not pending, only the return follows
        if g.mut_budget > 0 and not v.pending and [m for m in g.mut_steps(v) if m[0] in g.allowed] and room() >= 8:
            v = g.step(v, force=True)
        v = g.finish_tensor(v, g.mut_budget > 0 and v.pending)
    outs = [v] if extra is None else [v, extra]
    ret = ", ".join(o.name for o in outs)
    g.emit(f"return {ret}", "ok:return")
    rtypes = [f"Annotated[torch.Tensor, {ann(o.t, mesh, g.spell(o.shape, o.t))}]" for o in outs]
    rtype = rtypes[0] if len(rtypes) == 1 else "tuple[" + ", ".join(rtypes) + "]"
    return render(g, rtype, out_mode)


def render(g: Gen, rtype: str, out_mode: str) -> Program:
    import re

    mesh = g.mesh
    sig = [f"    {p.name}: Annotated[torch.Tensor, {ann(p.t, mesh, p.spelling)}]," for p in g.params]
    code = "\n".join([*sig, rtype, *(c for c, _ in g.body)])
    used = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", code))
    megatron = [n for n in MEGATRON_NAMES if n in used]
    letters = [n for n in ("I", "P", "R", "S", "V") if n in used]
    head = [
        f"# spmdcheck: mesh = [{', '.join(repr(a).replace(chr(39), chr(34)) for a in mesh)}]",
        '"""Generated by tests/fuzz (' + (", ".join(g.mutations) if g.mutations else "correct by construction")
        + ')."""',
        "from typing import Annotated",
        "",
        "import torch",
        *(["import torch.distributed as dist"] if "dist" in used else []),
        *(["import torch.nn.functional as F"] if "F" in used else []),
        *(["from megatron.core import parallel_state"] if "parallel_state" in used else []),
        *(["from megatron.core.tensor_parallel import (", *(f"    {n}," for n in megatron), ")"] if megatron else []),
        "",
        "import spmd_types as spmd",
        *([f"from spmd_types import {', '.join(letters)}"] if letters else []),
        "",
        "GLOBAL_SHAPES = {",
        *(f'    "{p.name}": {p.shape!r},' for p in g.params),
        "}",
        "",
        "",
        "def step(",
        *sig,
        f") -> {rtype}:",
    ]
    first = len(head) + 1
    lines = head + [f"    {c}" for c, _ in g.body]
    source = "\n".join(lines) + "\n"
    assert MIN_STATEMENTS <= len(g.body) <= MAX_STATEMENTS, len(g.body)
    return Program(source, mesh, list(g.body), first, list(g.mutations), out_mode, list(g.params), list(g.goals))
