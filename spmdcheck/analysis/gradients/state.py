"""The values of the gradient walk (walker.py) and the gradient state of every parameter.

A parameter is one object (`Param`) made where the program makes it (`nn.Parameter(...)`, a library module's
own weight and bias); its attributes are those the program sets on it (`p.sequence_parallel = True`,
`setattr(p, "allreduce", False)`). Its gradient state (`GradientState`) maps each mesh axis to what the
gradient is there (`AxisGrad`): a pending sum (`P`, what a backward through a replicated use leaves), summed
(reduced once), averaged (reduced and divided by the axis size). A parameter on no axis of the map has nothing
known about its gradient there: it is never reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

import libcst as cst

Status = Literal["pending", "summed"]


class Opaque:
    """A value the walk does not follow (numbers, tensors of the forward, library objects)."""

    __slots__ = ()


OPAQUE = Opaque()


@dataclass(eq=False)
class Param:
    """One parameter (`nn.Parameter`, a library layer's weight or bias), with the attributes set on it."""

    attrs: dict[str, Any] = field(default_factory=dict)
    name: str = "?"  # its dotted name in the model (set when the model's parameters are listed)
    escaped: bool = False  # passed to code the walk does not follow: its gradient is never known again
    # FSDP2 `fully_shard(module, mesh=...)`: the mesh axes backward() averages its gradient over, and the call
    sharded_by: tuple[frozenset[str], cst.CSTNode] | None = None
    sharded_sync: bool = True  # FSDP2's `set_requires_gradient_sync(False)`: backward() leaves it pending
    # the config field that made a library skip the reduction its mark asks for (`config.sequence_parallel`)
    skipped_by: str | None = None
    # its local SPMD type per mesh axis, as the program declares it (`spmd.assert_type`: declared.py), a letter
    declared: dict[str, str] = field(default_factory=dict)


@dataclass(eq=False)
class ModuleObj:
    """An `nn.Module` object: its parameters and submodules in assignment order.

    `ddp_axis`: the axis a `DistributedDataParallel` wrapper averages its gradients over during backward;
    `finish_axis`: the axis a Megatron wrapper averages them over at `finish_grad_sync()` (megatron.py);
    `engine`: what a DeepSpeed engine does in its methods (deepspeed.py `Engine`).
    """

    cls_name: str
    children: dict[str, Any] = field(default_factory=dict)  # name -> Param | ModuleObj
    attrs: dict[str, Any] = field(default_factory=dict)  # other attributes (groups, names, flags)
    ddp_axis: str | None = None
    ddp_node: cst.CSTNode | None = None
    inner: ModuleObj | None = None  # the module a wrapper (DDP) holds
    finish_axis: str | None = None
    engine: Any = None

    def named_parameters(self, prefix: str = "") -> list[tuple[str, Param]]:
        out: list[tuple[str, Param]] = []
        seen: set[int] = set()
        for name, child in self.children.items():
            path = f"{prefix}{name}"
            if isinstance(child, Param):
                if id(child) not in seen:
                    seen.add(id(child))
                    child.name = path if child.name == "?" else child.name
                    out.append((path, child))
            elif isinstance(child, ModuleObj):
                for sub_name, p in child.named_parameters(path + "."):
                    if id(p) not in seen:
                        seen.add(id(p))
                        out.append((sub_name, p))
        return out


@dataclass(eq=False)
class GradRef:
    """`p.grad` (or `p.main_grad`): the gradient buffer of one parameter, written in place by the ops on it."""

    param: Param
    ops: tuple = ()  # ops applied to a value read from it (`grad / n`), not to the buffer


@dataclass(eq=False)
class ItemList:
    """A Python list the walk follows element by element (of gradients, parameters, pairs)."""

    items: list[Any]
    repeated: bool = False  # one element standing for every element of a list of unknown length
    spoiled: bool = False  # changed by code the walk does not follow (`spoil`): its elements are not known


def spoil(container: Any) -> None:
    """A list or dict of the walk that code it does not follow may have changed: its elements become unknown
    (a list then stands for no known element; a dict holds only the OPAQUE key, which no read matches)."""
    if isinstance(container, ItemList):
        container.items[:] = [OPAQUE]
        container.spoiled = True
    elif isinstance(container, dict) and not isinstance(container, RepeatedDict):
        container.clear()
        container[OPAQUE] = OPAQUE


def spoiled(container: Any) -> bool:
    return (isinstance(container, ItemList) and container.spoiled) or (
        isinstance(container, dict) and OPAQUE in container
    )


class RepeatedDict(dict):
    """A dict made by a comprehension over an unknown range: its one value (key `*`) stands for every value."""


@dataclass(eq=False)
class Bucket:
    """A flat buffer made of gradients (`_flatten_dense_tensors`): the ops applied to it, in order."""

    sources: list[Any]
    ops: list[tuple] = field(default_factory=list)  # ("div", axis, node) | ("reduce", axis, op, node)


@dataclass(eq=False)
class Synced:
    """One tensor unflattened from a bucket: the bucket's ops applied to its source gradient's values."""

    bucket: Bucket
    index: int
    ops: tuple = ()


@dataclass(frozen=True)
class WorldSize:
    """`dist.get_world_size(group)`: the size of a mesh axis."""

    axis: str


@dataclass(frozen=True)
class Rank:
    """`dist.get_rank(group)`: this rank's index on a mesh axis."""

    axis: str


@dataclass(frozen=True)
class Mesh:
    """A device mesh (`init_device_mesh(..., mesh_dim_names=...)`, `mesh["dp"]`): the mesh axes it spans."""

    axes: tuple[str, ...]


@dataclass(frozen=True)
class Group:
    """A process group spanning a mesh axis, or (axis None) a subgroup the walk cannot place on the mesh."""

    axis: str | None
    name: str = ""


@dataclass(eq=False)
class Data:
    """A tensor of the forward or the loss: the axes its data is split over, the divisions by axis sizes.

    `model`: the module whose forward made it (its parameters get gradients when it is backpropagated).
    """

    shard_axes: frozenset[str] = frozenset()
    divisions: tuple[tuple[str, cst.CSTNode], ...] = ()
    models: tuple[ModuleObj, ...] = ()


@dataclass(eq=False)
class Optimizer:
    """A torch.optim optimizer: the parameters it steps (None: not known); `reducing_call`: (axis, call) of
    the wrapper call that reduces their gradients (DeepSpeed's engine's backward, named in SPMD601)."""

    params: list[Param] | None
    reducing_call: tuple[str, str] | None = None


@dataclass(eq=False)
class Bound:
    """A method of a walked value, bound to it (`model.parameters`, `grad.div_`)."""

    receiver: Any
    name: str


@dataclass(frozen=True)
class AxisGrad:
    """A gradient on one axis: `status`, who reduced it (node, and whether DDP), the divisions by the size."""

    status: Status
    reduced_at: cst.CSTNode | None = None
    by_ddp: bool = False
    divisions: tuple[cst.CSTNode, ...] = ()
    # a backward() added to a gradient already reduced (at this node): reducing the sum again counts the
    # earlier part once more (accumulation synced too early)
    synced_before: cst.CSTNode | None = None
    wrapper: str | None = None  # what reduced it in backward (`by_ddp`), when not DistributedDataParallel


class GradientState:
    """Every parameter's gradient per axis, as the walk reaches each statement (flow-sensitive, copied at
    `if` arms and joined after: what differs between arms becomes unknown, and unknown is never reported)."""

    def __init__(self, grads: dict[tuple[int, str], AxisGrad] | None = None, params: dict[int, Param] | None = None):
        self.grads: dict[tuple[int, str], AxisGrad] = {} if grads is None else grads
        self.params: dict[int, Param] = {} if params is None else params

    def copy(self) -> GradientState:
        return GradientState(dict(self.grads), dict(self.params))

    def join(self, other: GradientState) -> None:
        """Keep what both paths agree on."""
        for key in list(self.grads):
            if other.grads.get(key) != self.grads[key]:
                del self.grads[key]
        self.params.update(other.params)

    def get(self, param: Param, axis: str) -> AxisGrad | None:
        return self.grads.get((id(param), axis))

    def set(self, param: Param, axis: str, grad: AxisGrad | None) -> None:
        self.params[id(param)] = param
        if grad is None:
            self.grads.pop((id(param), axis), None)
        else:
            self.grads[(id(param), axis)] = grad

    def axes_of(self, param: Param) -> list[str]:
        return [axis for (pid, axis) in self.grads if pid == id(param)]

    def forget(self, param: Param) -> None:
        for axis in self.axes_of(param):
            del self.grads[(id(param), axis)]

    def clear(self) -> None:
        self.grads.clear()


def with_division(grad: AxisGrad, node: cst.CSTNode) -> AxisGrad:
    return replace(grad, divisions=(*grad.divisions, node))


@dataclass(frozen=True)
class DeclaredKind:
    """An SPMD type as the walk evaluates it: `S(d)`, a type constant of the engine's globals (declared.py);
    `kind` its letter (R, I, V, P, S). A constant the walk looks up itself stays a library name (`Qual`)."""

    kind: str


@dataclass(frozen=True)
class Qual:
    """A library name (`torch.distributed.all_reduce`)."""

    name: str


@dataclass(frozen=True)
class Builtin:
    name: str


@dataclass(frozen=True)
class MethodRef:
    """A method of the program bound to a walked object."""

    func: Any  # a values.FunctionValue
    receiver: Any


@dataclass(frozen=True)
class Dtype:
    """`p.dtype`, `p.grad.dtype`: one token for every parameter. The walk does not know dtypes: a grouping by
    dtype (`by_dtype.setdefault(g.dtype, [])`) holds every gradient in one group, each going through the same
    statements as in any grouping; no comparison with it is decided."""


DTYPE = Dtype()


@dataclass(eq=False)
class Instance:
    """An object of a plain class of the program (no library base), built by walking its `__init__`: its
    attributes as assigned; its methods walked (`__iter__` for a loop over it, `__call__`)."""

    cls: Any  # a values.ClassValue
    attrs: dict[str, Any] = field(default_factory=dict)
    forgotten: bool = False  # reached code the walk does not follow (sync.forget_value, once)


@dataclass(eq=False)
class Partial:
    """`functools.partial(func, *args, **kwargs)`: `func` called with these arguments first (each a pair of
    the value and the expression that gave it, as a call's arguments are)."""

    func: Any
    args: list[tuple[Any, Any]]
    kwargs: dict[str, tuple[Any, Any]]


@dataclass(frozen=True)
class SuperRef:
    cls: Any
    receiver: Any


@dataclass(frozen=True)
class Chunks:
    """`x.chunk(n, dim)`: indexed by a rank on the axis whose size is `n`, this rank's share of `x`."""

    base: Data
    size: Any


def argument(args: list, kwargs: dict, index: int, name: str) -> tuple[Any, bool]:
    """A library call's argument by keyword `name` or at position `index` (each given as (value, node)):
    (its value, whether it was given)."""
    if name in kwargs:
        return kwargs[name][0], True
    if len(args) > index:
        return args[index][0], True
    return None, False
