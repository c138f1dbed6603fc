"""The tensor-parallel styles of `parallelize_module` plans, as data: what each style does to a module's
parameters, inputs and output, with PyTorch's defaults (torch/distributed/tensor/parallel/style.py, torch
2.13) and torchtitan's own `NoParallel` (torchtitan 0.3.0, distributed/tensor_parallel.py).

One `StyleSpec` per style. How a plan reaches a module and what the checker does with these fields is
tp_plans.py; this module holds no analysis. Placements are spelled as PyTorch spells them (`Shard(-1)`,
`Replicate()`, `Partial()`), and `local_type` reads one as the local type a rank's tensor has at the
DTensor boundary of a style (`DTensor.from_local` / `.to_local()` with their default gradient placement,
the forward one):

    Shard(d)     S(d)   this rank's block of dim d
    Replicate()  I      the same on every rank, its gradient summed back (from_local's backward
                        redistributes a Partial gradient to Replicate; to_local's default takes the
                        incoming gradient as already whole)
    Partial()    P      this rank's share of a sum
"""

from __future__ import annotations

from dataclasses import dataclass

from spmdcheck.lattice import AI, AP, AxisType, Kind

SHARD, REPLICATE, PARTIAL = "shard", "replicate", "partial"


@dataclass(frozen=True)
class Placement:
    """A DTensor placement on the plan's one mesh dim: `kind` is SHARD (with `dim`), REPLICATE or PARTIAL."""

    kind: str
    dim: int | None = None

    def __str__(self) -> str:
        if self.kind == SHARD:
            return f"Shard({self.dim})"
        return "Replicate()" if self.kind == REPLICATE else "Partial()"


SHARD_0, SHARD_1, SHARD_LAST = Placement(SHARD, 0), Placement(SHARD, 1), Placement(SHARD, -1)
REPLICATE_ALL = Placement(REPLICATE)
PARTIAL_SUM = Placement(PARTIAL)


def local_type(placement: Placement) -> AxisType:
    """The local type of a plain tensor that crosses a style's boundary with this placement (see above)."""
    if placement.kind == SHARD:
        return AxisType(Kind.V, shard=placement.dim)
    return AI if placement.kind == REPLICATE else AP


def placement_of(t: AxisType) -> Placement | None:
    """The placement a local type is declared with at a DTensor boundary (None: R, which has none: its
    gradient is a pending sum the producer reduces, not the boundary)."""
    if t.kind is Kind.V:
        return Placement(SHARD, t.shard) if t.shard is not None else None
    if t.kind is Kind.I:
        return REPLICATE_ALL
    if t.kind is Kind.P:
        return PARTIAL_SUM
    return None


@dataclass(frozen=True)
class StyleSpec:
    """One parallel style.

    `linear_params` / `embedding_params`: the placement of each parameter of an `nn.Linear` / `nn.Embedding`
    it plans (empty: the parameters are left alone; `params` applies to every parameter of any module).
    `input_layout` / `desired_input_layout`: the placement the caller's local first input is declared with
    (`DTensor.from_local`) and the one forward receives (`redistribute`), by default (None: inputs pass
    untouched). `computed_output`: the placement the module's output has before the style redistributes it
    (None: the module's own); `output_layout`: where it is redistributed to by default (None: left as
    computed). `use_local_output`: whether the caller gets a plain tensor (`to_local()`) by default.
    `keywords`: constructor keyword -> the field it sets (`sequence_dim` sets the input and desired layouts
    to `Shard(sequence_dim)`). `takes_module_inputs`: a PrepareModuleInput-like style whose layouts are
    tuples, one per positional input (`use_local_output` then applies to the inputs forward receives).
    """

    name: str
    linear_params: tuple[tuple[str, Placement], ...] = ()
    embedding_params: tuple[tuple[str, Placement], ...] = ()
    params: Placement | None = None
    input_layout: Placement | None = None
    desired_input_layout: Placement | None = None
    computed_output: Placement | None = None
    output_layout: Placement | None = None
    use_local_output: bool = True
    keywords: tuple[tuple[str, str], ...] = ()
    takes_module_inputs: bool = False
    prepares_output: bool = False


_COLWISE = StyleSpec(
    "ColwiseParallel",
    linear_params=(("weight", SHARD_0), ("bias", SHARD_0)),
    embedding_params=(("weight", SHARD_1),),
    input_layout=REPLICATE_ALL,
    desired_input_layout=REPLICATE_ALL,
    computed_output=SHARD_LAST,
    output_layout=SHARD_LAST,
    use_local_output=True,
    keywords=(("input_layouts", "input_layout"), ("output_layouts", "output_layout"), ("use_local_output", "local")),
)

_ROWWISE = StyleSpec(
    "RowwiseParallel",
    linear_params=(("weight", Placement(SHARD, 1)), ("bias", REPLICATE_ALL)),
    embedding_params=(("weight", SHARD_0),),
    input_layout=SHARD_LAST,
    desired_input_layout=SHARD_LAST,  # an nn.Linear's; an nn.Embedding's is Replicate()
    computed_output=PARTIAL_SUM,
    output_layout=REPLICATE_ALL,
    use_local_output=True,
    keywords=(("input_layouts", "input_layout"), ("output_layouts", "output_layout"), ("use_local_output", "local")),
)

_SEQUENCE = StyleSpec(
    "SequenceParallel",
    params=REPLICATE_ALL,
    input_layout=SHARD_1,
    desired_input_layout=SHARD_1,
    computed_output=None,  # a norm or dropout on the sequence shard: Shard(sequence_dim), as its input
    output_layout=None,
    use_local_output=False,
    keywords=(("sequence_dim", "sequence_dim"), ("use_local_output", "local")),
)

_PREPARE_INPUT = StyleSpec(
    "PrepareModuleInput",
    use_local_output=False,
    keywords=(
        ("input_layouts", "input_layouts"),
        ("desired_input_layouts", "desired_input_layouts"),
        ("input_kwarg_layouts", "input_kwarg_layouts"),
        ("desired_input_kwarg_layouts", "desired_input_kwarg_layouts"),
        ("use_local_output", "local_input"),
    ),
    takes_module_inputs=True,
)

_PREPARE_OUTPUT = StyleSpec(
    "PrepareModuleOutput",
    use_local_output=True,
    keywords=(
        ("output_layouts", "output_layouts"),
        ("desired_output_layouts", "desired_output_layouts"),
        ("use_local_output", "local"),
    ),
    prepares_output=True,
)

_PREPARE_INPUT_OUTPUT = StyleSpec(
    "PrepareModuleInputOutput",
    use_local_output=True,
    keywords=(
        ("input_layouts", "input_layouts"),
        ("desired_input_layouts", "desired_input_layouts"),
        ("input_kwarg_layouts", "input_kwarg_layouts"),
        ("desired_input_kwarg_layouts", "desired_input_kwarg_layouts"),
        ("use_local_input", "local_input"),
        ("output_layouts", "output_layouts"),
        ("desired_output_layouts", "desired_output_layouts"),
        ("use_local_output", "local"),
    ),
    takes_module_inputs=True,
    prepares_output=True,
)

# torchtitan's NoParallel: the parameters replicated on the mesh, the computation replicated (its keywords
# are singular: input_layout, output_layout)
_NO_PARALLEL = StyleSpec(
    "NoParallel",
    params=REPLICATE_ALL,
    input_layout=REPLICATE_ALL,
    desired_input_layout=REPLICATE_ALL,
    computed_output=REPLICATE_ALL,
    output_layout=REPLICATE_ALL,
    use_local_output=False,
    keywords=(("input_layout", "input_layout"), ("output_layout", "output_layout"), ("use_local_output", "local")),
)

_TORCH_STYLES = ("torch.distributed.tensor.parallel", "torch.distributed.tensor.parallel.style")

# qualified name -> style (the public re-export and the defining module)
STYLES: dict[str, StyleSpec] = {
    **{
        f"{module}.{spec.name}": spec
        for module in _TORCH_STYLES
        for spec in (_COLWISE, _ROWWISE, _SEQUENCE, _PREPARE_INPUT, _PREPARE_OUTPUT, _PREPARE_INPUT_OUTPUT)
    },
    "torchtitan.distributed.tensor_parallel.NoParallel": _NO_PARALLEL,
    "torchtitan.distributed.NoParallel": _NO_PARALLEL,
}

# `parallelize_module(module, device_mesh, parallelize_plan)`
PARALLELIZE = frozenset(
    {
        "torch.distributed.tensor.parallel.parallelize_module",
        "torch.distributed.tensor.parallel.api.parallelize_module",
    }
)

# the placement constructors, by qualified name (read from the call when no other reader typed them)
PLACEMENTS = {
    f"{module}.{name}": kind
    for module in ("torch.distributed.tensor", "torch.distributed.tensor.placement_types", "torch.distributed._tensor")
    for name, kind in (("Shard", SHARD), ("Replicate", REPLICATE), ("Partial", PARTIAL))
}
