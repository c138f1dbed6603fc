"""The rule registry's data model: what a stub line says about one callable.

Pure data (no libcst). The loader (`rules.stubs`) builds these from `.pyi`
files; the analysis only dispatches on them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from spmdcheck.lattice import AxisType, Linearity


class ParamRole(enum.Enum):
    TENSOR = "tensor"  # a tensor operand; numbers there are invisible
    TENSOR_OR_NUMBER = "tensor_or_number"  # numbers there count as the weak scalar
    TENSORS = "tensors"  # a sequence of tensor operands
    OTHER = "other"  # structural (dim, dtype, group, ...)


@dataclass(frozen=True)
class Param:
    name: str
    role: ParamRole
    positional: bool  # may be passed positionally
    keyword: bool  # may be passed by keyword
    variadic: bool = False  # *args
    default: object = None  # a literal default, or MISSING
    has_default: bool = False


class Returns(enum.Enum):
    TENSOR = "tensor"
    TENSORS = "tensors"  # tuple/list of tensors with one type
    NONE = "none"
    VALUE = "value"  # a non-tensor Python value: untyped
    NUMBER = "number"  # a Python number of unknown value (size(0), get_world_size(), item())


@dataclass(frozen=True)
class DimsRule:
    """How the op moves a tracked shard dim: a name and the parameter names it reads."""

    name: str  # keep, drop, T, transpose, permute, movedim, unsqueeze, squeeze, reduce, ...
    params: tuple[str, ...] = ()
    pieces: str | None = None  # a split's parameter giving the number of pieces (`chunk(chunks, dim)`)


@dataclass(frozen=True)
class Transition:
    src: str  # R, I, V, P or S (any shard)
    dst: str


@dataclass(frozen=True)
class CollectiveRule:
    """An spmd_types-style collective or conversion with src/dst keywords."""

    op: str  # all_reduce, all_gather, reduce_scatter, all_to_all, unshard, convert, reinterpret, ...
    family: str  # "collective" or "conversion"
    src: frozenset[str] = frozenset()  # allowed src letters (collectives)
    dst: frozenset[str] = frozenset()  # allowed dst letters (collectives)
    allowed: frozenset[Transition] | None = None  # conversions; None = any pair
    expert: frozenset[Transition] = frozenset()
    forbidden_hints: dict[Transition, str] = field(default_factory=dict)
    default_src: str | None = None
    default_dst: str | None = None
    implicit_partial: bool = True  # V is accepted where src is P
    tensor_param: str = "x"
    axis_param: str = "axis"


@dataclass(frozen=True)
class RawCollectiveRule:
    """A torch.distributed collective without autograd (type_system.md 3.7)."""

    src: frozenset[str]  # what the input must be ("*" = anything)
    dst: frozenset[str]  # the output's type on the group
    input: str  # parameter name of the input tensor
    output: str | None  # parameter name of a separate output tensor or list (None: in place)
    mutates: bool
    group_param: str = "group"
    differentiable: bool = False


@dataclass(frozen=True)
class MappingRule:
    """A library function (Megatron mappings...) that is one spmd_types collective."""

    op: str
    src: AxisType
    dst: AxisType
    axis: str | None
    group_param: str | None
    tensor_param: str
    when: tuple[tuple[str, object], ...] = ()  # parameter literal conditions


@dataclass(frozen=True)
class LayoutRule:
    """A class whose objects are a per-axis type (`SpmdLayout({DP: R, TP: S(0)}, partition_spec=...)`)."""

    types: str  # the constructor parameter holding the axis -> type dict
    partition_spec: str | None = None  # ... and the one holding a PartitionSpec-like tuple (its axes shard dim i)


@dataclass(frozen=True)
class ContractRule:
    """A configuration object that declares a module's sharding contract (torchtitan's ShardingConfig).

    Each field names the constructor parameter (and attribute) holding that part of the contract; the
    module's `parallelize` wrapper redistributes inputs src -> dst, runs forward on the dst types, checks the
    output against out_src and redistributes it to out_dst. `attach` names the attributes (of the module or
    of its nested config class) through which a contract object reaches the module.
    """

    attach: tuple[str, ...]
    state: str | None = None  # {parameter or buffer name: layout}
    in_src: str | None = None  # {forward argument name: layout} as the caller passes it
    in_dst: str | None = None  # {forward argument name: layout} as forward receives it
    out_src: str | None = None  # the layout forward returns
    out_dst: str | None = None  # the layout the caller receives
    redistribute: str = "spmd_types.redistribute"  # the conversion whose rule judges each src -> dst pair
    # methods of a module's nested config object that build the module (`cfg.build()`): the module built
    # carries the contract that reached that config object (a typed config field names which one)
    build: tuple[str, ...] = ()
    # the wrapper refuses an input with an in_dst layout and no in_src one (torchtitan under spmd_types raises
    # ValueError on the first call): such an input is reported where the contract is written
    dst_needs_src: bool = False


@dataclass
class OpRule:
    """Everything the registry knows about one qualified callable."""

    qualname: str
    params: tuple[Param, ...] = ()
    returns: Returns = Returns.TENSOR
    linearity: Linearity = Linearity.NONLINEAR
    divisors: tuple[str, ...] = ()
    contraction: str | None = None  # "matmul", "linear", "einsum", or a fixed equation
    bias: str | None = None  # the bias parameter of a contraction/affine op
    affine_bias: str | None = None  # addmm family: linear(product, bias)
    factory: str | None = None  # deterministic, random, like, new
    factory_size: str | None = None  # the parameter holding the shape (its length is the rank)
    factory_rank: int | None = None  # a fixed rank (arange: 1, eye: 2)
    passthrough: bool = False
    rank_dependent: bool = False  # returns a value that differs across ranks (a rank index)
    container_param: str | None = None  # returns this argument, a sequence of modules (nn.ModuleList)
    sequential_param: str | None = None  # returns a chain of these modules, applied in order when called
    # @overload: the parameters annotated `Literal[...]` and the constants this overload requires,
    # and (on the registered rule) every overload in stub order; a call takes the first that matches
    is_overload: bool = False
    literal_params: tuple[tuple[str, tuple[object, ...]], ...] = ()
    overloads: tuple[OpRule, ...] = ()
    constant_test: bool = False  # returns whether its argument is a constant the analysis knows (is_known)
    model_path: str | None = None  # a @model class/function: the stub file whose body the analysis interprets
    model_module: str | None = None  # ... and that stub's module name (for its relative imports)
    rank_of: bool = False  # returns the receiver tensor's rank (x.dim(), x.ndim): a constant when it is known
    shape_of: bool = False  # returns the receiver tensor's sizes (x.shape, x.size()), or one of them (x.size(d))
    # built from data of no SPMD type, the result's layout is unknown (not "no type"): an `nn.Parameter` made of
    # `torch.empty(...)` gets its layout from the module's parallelization (a contract, an assert), not here
    untyped_is_unknown: bool = False
    # with `loss_parallel()` active (torch.distributed.tensor.parallel): given a DTensor input sharded on its
    # class dim and a local target, the loss is a Replicate DTensor (`F.cross_entropy`)
    parallel_loss: bool = False
    rank_axis: str | None = None  # ... only along this mesh axis (a rank within the tp group); None: every axis
    size_axis: str | None = None  # a number: the size of this mesh axis's group (`get_data_parallel_world_size`)
    rank_group_param: str | None = None  # ... along the axis of the group (or mesh dim) this parameter names
    group_members_param: str | None = None  # returns the ranks of the group this parameter names
    opaque: bool = False
    grad: str | None = None  # "yes", "no"
    dims: DimsRule | None = None
    inplace_param: str | None = None  # which parameter an in-place op mutates
    is_property: bool = False
    collective: CollectiveRule | None = None
    raw: RawCollectiveRule | None = None
    mappings: tuple[MappingRule, ...] = ()
    process_group_axis: str | None = None
    mesh_factory_names: str | None = None
    mesh_group_param: str | None = None
    spmd_api: str | None = None
    # a DTensor API with its own handler (analysis/dtensor/): `from_local`, `to_local`, `placement`, ...
    dtensor_api: str | None = None
    dtensor_args: tuple[tuple[str, object], ...] = ()  # the decorator's keywords (`placement="shard"`)
    context: str | None = None
    const_type: str | None = None  # a type constant: R, I, V, P
    const_str: str | None = None  # a string constant (an enum member naming a mesh axis: `DP = "dp"`)
    alias_of: str | None = None
    assumed: tuple[object] | None = None  # the call returns this constant, assumed (@assume_returns)
    instance_test: bool | None = None  # a class: what isinstance(<a tensor the checker types>, it) is
    layout: LayoutRule | None = None  # a class building a per-axis type (@layout)
    contract: ContractRule | None = None  # a class declaring a module's sharding contract (@module_contract)
    source: str = ""  # stub file:line, for messages

    @property
    def kind(self) -> str:
        """Which transfer function types a call of this rule (analysis/transfer.py), by priority."""
        for kind, present in (
            ("context", self.context is not None),
            ("assumed", self.assumed is not None),
            ("layout", self.layout is not None),
            ("module_contract", self.contract is not None),
            ("spmd_api", self.spmd_api is not None),
            ("dtensor_api", self.dtensor_api is not None),
            ("collective", self.collective is not None),
            ("raw_collective", self.raw is not None),
            ("mapping", bool(self.mappings)),
            ("process_group", self.process_group_axis is not None),
            ("mesh_factory", self.mesh_factory_names is not None),
            ("mesh_group", self.mesh_group_param is not None),
            ("constant_test", self.constant_test),
            ("container", self.container_param is not None),
            ("sequential", self.sequential_param is not None),
            ("rank_of", self.rank_of),
            ("shape_of", self.shape_of),
            ("group_members", self.group_members_param is not None),
            ("passthrough", self.passthrough),
            ("type_constant", self.const_type is not None),
            ("factory", self.factory is not None),
            ("opaque", self.opaque),
        ):
            if present:
                return kind
        return "op"

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)
