"""Tensor-parallel plans (analysis/tp_plans.py, tp_styles.py): the style table's defaults, plan keys matched
against the module tree (wildcards, `nn.ModuleList` indices, nested modules), and the mistakes a plan makes
at a module's boundary."""

from __future__ import annotations

import textwrap

import pytest

from spmdcheck.analysis import tp_styles
from spmdcheck.api import Settings, check_source

HEADER = textwrap.dedent(
    """
    import torch
    import torch.nn.functional as F
    from torch import nn
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )


    class FeedForward(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w1 = nn.Linear(8, 16)
            self.w2 = nn.Linear(16, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.w2(F.gelu(self.w1(x)))
    """
)


def _check(source: str, registry) -> list:  # noqa: ANN001
    return check_source(HEADER + textwrap.dedent(source), "<t>", Settings(mesh=("tp",)), registry)


def test_the_style_table_has_pytorchs_defaults():
    colwise = tp_styles.STYLES["torch.distributed.tensor.parallel.ColwiseParallel"]
    assert dict(colwise.linear_params) == {"weight": tp_styles.SHARD_0, "bias": tp_styles.SHARD_0}
    assert (colwise.input_layout, colwise.output_layout, colwise.use_local_output) == (
        tp_styles.REPLICATE_ALL,
        tp_styles.SHARD_LAST,
        True,
    )
    rowwise = tp_styles.STYLES["torch.distributed.tensor.parallel.style.RowwiseParallel"]
    assert dict(rowwise.linear_params) == {"weight": tp_styles.Placement("shard", 1), "bias": tp_styles.REPLICATE_ALL}
    assert (rowwise.input_layout, rowwise.computed_output, rowwise.output_layout) == (
        tp_styles.SHARD_LAST,
        tp_styles.PARTIAL_SUM,
        tp_styles.REPLICATE_ALL,
    )
    sequence = tp_styles.STYLES["torch.distributed.tensor.parallel.SequenceParallel"]
    assert (sequence.input_layout, sequence.use_local_output) == (tp_styles.SHARD_1, False)
    assert tp_styles.STYLES["torch.distributed.tensor.parallel.PrepareModuleInput"].use_local_output is False
    assert tp_styles.STYLES["torchtitan.distributed.tensor_parallel.NoParallel"].use_local_output is False
    # the local type each placement gives a plain tensor at the boundary
    assert [str(tp_styles.local_type(p)) for p in (tp_styles.SHARD_LAST, tp_styles.REPLICATE_ALL)] == ["S(-1)", "I"]
    assert str(tp_styles.local_type(tp_styles.PARTIAL_SUM)) == "P"


@pytest.mark.parametrize(
    "plan,codes",
    [
        ('{"w1": ColwiseParallel(), "w2": RowwiseParallel()}', []),
        ('{"w1": ColwiseParallel(), "w2": ColwiseParallel()}', ["SPMD403"]),  # two colwise in a row
        ('{"w*": ColwiseParallel()}', ["SPMD403"]),  # a wildcard plans both
        ('{"w2": RowwiseParallel()}', ["SPMD403"]),  # a rowwise fed the whole activation
        ('{"w2": RowwiseParallel(input_layouts=Replicate())}', []),
        ('{"w1": ColwiseParallel(output_layouts=Replicate()), "w2": RowwiseParallel()}', ["SPMD403"]),
        ('{"w1": ColwiseParallel(use_local_output=False), "w2": RowwiseParallel()}', []),  # a DTensor in between
        ('{"w3": ColwiseParallel()}', []),  # a key matching no submodule
        ('{"w1": ColwiseParallel(input_layouts=Shard(1)), "w2": RowwiseParallel()}', []),  # sequence parallel
    ],
)
def test_a_plans_boundaries_are_checked_in_forward(plan, codes, registry):
    diags = _check(
        f"""
        def build(mesh):
            return parallelize_module(FeedForward(), mesh, {plan})
        """,
        registry,
    )
    assert [d.code for d in diags] == codes, [d.message for d in diags]


def test_two_colwise_names_the_plan_entry_and_its_fix(registry):
    diags = _check(
        """
        def build(mesh):
            return parallelize_module(FeedForward(), mesh, {"w1": ColwiseParallel(), "w2": ColwiseParallel()})
        """,
        registry,
    )
    [diag] = diags
    assert "planned `ColwiseParallel()`" in diag.message and "S(-1) but I is declared" in diag.message
    assert [s.replacement for s in diag.suggestions] == ["RowwiseParallel()"]


NESTED = """
    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.feed_forward = FeedForward()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.feed_forward(x)


    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList([Block() for _ in range(2)])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for layer in self.layers:
                x = layer(x)
            return x


    def build(mesh):
        return parallelize_module(Model(), mesh, {PLAN})
    """


@pytest.mark.parametrize(
    "plan,codes",
    [
        ('{"layers.*.feed_forward.w1": ColwiseParallel(), "layers.*.feed_forward.w2": RowwiseParallel()}', []),
        ('{"layers.*.feed_forward.w1": ColwiseParallel(), "layers.*.feed_forward.w2": ColwiseParallel()}', ["SPMD403"]),
        ('{"layers.0.feed_forward.w*": ColwiseParallel()}', ["SPMD403"]),  # a ModuleList index
        # `w1` left out: the rowwise `w2` is fed its whole output (the root's input reaches it through the blocks)
        ('{"layers.*.feed_forward.w2": RowwiseParallel()}', ["SPMD403"]),
    ],
)
def test_plan_keys_reach_nested_modules(plan, codes, registry):
    diags = _check(NESTED.replace("{PLAN}", plan), registry)
    assert [d.code for d in diags] == codes, [d.message for d in diags]


def test_a_sequence_shard_handed_to_a_colwise_layer_that_takes_it_whole(registry):
    source = """
        class ThreeLayers(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.w1 = nn.Linear(8, 16)
                self.w2 = nn.Linear(16, 8)
                self.w3 = nn.Linear(8, 16)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.w3(self.w2(self.w1(x)))


        def build(mesh):
            plan = {"w1": ColwiseParallel(), "w2": RowwiseParallel(output_layouts=Shard(1)), "w3": W3}
            return parallelize_module(ThreeLayers(), mesh, plan)
        """
    [diag] = _check(source.replace("W3", "ColwiseParallel()"), registry)
    assert diag.code == "SPMD403" and "S(1) but I is declared" in diag.message
    assert [s.replacement for s in diag.suggestions] == ["ColwiseParallel(input_layouts=Shard(1))"]
    assert not _check(source.replace("W3", "ColwiseParallel(input_layouts=Shard(1))"), registry)


def test_an_unreadable_plan_is_silent(registry):
    diags = _check(
        """
        def build(mesh, name):
            return parallelize_module(FeedForward(), mesh, {name: ColwiseParallel(), "w2": ColwiseParallel()})
        """,
        registry,
    )
    assert not diags, [d.message for d in diags]


def test_a_module_left_out_between_colwise_and_rowwise_is_a_shape_error(registry):
    source = """
        class SwiGLU(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.w1 = nn.Linear(8, 16)
                self.w2 = nn.Linear(16, 8)
                self.w3 = nn.Linear(8, 16)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.w2(F.silu(self.w1(x)) * self.w3(x))


        def build(mesh):
            return parallelize_module(SwiGLU(), mesh, {PLAN})
        """
    missing = _check(source.replace("{PLAN}", '{"w1": ColwiseParallel(), "w2": RowwiseParallel()}'), registry)
    assert [d.code for d in missing] == ["SPMD108"], [d.message for d in missing]
    assert [s.replacement for s in missing[0].suggestions] == ['"w3": ColwiseParallel()']
    planned = '{"w1": ColwiseParallel(), "w3": ColwiseParallel(), "w2": RowwiseParallel()}'
    assert not _check(source.replace("{PLAN}", planned), registry)


PREPARED = """
    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wq = nn.Linear(8, 16)
            self.wo = nn.Linear(16, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.wo(self.wq(x))


    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attention = Attention()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.attention(x)


    def build(mesh):
        plan = {"attention": PREPARE, "attention.wq": ColwiseParallel(), "attention.wo": WO}
        return parallelize_module(Block(), mesh, plan)
    """


REPLICATED = "input_layouts=(Replicate(),), desired_input_layouts=(Replicate(),)"
SHARDED = "input_layouts=(Shard(-1),), desired_input_layouts=(Replicate(),)"


@pytest.mark.parametrize(
    "prepare,wo,codes",
    [
        (f"PrepareModuleInput({REPLICATED})", "RowwiseParallel()", []),
        # forward receives a local Invariant: the second colwise is still seen inside the prepared module
        (f"PrepareModuleInput({REPLICATED}, use_local_output=True)", "ColwiseParallel()", ["SPMD403"]),
        # forward receives a DTensor: the first colwise takes it as it is, its local output still meets the second
        (f"PrepareModuleInput({REPLICATED})", "ColwiseParallel()", ["SPMD403"]),
        # the block's whole input declared this rank's feature shard
        (f"PrepareModuleInput({SHARDED})", "RowwiseParallel()", ["SPMD403"]),
    ],
)
def test_a_prepared_module_runs_on_its_prepared_inputs(prepare, wo, codes, registry):
    diags = _check(PREPARED.replace("PREPARE", prepare).replace("WO", wo), registry)
    assert [d.code for d in diags] == codes, [d.message for d in diags]


def test_the_tables_local_types_are_the_dtensor_cores():
    """A style's boundary reads a placement as the core's `to_local()` with the default gradient placement."""
    from spmdcheck.analysis.dtensor import PlacementValue, make_dtensor, to_local
    from spmdcheck.analysis.values import MeshValue

    for placement in (tp_styles.SHARD_0, tp_styles.SHARD_LAST, tp_styles.REPLICATE_ALL, tp_styles.PARTIAL_SUM):
        dt = make_dtensor(MeshValue(("tp",)), (PlacementValue(placement.kind, placement.dim),))
        assert to_local(dt).type["tp"] == tp_styles.local_type(placement), placement


def test_a_submodule_called_through_getattr_is_planned_too(registry):
    diags = _check(
        """
        class Gated(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.w1 = nn.Linear(8, 16)
                self.w2 = nn.Linear(16, 8)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return getattr(self, "w2")(getattr(self, "w1")(x))


        def build(mesh):
            return parallelize_module(Gated(), mesh, {"w1": ColwiseParallel(), "w2": ColwiseParallel()})
        """,
        registry,
    )
    assert [d.code for d in diags] == ["SPMD403"], [d.message for d in diags]


@pytest.mark.parametrize(
    "w2,codes",
    [
        ("RowwiseParallel(output_layouts=Shard(1))", []),  # reduce-scattered to the sequence shard the norm takes
        ("RowwiseParallel()", ["SPMD403"]),  # all-reduced to the whole activation, declared a sequence shard
    ],
)
def test_a_sequence_parallel_norm_takes_the_sequence_shard(w2, codes, registry):
    source = """
        class Norm(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.weight = nn.Parameter(torch.ones(8))

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return x * self.weight


        class Block(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.w1 = nn.Linear(8, 16)
                self.w2 = nn.Linear(16, 8)
                self.norm = Norm()

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.norm(self.w2(F.gelu(self.w1(x))))


        def build(mesh):
            return parallelize_module(Block(), mesh, {"w1": ColwiseParallel(), "w2": W2, "norm": SequenceParallel()})
        """
    diags = _check(source.replace("W2", w2), registry)
    assert [d.code for d in diags] == codes, [d.message for d in diags]


@pytest.mark.parametrize(
    "w1",
    [
        "Float8ColwiseParallel()",  # another library's style
        "ColwiseParallel(input_layouts=layout)",  # a placement the checker cannot read
    ],
)
def test_a_style_the_checker_cannot_read_plans_its_submodule_silently(w1, registry):
    diags = _check(
        f"""
        from torchao.float8 import Float8ColwiseParallel


        def build(mesh, layout):
            return parallelize_module(FeedForward(), mesh, {{"w1": {w1}, "w2": RowwiseParallel()}})
        """,
        registry,
    )
    assert not diags, [d.message for d in diags]  # not taken for a module left out of the plan
