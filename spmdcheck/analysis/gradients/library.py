"""Library names in the gradient walk: torch.nn modules and their parameters, optimizers,
DistributedDataParallel, torch.distributed's reductions and group sizes, bucket flattening, backward(),
builtins, and the methods of the walked values."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import libcst as cst

from spmdcheck.analysis.gradients import accumulation, data, declared, deepspeed, loops, megatron, norms, sync
from spmdcheck.analysis.gradients.state import (
    OPAQUE,
    Bucket,
    Chunks,
    Data,
    Dtype,
    GradRef,
    Group,
    Instance,
    ItemList,
    Mesh,
    ModuleObj,
    Optimizer,
    Param,
    Partial,
    Qual,
    Rank,
    SuperRef,
    Synced,
    WorldSize,
    argument,
    spoil,
    spoiled,
)
from spmdcheck.analysis.values import ClassValue, FunctionValue, library_base

if TYPE_CHECKING:
    from spmdcheck.analysis.gradients.walker import Walker

# torch.nn layers whose own parameters the walk makes: (weight, bias) unless `bias=False` / no affine
_WEIGHT_AND_BIAS = {"LayerNorm", "Linear", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "Conv1d", "Conv2d", "Bilinear"}
_WEIGHT_ONLY = {"Embedding", "RMSNorm"}
_CONTAINERS = {"ModuleList", "ModuleDict", "Sequential", "ParameterList"}
_MODULE_BASES = _WEIGHT_AND_BIAS | _WEIGHT_ONLY | _CONTAINERS | {"Module"}
_PARAM_READERS = {"size", "dim", "numel", "element_size", "data_ptr", "is_contiguous", "nelement", "ndimension"}
_PURE_GRAD_READERS = {"clip_grad_norm_", "clip_grads_with_norm_", "get_total_norm"}  # scale by one number


def _last(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def is_module_class(cls: ClassValue) -> bool:
    base = library_base(cls)
    return base is not None and _last(base) in _MODULE_BASES


def library_module_init(walker: Walker, qualname: str, obj: ModuleObj, args: list, kwargs: dict) -> None:
    """`torch.nn.<Layer>.__init__`: the layer's own parameters on `obj`."""
    kind = _last(qualname)
    if kind in _WEIGHT_AND_BIAS or kind in _WEIGHT_ONLY:
        if kwargs.get("elementwise_affine", (True,))[0] is False:
            return
        obj.children.setdefault("weight", _new_param(walker))
        if kind in _WEIGHT_AND_BIAS and kwargs.get("bias", (True,))[0] is not False:
            obj.children.setdefault("bias", _new_param(walker))
    elif kind in _CONTAINERS and args:
        _fill_container(obj, args[0][0])


def _fill_container(obj: ModuleObj, items: Any) -> None:
    if isinstance(items, ItemList):
        for i, item in enumerate(items.items):
            obj.children["*" if items.repeated else str(i)] = item
    elif isinstance(items, dict):
        for key, item in items.items():
            obj.children[str(key)] = item
    elif isinstance(items, (ModuleObj, Param)):
        obj.children["0"] = items


def _new_param(walker: Walker) -> Param:
    param = Param()
    walker.params_made.append(param)
    return param


def instantiate(walker: Walker, cls: ClassValue, args: list, kwargs: dict, node: cst.Call) -> Any:
    """A class of the program: an nn.Module (or any object) built by walking its `__init__`."""
    if not is_module_class(cls):
        init = cls.lookup("__init__")
        if _plain(cls) and (isinstance(init, FunctionValue) or (init is None and not args and not kwargs)):
            made = Instance(cls)
            if isinstance(init, FunctionValue):
                walker.call_function(walker, init, made, args, kwargs)
            return made
        for value, _ in [*args, *kwargs.values()]:
            sync.forget_value(walker, value)  # an object the walk does not build may hook what it receives
        return OPAQUE
    obj = ModuleObj(cls.name, attrs={"__class__": cls})
    init = cls.lookup("__init__")
    if isinstance(init, FunctionValue):
        walker.call_function(walker, init, obj, args, kwargs)
    else:
        library_module_init(walker, library_base(cls) or "", obj, args, kwargs)
    return obj


_CUSTOM_ACCESS = ("__getattr__", "__getattribute__", "__setattr__", "__new__")


def _plain(cls: ClassValue) -> bool:
    """A class whose bases are all the program's (no library class to read), with ordinary attributes."""
    for klass in cls.mro():
        if any(not isinstance(base, ClassValue) for base in klass.bases):
            return False
        if any(name in klass.namespace for name in _CUSTOM_ACCESS) or klass.node.decorators:
            return False
    return True


def merge_data(values: list[Any]) -> Data:
    """A tensor computed from `values`: split over every axis one of them is, made by all their models."""
    axes: set[str] = set()
    divisions: list = []
    models: list[ModuleObj] = []
    for value in values:
        if isinstance(value, Data):
            axes |= value.shard_axes
            divisions.extend(value.divisions)
            models.extend(m for m in value.models if m not in models)
    return Data(frozenset(axes), tuple(divisions), tuple(models))


def world_axis(walker: Walker) -> str | None:
    """The default (world) group's axis: the mesh's, when it has one axis."""
    return walker.mesh[0] if len(walker.mesh) == 1 else None


def group_axis(walker: Walker, group: Any, given: bool) -> tuple[bool, str | None]:
    """(known, axis) of a `group=` argument: (True, None) is a group on no single axis, (False, _) unknown."""
    if not given or group is None:
        return True, world_axis(walker)
    if isinstance(group, Group):
        return group.axis is not None, group.axis
    if isinstance(group, Qual) and group.name.endswith("group.WORLD"):
        return True, world_axis(walker)
    return False, None


# Libraries whose data parallelism is rules of their own: `call` of a name, `method` of a wrapper they made;
# and spmd_types' annotations, which declare a parameter's type
LIBRARY_RULES = (megatron, deepspeed, declared)


def call_library(walker: Walker, name: str, args: list, kwargs: dict, node: cst.Call) -> Any:
    if not name.startswith("torch."):  # a stub's re-export of torch's (`deepspeed.comm.all_reduce`)
        name = walker.ctx.registry.resolve_alias(name)
    last = _last(name)
    for rules in LIBRARY_RULES:
        handled = rules.call(walker, name, args, kwargs, node)
        if handled is not NotImplemented:
            return handled
    rule = walker.ctx.registry.lookup(name)  # a stub's process group, rank or group size of one mesh axis
    if rule is not None and rule.process_group_axis is not None:
        return Group(rule.process_group_axis)
    if rule is not None and rule.size_axis is not None:
        return WorldSize(rule.size_axis)
    if rule is not None and rule.rank_dependent and rule.rank_axis is not None:
        return Rank(rule.rank_axis)
    if name.startswith("torch.distributed") or name.startswith("torch.distributed.distributed_c10d"):
        handled = _distributed(walker, last, args, kwargs, node, name)
        if handled is not NotImplemented:
            return handled
    if name == "functools.partial" and args:
        return Partial(args[0][0], args[1:], dict(kwargs))
    if last == "Parameter":
        return _new_param(walker)
    if name.startswith("torch.") and last in norms.ZERO_FACTORIES and not any(isinstance(v, Data) for v, _ in args):
        return norms.zero()
    if name.startswith("torch.") and last in norms.NORM_FUNCTIONS and args:
        found = norms.norm_of(walker, args[0][0], [v for v, _ in args[1:]])
        if found is not None:
            return found
    if last == "DistributedDataParallel":
        return _ddp(walker, args, kwargs, node)
    if name in data.SAMPLERS:
        return data.distributed_sampler(args, kwargs, world_axis(walker))
    if name in data.BATCH_SAMPLERS:
        return data.batch_sampler(args, kwargs)
    if name in data.LOADERS:
        return data.data_loader(walker, args, kwargs, node)
    if name in GRADIENT_SHARDERS:
        return _fully_shard(walker, name, args, kwargs, node)
    if name in MESH_FACTORIES:
        return _device_mesh(walker, name, args, kwargs)
    if ".optim." in name and last[:1].isupper():
        params, _ = argument(args, kwargs, 0, "params")
        return Optimizer(_param_list(params))
    if last == "_flatten_dense_tensors" and args and isinstance(args[0][0], ItemList):
        return Bucket(list(args[0][0].items))
    if last == "_unflatten_dense_tensors" and args and isinstance(args[0][0], Bucket):
        bucket = args[0][0]
        return ItemList([Synced(bucket, i) for i in range(len(bucket.sources))])
    if name.startswith("torch.autograd") and last == "backward" and args:
        losses = args[0][0].items if isinstance(args[0][0], ItemList) else [args[0][0]]
        for loss in losses:
            if isinstance(loss, Data):
                sync.backward(walker, loss, node)
        return None
    if name.startswith("torch.nn") and last in _MODULE_BASES:
        obj = ModuleObj(last)
        library_module_init(walker, name, obj, args, kwargs)
        return obj
    if name.startswith("torch.") and last in _NORM_CALLS:
        found = _norm_call(walker, last, args, kwargs, node)
        if found is not None:
            return found
    if last in _PURE_GRAD_READERS:
        for value, _ in [*args, *kwargs.values()]:
            norms.used(walker, value)  # `clip_grads_with_norm_(params, max_norm, total_norm)`
        return OPAQUE
    values = [v for v, _ in [*args, *kwargs.values()]]
    for value in values:
        norms.used(walker, value)
    if any(isinstance(v, Data) for v in values):
        return merge_data(values)
    for value in values:
        sync.forget_value(walker, value)
    return OPAQUE


# `add_module("fc", m)`, `register_parameter("w", p)`: a child set by name
_REGISTERS = frozenset({"add_module", "register_module", "register_parameter"})
_NORM_CALLS = frozenset({"_foreach_norm", "stack", "get_total_norm", "clip_grad_norm_"})


def _norm_call(walker: Walker, last: str, args: list, kwargs: dict, node: cst.Call) -> Any:
    """Global-norm clipping's library calls (norms.py): `torch._foreach_norm(grads, ord)`, `torch.stack` of
    norms, `torch.nn.utils.get_total_norm(grads, norm_type)`, `clip_grad_norm_(params, max_norm, norm_type)`
    (`foreach=` changes how, not what, they compute); None: not on gradients the walk knows."""
    if last == "_foreach_norm":
        tensors, _ = argument(args, kwargs, 0, "self")
        order, given = argument(args, kwargs, 1, "ord")
        found = norms.foreach_norm(walker, tensors, order if given else 2)
        return None if found is None else ItemList(list(found))
    if last == "stack":
        return norms.stack(argument(args, kwargs, 0, "tensors")[0])
    order, given = argument(args, kwargs, 1 if last == "get_total_norm" else 2, "norm_type")
    if last == "get_total_norm":
        return norms.total_norm(walker, argument(args, kwargs, 0, "tensors")[0], order if given else 2)
    params = _param_list(argument(args, kwargs, 0, "parameters")[0])
    if params is None:
        return None
    grads = ItemList([GradRef(p) for p in params])
    norm = norms.total_norm(walker, grads, order if given else 2)
    if norm is not None:
        norms.clipped_locally(walker, norm, node)
    return OPAQUE


_FUNCTIONAL_REDUCTIONS = ("all_reduce",)


def _functional_reduce(walker: Walker, args: list, kwargs: dict, node: cst.Call, last: str) -> Any:
    """`funcol.all_reduce(p.grad, "sum" | "avg", group)`: a new tensor, the gradient's values reduced (applied
    to the gradient when copied or assigned back into it)."""
    tensor, _ = argument(args, kwargs, 0, "self")
    op, _ = argument(args, kwargs, 1, "reduceOp")
    group, given = argument(args, kwargs, 2, "group")
    if not isinstance(tensor, GradRef):
        return OPAQUE
    known, axis = group_axis(walker, group, given)
    average = isinstance(op, str) and op.lower() == "avg"
    operand = walker.text(args[0][1]) if args else "tensor"
    reduce_op = ("reduce", axis if known else None, average, walker.remember(node), f"funcol.{last}", operand)
    return GradRef(tensor.param, (*tensor.ops, reduce_op))


def _distributed(walker: Walker, last: str, args: list, kwargs: dict, node: cst.Call, qual: str = "") -> Any:
    if last in ("get_world_size", "get_rank"):
        group, given = argument(args, kwargs, 0, "group")
        known, axis = group_axis(walker, group, given)
        if not known or axis is None:
            return OPAQUE
        return WorldSize(axis) if last == "get_world_size" else Rank(axis)
    if last == "broadcast" and isinstance(argument(args, kwargs, 0, "tensor")[0], Param):
        return None  # the replicas start equal: the parameter's values, not its gradient
    if last == "new_group":
        return Group(None)
    if last in _FUNCTIONAL_REDUCTIONS and ("_functional_collectives" in qual or ".functional" in qual):
        return _functional_reduce(walker, args, kwargs, node, last)
    if last in ("all_reduce", "all_reduce_coalesced"):
        tensor, _ = argument(args, kwargs, 0, "tensor" if last == "all_reduce" else "tensors")
        op, _ = argument(args, kwargs, 1, "op")
        group, given = argument(args, kwargs, 2, "group")
        known, axis = group_axis(walker, group, given)
        average = isinstance(op, Qual) and op.name.endswith(".AVG")
        api = f"dist.{last}"
        operand = walker.text(args[0][1]) if args else "tensor"
        targets = tensor.items if isinstance(tensor, ItemList) else [tensor]
        for target in targets:
            if isinstance(target, norms.SquaredNorm):
                norms.reduced(walker, target, axis if known else None, op, node)
                continue
            sync.reduce_value(walker, target, axis if known else None, average, node, api, operand)
        return None
    return NotImplemented


def _ddp(walker: Walker, args: list, kwargs: dict, node: cst.Call) -> Any:
    inner, _ = argument(args, kwargs, 0, "module")
    if not isinstance(inner, ModuleObj):
        return OPAQUE
    group, given = argument(args, kwargs, 3, "process_group")
    known, axis = group_axis(walker, group, given)
    wrapper = ModuleObj("DistributedDataParallel", children={"module": inner}, inner=inner)
    if known and axis is not None:
        wrapper.ddp_axis, wrapper.ddp_node = axis, walker.remember(node)
    return wrapper


# Library calls after which backward() reduces the gradients of a module's parameters itself (rules as data):
# qualified name -> (the module argument's index and keyword, the mesh keyword). FSDP2's `fully_shard`
# reduce-scatters every gradient over its mesh (the world's when none is given) and averages it.
GRADIENT_SHARDERS = {
    "torch.distributed.fsdp.fully_shard": (0, "module", "mesh"),
    "torch.distributed._composable.fsdp.fully_shard": (0, "module", "mesh"),
    "torch.distributed._composable.fsdp.fully_shard.fully_shard": (0, "module", "mesh"),
    "torch.distributed.fsdp._fully_shard.fully_shard": (0, "module", "mesh"),
    "torch.distributed.fsdp._fully_shard._fully_shard.fully_shard": (0, "module", "mesh"),
}
# Device mesh constructors: qualified name -> the keyword naming the mesh's dims
MESH_FACTORIES = {
    "torch.distributed.device_mesh.init_device_mesh": "mesh_dim_names",
    "torch.distributed.init_device_mesh": "mesh_dim_names",
}


def _fully_shard(walker: Walker, name: str, args: list, kwargs: dict, node: cst.Call) -> Any:
    """`fully_shard(module, mesh=...)`: the parameters of `module` (a module or a list of them) get their
    gradients averaged over the mesh's axes in backward(); a mesh the walk cannot place on the checked mesh
    leaves them unknown (as any call it does not follow)."""
    index, module_name, mesh_name = GRADIENT_SHARDERS[name]
    target, _ = argument(args, kwargs, index, module_name)
    mesh = kwargs[mesh_name][0] if mesh_name in kwargs else None
    axes: tuple[str, ...] | None
    if mesh is None:
        world = world_axis(walker)
        axes = (world,) if world is not None else None
    else:
        axes = mesh.axes if isinstance(mesh, Mesh) else None
    modules = target.items if isinstance(target, ItemList) and not target.spoiled else [target]
    if axes is None or not all(isinstance(m, ModuleObj) for m in modules):
        for value, _ in [*args, *kwargs.values()]:
            sync.forget_value(walker, value)
        return OPAQUE
    reduced = frozenset(a for a in axes if a in walker.mesh)
    for module in modules:
        for _, param in module.named_parameters():
            param.sharded_by = (reduced, walker.remember(node))
    return target


def _set_sharded_sync(module: ModuleObj, args: list, kwargs: dict) -> bool:
    """FSDP2's `module.set_requires_gradient_sync(flag)` (every FSDP module under it): whether backward()
    reduce-scatters the gradients of its parameters; False: not such a call the walk can follow."""
    flag, _ = argument(args, kwargs, 0, "requires_gradient_sync")
    recurse, given = argument(args, kwargs, 1, "recurse")
    params = [p for _, p in module.named_parameters()]
    if not isinstance(flag, bool) or (given and recurse is not True) or not params:
        return False
    if not all(p.sharded_by is not None for p in params):
        return False
    for param in params:
        param.sharded_sync = flag
    return True


def _device_mesh(walker: Walker, name: str, args: list, kwargs: dict) -> Any:
    """`init_device_mesh(device, shape, mesh_dim_names=("dp",))`: a mesh over the named axes (without names,
    the world's axis for a one-dim mesh)."""
    names = kwargs[MESH_FACTORIES[name]][0] if MESH_FACTORIES[name] in kwargs else None
    if isinstance(names, tuple) and names and all(isinstance(n, str) for n in names):
        return Mesh(names)
    shape, _ = argument(args, kwargs, 1, "mesh_shape")
    world = world_axis(walker)
    if (names is None) and isinstance(shape, tuple) and len(shape) == 1 and world is not None:
        return Mesh((world,))
    return OPAQUE


def _param_list(value: Any) -> list[Param] | None:
    if isinstance(value, ItemList):
        out: list[Param] = []
        for item in value.items:
            if isinstance(item, Param):
                out.append(item)
            elif isinstance(item, dict) and isinstance(item.get("params"), ItemList):
                nested = _param_list(item["params"])
                if nested is None:
                    return None
                out.extend(nested)
            else:
                return None
        return out
    return None


def call_builtin(walker: Walker, name: str, args: list, kwargs: dict, node: cst.Call) -> Any:
    values = [v for v, _ in args]
    if name in ("getattr", "hasattr") and len(values) >= 2 and isinstance(values[1], str):
        owner, attr = values[0], values[1]
        if isinstance(owner, Param):
            if attr not in ("requires_grad", "grad", "main_grad"):
                walker.tested_attrs.add(attr)
            if name == "hasattr":
                return attr in owner.attrs or attr in ("grad", "main_grad", "requires_grad")
            if attr in owner.attrs:
                return owner.attrs[attr]
            if attr == "requires_grad":
                return True
            return values[2] if len(values) > 2 else OPAQUE
        if isinstance(owner, ModuleObj) and name == "getattr":
            return owner.children.get(attr, owner.attrs.get(attr, values[2] if len(values) > 2 else OPAQUE))
        return OPAQUE
    if name == "setattr" and len(values) == 3 and isinstance(values[1], str):
        if isinstance(values[0], Param):
            values[0].attrs[values[1]] = values[2]
        elif isinstance(values[0], ModuleObj):
            values[0].attrs[values[1]] = values[2]
        return None
    counted = _counted_builtin(walker, name, args, kwargs)
    if counted is not None:
        return counted
    if name == "zip" and values:
        lists = [_items(v) for v in values]
        if any(items is None for items in lists):
            return OPAQUE
        return ItemList([tuple(group) for group in zip(*lists)])  # type: ignore[misc]
    if name == "enumerate" and values:
        items = _items(values[0])
        return OPAQUE if items is None else ItemList([(i, item) for i, item in enumerate(items)])
    if name in ("list", "tuple", "reversed", "sorted") and values:
        items = _items(values[0])
        return OPAQUE if items is None else ItemList(list(items))
    if name == "len" and values:
        items = _items(values[0])
        return OPAQUE if items is None else len(items)
    if name == "super":
        frame = walker.frame
        if frame is not None and isinstance(frame.env.get("__class__"), ClassValue) and frame.receiver is not None:
            from_cls = frame.env["__class__"]
            return _super(from_cls, frame.receiver)
        return OPAQUE
    if name == "print":
        return None
    if name == "dict":
        made = _dict_of(values, kwargs)
        if made is not None:
            return made
    for value in values:
        sync.forget_value(walker, value) if not isinstance(value, (Data, str, int, float)) else None
    return OPAQUE


def _counted_builtin(walker: Walker, name: str, args: list, kwargs: dict) -> Any:
    """`range(n)`, and `zip` / `enumerate` / `list` / `tuple` / `len` of counted sequences (loops.py); None:
    none of these."""
    values = [counted_of(v) or v for v, _ in args]
    if name == "range" and 1 <= len(args) <= 3 and not kwargs:
        counted_range = loops.counted_range([v for v, _ in args], [walker.text(e) for _, e in args])
        return OPAQUE if counted_range is None else counted_range
    if not values or not any(isinstance(v, loops.Counted) for v in values):
        return None
    if name == "zip":
        return loops.combined(values, tuple) or OPAQUE
    first = values[0]
    if not isinstance(first, loops.Counted) or len(values) != 1:
        return None
    if name == "enumerate":
        return loops.Counted(first.count, lambda i: (i, first.element(i)))
    if name in ("list", "tuple", "iter"):
        return first
    if name == "next":  # an element of an unknown iteration (a `while` micro-batch loop draws one each time)
        return first.element(OPAQUE)
    if name == "len":
        return loops.length(first)
    return None


def counted_of(value: Any) -> loops.Counted | None:
    """`value` as a counted sequence: a `loops.Counted`, or `x.chunk(n)` (n micro-batches made as `x` is)."""
    if isinstance(value, loops.Counted):
        return value
    if isinstance(value, Chunks) and isinstance(value.size, loops.Count):
        base = value.base
        return loops.Counted(value.size, lambda _: Data(base.shard_axes, base.divisions, base.models))
    return None


_KEYS = (str, int, bool, type(None), Dtype)  # dict keys the walk compares as Python does


def _dict_of(values: list, kwargs: dict) -> dict | None:
    """`dict(k=v)`, `dict(mapping)`, `dict(pairs)` (`dict(zip(keys, values))`) with constant keys; None: not
    known."""
    out: dict[Any, Any] = {}
    if len(values) > 1:
        return None
    if values and type(values[0]) is dict:
        out.update(values[0])
    elif values:
        pairs = _items(values[0])
        if pairs is None or isinstance(values[0], dict):
            return None
        for pair in pairs:
            if not isinstance(pair, tuple) or len(pair) != 2 or not isinstance(pair[0], (str, int, bool, type(None))):
                return None
            out[pair[0]] = pair[1]
    out.update((key, value) for key, (value, _) in kwargs.items())
    return out


def _super(cls: ClassValue, receiver: Any) -> Any:
    return SuperRef(cls, receiver)


MAX_CHUNKS = 64  # micro-batches a loop over `x.chunk(n)` is walked for one by one


def chunk_items(value: Any) -> list[Any] | None:
    """`x.chunk(n)` with a constant `n`: n tensors made as `x` is (a micro-batch loop walks each)."""
    if isinstance(value, Chunks) and isinstance(value.size, int) and not isinstance(value.size, bool):
        if 0 < value.size <= MAX_CHUNKS:
            base = value.base
            return [Data(base.shard_axes, base.divisions, base.models) for _ in range(value.size)]
    return None


def _items(value: Any) -> list[Any] | None:
    chunks = chunk_items(value)
    if chunks is not None:
        return chunks
    if spoiled(value):
        return None
    if isinstance(value, ItemList):
        return value.items
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, dict):
        return list(value)
    return None


def call_method(walker: Walker, receiver: Any, name: str, args: list, kwargs: dict, node: cst.Call) -> Any:
    values = [v for v, _ in args]
    if name.startswith("__library_init__:"):
        if isinstance(receiver, ModuleObj):
            library_module_init(walker, name.split(":", 1)[1], receiver, args, kwargs)
        return None
    if isinstance(receiver, ModuleObj):
        return _module_method(walker, receiver, name, args, kwargs, node)
    if isinstance(receiver, Param) and name in accumulation.PARAM_HOOKS:
        return accumulation.register_param_hook(walker, receiver, name, args, node)
    if isinstance(receiver, norms.SquaredNorm):
        return norms.method(walker, receiver, name)
    if isinstance(receiver, Optimizer):
        if name == "step":
            sync.checkpoint(walker, receiver.params, node, receiver.reducing_call)
            return None
        if name == "zero_grad":
            for param in receiver.params if receiver.params is not None else list(walker.state.params.values()):
                walker.state.forget(param)
            return None
        return OPAQUE
    if isinstance(receiver, GradRef):
        return _grad_method(walker, receiver, name, values, node)
    if isinstance(receiver, Param):
        if name not in _PARAM_READERS:
            sync.forget_value(walker, receiver)  # a hook, an in-place write: its gradient is not followed
        for value in values:
            sync.forget_value(walker, value)
        return OPAQUE
    if isinstance(receiver, Bucket):
        if name == "div_" and values and isinstance(values[0], WorldSize):
            sync.divide_value(walker, receiver, values[0].axis, node)
        elif name.endswith("_"):
            sync.forget_value(walker, receiver)
        return receiver if name.endswith("_") else OPAQUE
    if isinstance(receiver, ItemList):
        if name == "append" and values:
            receiver.items.append(values[0])
            norms.note_item(walker, values[0])
        elif name == "extend" and values and _items(values[0]) is not None:
            receiver.items.extend(_items(values[0]) or [])
        elif name not in ("index", "count", "copy"):
            spoil(receiver)  # insert, pop, sort, an extend of what the walk does not follow: not modelled
        return None
    if isinstance(receiver, Data) or receiver is OPAQUE:
        return _tensor_method(walker, receiver, name, args, kwargs, node)
    if (
        isinstance(receiver, str)
        and name in ("startswith", "endswith", "split", "replace", "lower")
        and all(isinstance(v, (str, tuple)) for v in values)
    ):
        return getattr(receiver, name)(*values)
    if isinstance(receiver, dict) and spoiled(receiver):
        return OPAQUE
    if isinstance(receiver, dict) and name == "setdefault" and values and isinstance(values[0], _KEYS):
        return receiver.setdefault(values[0], values[1] if len(values) > 1 else None)
    if isinstance(receiver, dict) and name in ("items", "values", "keys", "get"):
        if name == "get":
            return receiver.get(values[0], values[1] if len(values) > 1 else None) if values else OPAQUE
        return ItemList(list(getattr(receiver, name)()))
    for value in values:
        sync.forget_value(walker, value)
    if isinstance(receiver, dict):
        spoil(receiver)  # setdefault, update, pop, ...: not modelled
    return OPAQUE


def _tensor_method(walker: Walker, receiver: Any, name: str, args: list, kwargs: dict, node: cst.Call) -> Any:
    data = receiver if isinstance(receiver, Data) else Data()
    if name == "chunk" and args:
        size = args[0][0]
        if not isinstance(size, (int, WorldSize)) or isinstance(size, bool):  # a count the walk names (loops.py)
            size = loops.count_of(size, walker.text(args[0][1])) or size
        return Chunks(data, size)
    if name == "backward" and isinstance(receiver, Data):
        sync.backward(walker, receiver, node)
        return None
    if isinstance(receiver, Data):
        return merge_data([receiver, *[v for v, _ in args]])
    for value, _ in [*args, *kwargs.values()]:
        if not isinstance(value, Data):
            sync.forget_value(walker, value)  # an object the walk does not know may keep it (`.append(p)`)
    return OPAQUE


def _module_method(walker: Walker, obj: ModuleObj, name: str, args: list, kwargs: dict, node: cst.Call) -> Any:
    if name == "parameters":
        return ItemList([p for _, p in obj.named_parameters()])
    if name == "named_parameters":
        return ItemList([(n, p) for n, p in obj.named_parameters()])
    if name == "zero_grad":
        for _, param in obj.named_parameters():
            walker.state.forget(param)
        return None
    if name in ("train", "eval", "to", "cuda", "cpu", "float", "half", "bfloat16", "requires_grad_"):
        return obj
    if name in ("children", "modules"):
        return ItemList([c for c in obj.children.values() if isinstance(c, ModuleObj)])
    if name in ("named_children", "items"):
        return ItemList([(k, c) for k, c in obj.children.items() if isinstance(c, ModuleObj)])
    if name in ("values",):
        return ItemList([c for c in obj.children.values()])
    if name in _REGISTERS and len(args) == 2 and isinstance(args[0][0], str):  # as `self.fc = m`
        if isinstance(args[1][0], (Param, ModuleObj)):
            obj.children[args[0][0]] = args[1][0]
            return None
    if name == "forward":
        return merge_data([v for v, _ in args] + [Data(models=(obj,))])
    if name in accumulation.MODULE_HOOKS:
        return accumulation.register_module_hook(walker, obj, args, node)
    for rules in LIBRARY_RULES:
        handled = rules.method(walker, obj, name, args, kwargs, node)
        if handled is not NotImplemented:
            return handled
    if name == "no_sync" and obj.ddp_axis is not None:
        return accumulation.no_sync_of(obj, walker.remember(node))
    if name == "set_requires_gradient_sync" and _set_sharded_sync(obj, args, kwargs):
        return None
    for value, _ in args:
        sync.forget_value(walker, value)
    sync.forget_value(walker, obj)
    return OPAQUE


def _grad_method(walker: Walker, grad: GradRef, name: str, values: list, node: cst.Call) -> Any:
    if name == "norm":
        found = norms.norm_of(walker, grad, values)
        return OPAQUE if found is None else found
    if name == "div_" and values and isinstance(values[0], WorldSize):
        sync.divide_value(walker, grad, values[0].axis, node)
        return grad
    if name == "copy_" and values:
        sync.copy_into(walker, grad, values[0])
        return grad
    if name in ("div", "__truediv__") and values and isinstance(values[0], WorldSize):
        return GradRef(grad.param, (*grad.ops, ("div", values[0].axis, walker.remember(node))))
    if name.endswith("_") or name in ("register_hook",):
        walker.state.forget(grad.param)
        return grad
    if name in ("clone", "detach", "float", "contiguous", "view", "reshape", "flatten", "to_local"):
        return GradRef(grad.param, grad.ops)
    return OPAQUE
