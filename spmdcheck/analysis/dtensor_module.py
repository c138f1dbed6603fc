"""`distribute_module(module, device_mesh, partition_fn, input_fn, output_fn)`: a module's parameters made
DTensors (issue 22, item 2).

Without `partition_fn`, PyTorch replicates every parameter of the module and of its submodules on the mesh:
each becomes a Replicate DTensor there (a leaf, its gradient what its consumers give it), so `m.weight` is a
DTensor and `m(x)` with a local `x` mixes a DTensor and a plain tensor (PyTorch refuses it: SPMD112), unless
`input_fn` converts the inputs. A `partition_fn` lays the parameters out as it likes, and an `input_fn` or
`output_fn` changes what forward receives or returns: the checker does not follow them, so the parameters
are then forgotten (unknown, silent) rather than typed wrongly.
"""

from __future__ import annotations

from spmdcheck.analysis.binding import Arg
from spmdcheck.analysis.configs import is_module_class
from spmdcheck.analysis.dtensor import DTensorValue, make_dtensor
from spmdcheck.analysis.dtensor.boundary import mesh_or_configured
from spmdcheck.analysis.dtensor.values import REPLICATE_PLACEMENT, is_none
from spmdcheck.analysis.frames import Engine
from spmdcheck.analysis.values import UNKNOWN, InstanceValue, TensorValue, Value
from spmdcheck.lattice import GradState

QUALNAMES = frozenset(
    {
        "torch.distributed.tensor.distribute_module",
        "torch.distributed.tensor._api.distribute_module",
        "torch.distributed._tensor.distribute_module",
        "torch.distributed._tensor.api.distribute_module",
    }
)

_PARAMS = ("module", "device_mesh", "partition_fn", "input_fn", "output_fn")


def distribute_module(interp: Engine, args: list[Arg]) -> Value:
    """The module it was given, its parameters replicated on the mesh (or forgotten: see the module docstring)."""
    given: dict[str, Value] = {}
    for name, (_, value, _) in zip(_PARAMS, [a for a in args if a[0] is None]):
        given[name] = value
    given.update({k: v for k, v, _ in args if k in _PARAMS})
    module = given.get("module")
    if not isinstance(module, InstanceValue):
        return module if module is not None else UNKNOWN
    mesh = mesh_or_configured(interp, given.get("device_mesh"), None)
    custom = any(not is_none(given.get(name)) for name in ("partition_fn", "input_fn", "output_fn"))
    for owner in _modules(module):
        for name, value in list(owner.attrs.items()):
            if not _is_parameter(value):
                continue
            if custom or mesh is None:
                interp.set_attr(owner, name, UNKNOWN)
            elif isinstance(value, TensorValue):  # a DTensor parameter already is kept, as PyTorch keeps it
                replicated = (REPLICATE_PLACEMENT,) * len(mesh.axes)
                interp.set_attr(owner, name, make_dtensor(mesh, replicated, None, value.rank, GradState.YES))
    return module


def _is_parameter(value: Value) -> bool:
    """A parameter the checker built (`nn.Parameter(...)`: a leaf that requires grad), local or DTensor."""
    if isinstance(value, TensorValue):
        return value.leaf and value.grad is GradState.YES
    return isinstance(value, DTensorValue) and value.grad is GradState.YES


def _modules(root: InstanceValue, depth: int = 8) -> list[InstanceValue]:
    """The module and its submodules held in its attributes (nested `depth` deep), each once."""
    out, todo, seen = [], [(root, 0)], {id(root)}
    while todo:
        owner, level = todo.pop()
        out.append(owner)
        if level >= depth:
            continue
        for value in owner.attrs.values():
            if isinstance(value, InstanceValue) and id(value) not in seen and is_module_class(value.cls):
                seen.add(id(value))
                todo.append((value, level + 1))
    return out
