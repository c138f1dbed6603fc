"""Each code's violation is defined once (diagnostics/violations/): tied to its code and page, words its message.

The messages here are the exact text users see (and fixtures pin): a change to one is a change of output.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import pickle
import re

import libcst as cst
import pytest
from conftest import ROOT

from spmdcheck.analysis.findings import Finding
from spmdcheck.diagnostics.codes import CODES
from spmdcheck.diagnostics.render import diagnostic_of
from spmdcheck.diagnostics.violation import Violation
from spmdcheck.diagnostics.violations.accumulation import AccumulationSyncMisplaced
from spmdcheck.diagnostics.violations.collectives import (
    CollectiveSrcMismatch,
    CollectiveUntyped,
    DoubleReduction,
    ExpertModeRequired,
    ForbiddenTransition,
    RawCollectiveOnAutogradPath,
    WrongShardDim,
)
from spmdcheck.diagnostics.violations.contracts import (
    ArgumentTypeMismatch,
    AssertTypeMismatch,
    ContractInputWithoutSource,
    InvalidLossType,
    RedistributeToPartial,
    ReturnTypeMismatch,
    UnreducedContractOutput,
)
from spmdcheck.diagnostics.violations.control_flow import CollectiveInRankBranch, RankSpecificGraph
from spmdcheck.diagnostics.violations.gradient_norms import ClipNormWrongAxes
from spmdcheck.diagnostics.violations.gradients import (
    DoubleGradientReduction,
    GradientAveragedTwice,
    GradientReductionWrongGroup,
    MissingGradientReduction,
)
from spmdcheck.diagnostics.violations.inference import (
    AXIS_RULE_VIOLATIONS,
    DTensorLocalMix,
    InplaceTypeChange,
    InvariantMixing,
    MissingAxis,
    MixedShardLayout,
    PartialAffine,
    PartialInDivisor,
    PartialSeveralFactors,
    PartialThroughNonlinear,
    PartialWithVarying,
    SetitemTypeChange,
    ShardedDimMismatch,
)
from spmdcheck.diagnostics.violations.inputs import (
    ConfigError,
    InternalError,
    MalformedAnnotation,
    MalformedEinsum,
    SyntaxErrorFound,
    UnknownAxis,
    UnusedSuppression,
)
from spmdcheck.diagnostics.violations.notes import RevealType
from spmdcheck.diagnostics.violations.pending import PendingSumMisuse, ReducedLocalMean
from spmdcheck.diagnostics.violations.registry import ALL, BY_CODE, violation_class
from spmdcheck.lattice import AxisType, Kind, P, R, Rule, S, V

PAGES = ROOT / "spmdcheck" / "diagnostics" / "pages"

# One example of every violation with the exact message it gives (each form of the ones with several).
EXAMPLES: list[tuple[Violation, str]] = [
    (InternalError("analysis budget exceeded"), "analysis budget exceeded; the file was not checked"),
    (
        InternalError("boom", "KeyError", "calls.py:12"),
        "internal error: KeyError: boom (at calls.py:12)",
    ),
    (InternalError("boom", "KeyError"), "internal error: KeyError: boom"),
    (SyntaxErrorFound("syntax", "bad input"), "syntax error: bad input; the file was not checked"),
    (SyntaxErrorFound("undecodable", "cannot decode the file as utf-8"), "cannot decode the file as utf-8"),
    (
        SyntaxErrorFound("deep-expression", depth=300, limit=200),
        "expression nested 300 levels deep (the limit is 200): it was not analysed (read as an unknown value); "
        "the rest of the file was checked",
    ),
    (SyntaxErrorFound("too-deep"), "file is too deeply nested to analyse"),
    (MalformedAnnotation("unreadable", "no such type"), "cannot read this SPMD type: no such type"),
    (MalformedAnnotation("merge", "axis 'tp' given twice"), "axis 'tp' given twice"),
    (MalformedAnnotation("no-types"), "assert_type needs at least one type"),
    (
        MalformedAnnotation("bare-without-mesh"),
        "a bare type fills the axes of the current mesh, but no mesh is in scope (set [tool.spmdcheck] mesh or "
        "use set_current_mesh)",
    ),
    (
        MalformedAnnotation("bad-type-argument", api="all_reduce", param="src"),
        "`all_reduce`: src= must be R, I, V, P or S(d) (a bare `S` needs its dim)",
    ),
    (MalformedAnnotation("shard-dim-range", limit=64), "S(d) out of range: a tensor has at most 64 dims"),
    (MalformedAnnotation("shard-dim-not-int"), "S(d) needs an integer dim"),
    (MalformedAnnotation("local-spec"), 'Local(...) takes a string like "tp: V, dp: S(0)"'),
    (UnknownAxis("tq", ("tp", "dp")), "unknown mesh axis 'tq'; the mesh in scope has dp, tp"),
    (MalformedEinsum("unbalanced arrow"), "malformed einsum equation: unbalanced arrow"),
    (MalformedEinsum("2 operands, 3 given", "torch.einsum"), "`torch.einsum`: 2 operands, 3 given"),
    (ConfigError("setting", "mesh: not a list"), "mesh: not a list"),
    (ConfigError("stub", "x.pyi:3: bad rule"), "stub error: x.pyi:3: bad rule"),
    (ConfigError("unreadable", "Permission denied"), "cannot read file: Permission denied"),
    (
        UnusedSuppression("# noqa: SPMD101", ("SPMD101",)),
        "unused suppression `# noqa: SPMD101`: nothing to suppress for SPMD101",
    ),
    (
        UnusedSuppression("# noqa: SPMD999", ("SPMD999",), unknown=("SPMD999",)),
        "unused suppression `# noqa: SPMD999`: unknown code SPMD999",
    ),
    (
        UnusedSuppression("# spmdcheck: ignore-file[SPMD501]", ("SPMD501",), whole_file=True),
        "unused suppression `# spmdcheck: ignore-file[SPMD501]`: no finding of SPMD501 in this file",
    ),
    (
        PartialThroughNonlinear("F.gelu", "tp", (("h", "P"),)),
        "Partial on axis 'tp' goes through non-linear `F.gelu`: f(sum) != sum(f); reduce first (operands: `h`: P)",
    ),
    (
        InvariantMixing("F.linear", "tp", (("x", "I"), ("w1", "S(0)"))),
        "Invariant on axis 'tp' cannot be mixed with other types: its gradient would not be all-reduced "
        "(operands: `x`: I, `w1`: S(0))",
    ),
    (
        PartialWithVarying("torch.add", "tp", (("a", "P"), ("b", "V"))),
        "Partial on axis 'tp' cannot be combined with Varying; reduce the Partial first (operands: `a`: P, `b`: V)",
    ),
    (
        PartialAffine("F.linear", "tp", (("b", "R"),), product="P"),
        "`F.linear` adds a Replicate or scalar term to a Partial on axis 'tp': it is counted once per rank "
        "(operands: product: P, `b`: R)",
    ),
    (
        PartialSeveralFactors("torch.mul", "tp", (("a", "P"), ("b", "P"))),
        "more than one factor of `torch.mul` is Partial on axis 'tp'; reduce all but one (operands: `a`: P, `b`: P)",
    ),
    (
        PartialInDivisor("torch.div", "tp", (("x", "R"), ("n", "Scalar"))),
        "`torch.div` divides by a Partial on axis 'tp'; reduce it first (operands: `x`: R, `n`: Scalar)",
    ),
    (
        MissingAxis("torch.add", "x", "dp", ("tp",)),
        "`torch.add`: operand `x` has no type on axis 'dp' (it has tp); every operand needs every mesh axis in "
        "strict mode",
    ),
    (
        MissingAxis("torch.add", "x", "dp", ()),
        "`torch.add`: operand `x` has no type on axis 'dp' (it has no axes); every operand needs every mesh axis "
        "in strict mode",
    ),
    (
        ShardedDimMismatch("F.linear", "bi,oi->bo", "i", "tp", "w", "x", (("x", "R"), ("w", "S(1)"))),
        "`F.linear` (bi,oi->bo): label 'i' is sharded on axis 'tp' in `w` but whole in `x`; the local shapes "
        "cannot match (`x`: R, `w`: S(1))",
    ),
    (
        MixedShardLayout("torch.matmul", "ij,jk->ik", "tp", ("i", "k"), (("a", "S(0)"), ("b", "S(1)"))),
        "`torch.matmul` (ij,jk->ik): labels i, k sharded on axis 'tp' across the operands; each rank computes a "
        "block with no global layout (`a`: S(0), `b`: S(1))",
    ),
    (
        MixedShardLayout("torch.einsum", "ii->i", "tp", (), (("a", "S(0)"),)),
        "`torch.einsum` (ii->i): a repeated label on the sharded dim sharded on axis 'tp' across the operands; "
        "each rank computes a block with no global layout (`a`: S(0))",
    ),
    (
        InplaceTypeChange("Tensor.add_", "buf", "tp", AxisType(Kind.R), AxisType(Kind.P)),
        "`Tensor.add_` would change the type of `buf` on axis 'tp' from R to P; an in-place write must keep its "
        "destination's type",
    ),
    (
        SetitemTypeChange("x[...] = y", "x", "tp", AxisType(Kind.R), S(0)),
        "`x[...] = y` would change the type of `x` on axis 'tp' from R to S(0); an in-place write must keep its "
        "destination's type",
    ),
    (
        PendingSumMisuse("tp", 42, "acts.out", "F.gelu", Rule.PARTIAL_NONLINEAR),
        "`acts.out` is a per-rank partial sum on axis 'tp' (from the sharded contraction at {site:42}) and goes "
        "through non-linear `F.gelu` before it is reduced",
    ),
    (
        PendingSumMisuse("tp", 7, op="F.linear (bias)", rule=Rule.PARTIAL_AFFINE, of_product=True),
        "`the product` is a per-rank partial sum on axis 'tp' (from the sharded contraction at {site:7}) and gets a "
        "Replicate or scalar term added by `F.linear (bias)` (counted once per rank) before it is reduced",
    ),
    (
        PendingSumMisuse("tp", 3, "y", "all_gather"),
        "`y` is a per-rank partial sum on axis 'tp' (from the sharded contraction at {site:3}) and reaches "
        "`all_gather` before it is reduced",
    ),
    (
        PendingSumMisuse("tp", 34, declared="I"),
        "a per-rank partial sum on axis 'tp' (from the sharded contraction at {site:34}) is declared I before it "
        "is reduced",
    ),
    (
        ReducedLocalMean("m", "dp", 5, "all_reduce"),
        "`m` holds per-rank means over a dim sharded on axis 'dp' (from {site:5}); `all_reduce` sums them, which "
        "is the axis size times the global mean: take the local sum, reduce it, then divide by the global count",
    ),
    (
        CollectiveSrcMismatch("all_reduce", AxisType(Kind.P), "tp", "y", AxisType(Kind.V)),
        "`all_reduce` expects P on axis 'tp' but `y` is V",
    ),
    (
        DoubleReduction("all_reduce", "tp", "y", AxisType(Kind.R), 9),
        "`all_reduce` expects a Partial on axis 'tp' but `y` is R: it is already reduced (by the reduction at "
        "{site:9}), and reducing again multiplies it by the axis size",
    ),
    (
        DoubleReduction("all_reduce", "tp", "y", AxisType(Kind.I)),
        "`all_reduce` expects a Partial on axis 'tp' but `y` is I: it is already reduced, and reducing again "
        "multiplies it by the axis size",
    ),
    (
        ForbiddenTransition("convert", "not-allowed", AxisType(P), AxisType(R), use_instead="all_reduce"),
        "`convert` does not allow src=P -> dst=R; use `all_reduce` instead",
    ),
    (
        ForbiddenTransition("convert", "not-allowed", AxisType(P), AxisType(V)),
        "`convert` does not allow src=P -> dst=V",
    ),
    (
        ForbiddenTransition(
            "all_reduce", "rejected", AxisType(R), AxisType(R), allowed_src=("V", "P"), already_same=True
        ),
        "`all_reduce` rejects src=R (allowed: P, V); reducing a value that is already the same on every rank "
        "multiplies it by the axis size",
    ),
    (
        ForbiddenTransition("all_gather", "rejected", S(0), AxisType(P), allowed_src=("V",), allowed_dst=("R", "I")),
        "`all_gather` rejects src=S(0) (allowed: V) and dst=P (allowed: I, R)",
    ),
    (ForbiddenTransition("reinterpret_no_grad", "requires-grad"), "reinterpret_no_grad on a tensor that requires grad"),
    (
        ExpertModeRequired("convert", AxisType(R), AxisType(Kind.I)),
        "`convert(src=R, dst=I)` needs expert_mode=True: it makes a Replicate value Invariant, which forward code "
        "rarely wants (it is the backward of convert(I, P))",
    ),
    (
        ExpertModeRequired("reinterpret", S(1), AxisType(P)),
        "`reinterpret(src=S(1), dst=P)` needs expert_mode=True: it places each rank's block into zeros",
    ),
    (
        ExpertModeRequired("redistribute", AxisType(V), AxisType(R)),
        "`redistribute(src=V, dst=R)` needs expert_mode=True: redistribute from V to R is an expert-only transition",
    ),
    (
        WrongShardDim("all_gather", S(0), "x", S(1), "tp"),
        "`all_gather` gathers/splits dim 0 (src=S(0)) but `x` is sharded on dim 1 on axis 'tp': the blocks would "
        "be concatenated along the wrong dim",
    ),
    (
        RawCollectiveOnAutogradPath("dist.all_reduce", "h"),
        "`dist.all_reduce` on `h`, which needs grad: raw torch.distributed collectives have no backward, so its "
        "gradient is silently wrong",
    ),
    (
        CollectiveUntyped("all_reduce", "x", "tp"),
        "`all_reduce`: `x` has no type on axis 'tp'; annotate it with assert_type first",
    ),
    (
        AssertTypeMismatch("assert_type", "tp", AxisType(P), AxisType(R)),
        "assert_type: on axis 'tp' the value is P but R is declared",
    ),
    (
        ReturnTypeMismatch("return value", "tp", AxisType(V), AxisType(Kind.I), pending_origin=34),
        "return value: on axis 'tp' the value is V but I is declared; it is a per-rank partial sum from the "
        "sharded contraction at {site:34} that was never reduced",
    ),
    (
        ArgumentTypeMismatch("local_map argument 0", "tp", S(1), S(0), "shard-dim"),
        "local_map argument 0: on axis 'tp' the value is sharded on dim 1 but S(0) is declared",
    ),
    (
        AssertTypeMismatch("mutate_type", "tp", AxisType(R), AxisType(P), "src"),
        "mutate_type: on axis 'tp' the value is R but src=P",
    ),
    (
        AssertTypeMismatch("mutate_type", "dp", None, None, "untyped"),
        "mutate_type: the value has no type on axis 'dp'",
    ),
    (
        InvalidLossType("loss", "dp", Kind.R),
        "backward() on `loss`, which is Replicate on axis 'dp': the implicit gradient 1.0 on every rank is read as "
        "a Partial, so gradients are over-counted by the axis size",
    ),
    (
        InvalidLossType("loss", "dp", Kind.V),
        "backward() on `loss`, which is Varying on axis 'dp': a per-rank loss must be declared the summands of the "
        "global loss",
    ),
    (
        UnreducedContractOutput("tp"),
        "the module's output is a pending sum on axis 'tp' (out_src) and the contract gives it no destination on "
        "that axis: nothing reduces it",
    ),
    (
        ContractInputWithoutSource("hidden"),
        "input `hidden` has a destination layout (in_dst) but no source layout (in_src): the module's wrapper "
        "cannot redistribute it and refuses the call",
    ),
    (
        CollectiveInRankBranch("all_reduce", "tp", "branch", 39),
        "`all_reduce` on axis 'tp' runs only on the ranks where the rank-dependent condition at {site:39} is true: "
        "the other ranks never join it (or join another collective), and the program hangs",
    ),
    (
        CollectiveInRankBranch("barrier", None, "branch", 4, arm=False),
        "`barrier` runs only on the ranks where the rank-dependent condition at {site:4} is false: the other ranks "
        "never join it (or join another collective), and the program hangs",
    ),
    (
        CollectiveInRankBranch("all_reduce", "dp", "early exit", 12),
        "`all_reduce` on axis 'dp' is reached only on some ranks of its group: the rank-dependent early exit at "
        "{site:12} lets the other ranks skip it (or run it another number of times), and the program hangs",
    ),
    (
        RankSpecificGraph("h", 8),
        "`h` is computed differently depending on the rank-dependent condition at {site:8} and used after it: a "
        "program compiled once and run on every rank would give some ranks the other branch's computation",
    ),
    (
        RankSpecificGraph("h", 8, loop=True),
        "`h` is computed differently depending on the rank-dependent loop count at {site:8} and used after it: a "
        "program compiled once and run on every rank would run the loop the same number of times on every rank",
    ),
    (
        RevealType("x", "{tp: V}", "{tp: V}"),
        "revealed type of `x`: forward {tp: V}; gradient {tp: V}",
    ),
    (RevealType("mesh"), "revealed type of `mesh`: not a tensor"),
    (
        MissingGradientReduction(("layers.*.norm.bias", "final_norm.bias"), "tp", None, "sequence_parallel"),
        "at the optimizer step the gradients of `layers.*.norm.bias`, `final_norm.bias` are still a per-rank "
        "partial sum over axis 'tp': no all-reduce over 'tp' reaches them, or the reduced values never get "
        "back into `.grad`, so each rank steps with its own share",
    ),
    (
        MissingGradientReduction(
            ("a", "b", "c", "d", "e", "f"), "tp", "sequence_parallel_enabled", "sequence_parallel"
        ),
        "at the optimizer step the gradients of `a`, `b`, `c`, `d` and 2 more are still a per-rank partial "
        "sum over axis 'tp': the reduction loop selects parameters by `sequence_parallel_enabled`, which none"
        " of them carries, so each rank steps with its own share",
    ),
    (
        MissingGradientReduction(("w1", "b1"), "dp", reducing_call="engine.backward(loss)"),
        "at the optimizer step the gradients of `w1`, `b1` are still a per-rank partial sum over axis 'dp': they "
        "went through a plain backward(), and only `engine.backward(loss)` reduces them, so each rank steps with "
        "its own share",
    ),
    (
        MissingGradientReduction(("w1",), "dp"),
        "at the optimizer step the gradient of `w1` is still a per-rank partial sum over axis 'dp': no "
        "all-reduce over 'dp' reaches it, or the reduced value never gets back into `.grad`, so each rank "
        "steps with its own share",
    ),
    (
        DoubleGradientReduction("dist.all_reduce", "param.grad", "dp", by_ddp=True),
        "`dist.all_reduce` sums the gradient `param.grad` over axis 'dp' again: DistributedDataParallel "
        "already averaged it during backward(), so the step uses 'dp'-size times the gradient",
    ),
    (
        DoubleGradientReduction("dist.all_reduce", "param.grad", "dp", first=7),
        "`dist.all_reduce` sums the gradient `param.grad` over axis 'dp' again: the reduction at {site:7} "
        "already summed it, so the step uses 'dp'-size times the gradient",
    ),
    (
        GradientReductionWrongGroup("dist.all_reduce", "param.grad", "dp", "allreduce = False"),
        "`dist.all_reduce` reduces the gradient `param.grad` over the whole 'dp' group, but its parameters "
        "are marked `allreduce = False`: different ranks of 'dp' hold different parameters (experts), and "
        "their gradients get mixed",
    ),
    (
        GradientAveragedTwice("dp", by_ddp=True),
        "this divides by the size of axis 'dp' and DistributedDataParallel also averages the gradients over "
        "it during backward(): the gradients are averaged twice, 'dp'-size times too small",
    ),
    (
        GradientAveragedTwice("dp", first=3),
        "this divides by the size of axis 'dp' and the gradient was already divided by it at {site:3}: the "
        "gradients are averaged twice, 'dp'-size times too small",
    ),
    (
        AccumulationSyncMisplaced("early", "dp", ("w1", "b1", "w2", "b2"), 4),
        "this backward() syncs the gradients of `w1`, `b1`, `w2` and 1 more on axis 'dp' (the hook registered"
        " at {site:4}) before the last micro-batch: the next backward() adds local gradients to the synced "
        "ones and the next sync sums the synced part again; run every backward() but the last inside "
        "`no_sync()`",
    ),
    (
        AccumulationSyncMisplaced("never", "dp", ("w1",), 4, 9),
        "the optimizer steps with the gradients of `w1` never synced on axis 'dp': the last backward() ran "
        "inside `no_sync()` (entered at {site:9}), so the hook registered at {site:4} never summed them and "
        "each rank steps with its own; run the last micro-batch's backward() outside `no_sync()`",
    ),
    (
        AccumulationSyncMisplaced("never", "dp", ("module.weight", "module.bias"), 2, 9, by_ddp=True),
        "the optimizer steps with the gradients of `module.weight`, `module.bias` never synced on axis 'dp': "
        "the last backward() ran inside `no_sync()` (entered at {site:9}), so the DistributedDataParallel "
        "wrapper made at {site:2} never summed them and each rank steps with its own; run the last "
        "micro-batch's backward() outside `no_sync()`",
    ),
    (
        ClipNormWrongAxes(
            ("tp",),
            duplicated=("tp",),
            replicated=("norm.weight", "norm.bias", "fc2.bias", "head.bias"),
            tensor_parallel="tp",
        ),
        "the squared gradient norm of global-norm clipping is summed over 'tp': gradients whole on every rank"
        " of 'tp' (`norm.weight`, `norm.bias`, `fc2.bias`, ...) are counted once per rank there: count them "
        "on one rank of 'tp' only (Megatron: `getattr(p, 'tensor_model_parallel', False) or tp_rank == 0`)",
    ),
    (
        ClipNormWrongAxes(("dp",), ("tp",), ("dp",), ("norm.weight",)),
        "the squared gradient norm of global-norm clipping is summed over 'dp': the gradients are sharded "
        "over 'tp', which this sum leaves out (each rank clips with the norm of its own shards); gradients "
        "whole on every rank of 'dp' (`norm.weight`) are counted once per rank there: leave 'dp' out of the "
        "sum",
    ),
    (
        ClipNormWrongAxes(("dp",), ("tp",)),
        "the squared gradient norm of global-norm clipping is summed over 'dp': the gradients are sharded "
        "over 'tp', which this sum leaves out (each rank clips with the norm of its own shards)",
    ),
    (
        DTensorLocalMix("Tensor.__add__", "w", "[Replicate()]", "bias"),
        "`Tensor.__add__` mixes DTensor `w` ([Replicate()]) with local tensor `bias`: PyTorch refuses mixed "
        "torch.Tensor and DTensor operands",
    ),
    (
        RedistributeToPartial("tp", "Replicate()"),
        "`redistribute` to Partial() on mesh dim 'tp', where the DTensor is Replicate(): PyTorch refuses a Partial "
        "target (redistributing to Partial is for its internal use)",
    ),
]


def test_every_code_has_exactly_one_violation_and_every_violation_a_code():
    codes = [v.code for v in ALL]
    assert sorted(codes) == sorted(CODES), "codes.py and diagnostics/violations/ must list the same codes"
    assert len(codes) == len(set(codes)), "a code defined by two violations"
    for violation in ALL:
        assert BY_CODE[violation.code] is violation
        assert violation_class(violation.code) is violation


@pytest.mark.parametrize("violation", ALL, ids=lambda v: v.code)
def test_each_violation_has_its_page_and_its_code_entry(violation):
    assert (PAGES / f"{violation.code}.md").is_file()
    assert violation.has_page()
    assert violation.info() is CODES[violation.code]
    assert violation.__init__ is Violation.__init__, "a violation is a record of its fields, built by Violation"


def test_violations_are_frozen_records_of_their_fields():
    made = PartialThroughNonlinear(op="relu", axis="tp", operands=(("x", "P"),))
    assert made == PartialThroughNonlinear("relu", "tp", (("x", "P"),), None)
    assert hash(made) == hash(PartialThroughNonlinear("relu", "tp", (("x", "P"),)))
    assert made != PartialThroughNonlinear(op="relu", axis="dp", operands=(("x", "P"),))
    assert made._fields == ("op", "axis", "operands", "product")  # the family base's fields first
    assert repr(made) == "PartialThroughNonlinear(op='relu', axis='tp', operands=(('x', 'P'),), product=None)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.axis = "dp"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(made)) == made == copy.deepcopy(made)  # (workers send findings pickled)
    with pytest.raises(TypeError, match="missing argument 'operands'"):
        PartialThroughNonlinear(op="relu", axis="tp")
    with pytest.raises(TypeError, match="unexpected or repeated argument 'axes'"):
        PartialThroughNonlinear(op="relu", axis="tp", operands=(), axes=())


def test_a_violation_of_an_unlisted_code_fails_at_definition():
    with pytest.raises(TypeError, match="SPMD998"):

        class Unlisted(Violation):
            code = "SPMD998"


def test_every_violation_has_an_example():
    assert {type(v) for v, _ in EXAMPLES} == set(ALL)


@pytest.mark.parametrize(
    "violation,message", EXAMPLES, ids=lambda x: type(x).__name__ if isinstance(x, Violation) else ""
)
def test_message(violation, message):
    assert violation.message == message
    assert violation.name == CODES[violation.code].name
    assert violation.severity == CODES[violation.code].severity
    # the only braces a message keeps are the renderer's site placeholders
    assert not re.sub(r"\{site:\d+\}", "", message.replace("{tp: V}", "")).count("{")


def test_axis_rule_violations_cover_every_rule_of_the_lattice():
    assert set(AXIS_RULE_VIOLATIONS) == set(Rule)
    assert all(v.rule is rule for rule, v in AXIS_RULE_VIOLATIONS.items())


def test_fix_titles():
    assert PendingSumMisuse("tp", 1, "y", "all_gather").fix_title == "reduce it instead"
    assert PendingSumMisuse("tp", 1, declared="S(0)").fix_title == "reduce-scatter it into the declared layout"
    assert PendingSumMisuse("tp", 1, declared="R").fix_title == "reduce it first"
    assert PendingSumMisuse("tp", 1, "h", "F.gelu", Rule.PARTIAL_NONLINEAR).fix_title.startswith(
        "reduce it first (all-reduce forward"
    )
    assert PendingSumMisuse("tp", 1, op="F.linear", rule=Rule.PARTIAL_AFFINE, of_product=True).fix_title.startswith(
        "reduce the product, then add the bias once"
    )
    assert WrongShardDim("all_gather", S(0), "x", S(1), "tp").fix_title == "use src=S(1)"
    assert InvalidLossType("loss", "dp", Kind.V).fix_title == "declare the per-rank losses as a pending sum"
    assert UnusedSuppression("# noqa: A1, SPMD101", ("SPMD101",), keep=("A1",)).fix_title == "keep only A1"
    assert UnusedSuppression("# noqa: SPMD101", ("SPMD101",), removal="line").fix_title == "remove the comment line"
    assert UnusedSuppression("# noqa: SPMD101", ("SPMD101",), removal="comment").fix_title == "remove the comment"
    assert UnknownAxis("tq", ("tp",)).fix_title is None


def test_finding_and_diagnostic_are_built_from_the_violation():
    node = cst.Name("x")
    violation = UnknownAxis("tq", ("tp",))
    finding = Finding.of(violation, node)
    assert (finding.code, finding.node, finding.message, finding.suggestions) == (
        "SPMD003",
        node,
        violation.message,
        [],
    )
    assert finding.severity is None  # the code's own severity, from codes.py
    diag = diagnostic_of("f.py", ConfigError("unreadable", "gone"), 3, 2)
    assert (diag.code, diag.name, diag.severity, diag.message, diag.line, diag.column) == (
        "SPMD005",
        "config-error",
        "error",
        "cannot read file: gone",
        3,
        2,
    )


# ---------------------------------------------------------------- no message is written outside violations/

# Every module of spmdcheck/ reports violations, not text: the only places that build a Finding or a
# Diagnostic themselves, or name a code as a string, are the mechanism that turns violations into them.
PACKAGE = ROOT / "spmdcheck"
MECHANISM = {
    "spmdcheck/diagnostics/codes.py": "the table of codes: each entry names its code",
    "spmdcheck/analysis/findings.py": "Finding itself: `of` makes one of a violation, `at_library_call` moves one",
    "spmdcheck/diagnostics/render.py": "turns findings and violations into diagnostics",
    "spmdcheck/engine/result_cache.py": "rebuilds the diagnostics a cached run stored",
}
_CODE = re.compile(r"SPMD\d{3}")
_BUILDERS = ("Finding", "make", "Diagnostic")  # a finding or diagnostic made from a code and a text


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def messages_built_outside_violations(source: str) -> list[str]:
    """Where `source` words a finding itself: builds a Finding or a diagnostic from a code, or names a code."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = _called_name(node)
        # `types.Diagnostic` (the language server's) is another class: only the bare name, or `x.Finding`
        if (name in _BUILDERS and isinstance(node.func, ast.Name)) or (
            name == "Finding" and isinstance(node.func, ast.Attribute)
        ):
            problems.append(f"line {node.lineno}: {name}(...) instead of a violation")
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and _CODE.fullmatch(arg.value):
                problems.append(f"line {node.lineno}: the code {arg.value} passed as a string")
            if name in ("of", "diagnostic_of") and isinstance(arg, ast.JoinedStr):
                problems.append(f"line {node.lineno}: an f-string message")
    return problems


def _package_modules() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", [p for p in _package_modules() if p not in MECHANISM])
def test_no_message_is_built_outside_violations(path):
    assert messages_built_outside_violations((ROOT / path).read_text(encoding="utf-8")) == []


def test_the_scan_covers_the_whole_package():
    modules = _package_modules()
    # the analysis, the driver and the server are all scanned (a glob that found nothing would pass vacuously)
    for part in ("spmdcheck/analysis/interp/", "spmdcheck/engine/", "spmdcheck/cli/", "spmdcheck/server/"):
        assert any(m.startswith(part) for m in modules if m not in MECHANISM), part
    assert len(modules) > 100


@pytest.mark.parametrize("path", sorted(MECHANISM))
def test_each_exempt_module_is_one_that_needs_it(path):
    # an exemption no longer needed is removed: the module is then scanned like every other
    assert messages_built_outside_violations((ROOT / path).read_text(encoding="utf-8")), MECHANISM[path]


def test_the_check_sees_a_message_written_at_the_site():
    site = 'interp.report(Finding("SPMD201", node, f"`{x}` is a per-rank partial sum"))\n'
    assert len(messages_built_outside_violations(site)) == 2
    assert messages_built_outside_violations('d = make(path, "SPMD005", "bad")\n')
    assert messages_built_outside_violations('d = Diagnostic(path, 1, 1, 1, 1, code, name, "error", text)\n')
    assert messages_built_outside_violations('f = findings.Finding(code, node, "text")\n')
    assert messages_built_outside_violations('ctx.report(Finding.of(f"`{x}` is bad", node))\n')
    assert messages_built_outside_violations("interp.report(Finding.of(UnknownAxis(a, k), node))\n") == []
    assert messages_built_outside_violations('d = diagnostic_of(path, ConfigError("stub", e))\n') == []


def test_a_finding_in_library_code_moves_to_the_users_call_with_its_words():
    inner = Finding.of(UnknownAxis("tq", ("tp",)), cst.Name("x"))
    inner.severity = "warning"
    call = cst.Call(cst.Name("helper"))
    origin = object()
    moved = inner.at_library_call(call, "helper", origin)
    assert (moved.code, moved.node, moved.origin, moved.severity) == ("SPMD003", call, origin, "warning")
    assert moved.message == "in library code `helper`: unknown mesh axis 'tq'; the mesh in scope has tp"


def test_a_violation_field_without_a_default_after_one_with_a_default_fails_at_definition():
    with pytest.raises(TypeError, match="without a default follows"):

        class Misordered(Violation):
            detail: str = ""
            line: int
