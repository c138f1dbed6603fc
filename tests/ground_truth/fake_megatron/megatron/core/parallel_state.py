"""Test-only `megatron.core.parallel_state`: every group getter returns the group
of one axis of the DeviceMesh the harness binds with :func:`_bind_mesh`.

Axis names: tp, dp, cp, pp, ep, etp, edp. Asking for an axis the program's
mesh does not have gives the trivial one-rank group of this rank, as Megatron
does for a parallelism of size 1.
"""
from __future__ import annotations

import torch.distributed as dist

_MESH = None
_SINGLETONS: dict = {}


def _bind_mesh(mesh, singletons=None) -> None:  # noqa: ANN001 - harness hook
    global _MESH, _SINGLETONS
    _MESH = mesh
    _SINGLETONS = dict(singletons or {})


def _group(axis: str):  # noqa: ANN202
    if _MESH is None:
        raise RuntimeError("fake megatron: parallel state is not initialized (no mesh bound)")
    names = _MESH.mesh_dim_names or ()
    if axis in names:
        return _MESH.get_group(axis)
    if axis in _SINGLETONS:
        return _SINGLETONS[axis]
    raise RuntimeError(f"fake megatron: the mesh {tuple(names)} has no {axis!r} axis")


def _size(axis: str) -> int:
    return dist.get_world_size(_group(axis))


def _rank(axis: str) -> int:
    return dist.get_rank(_group(axis))


def initialize_model_parallel(tensor_model_parallel_size: int = 1, pipeline_model_parallel_size: int = 1,
                              **_unsupported) -> None:  # noqa: ANN003
    """Megatron's entry for a program that makes its own groups: a (dp, tp) DeviceMesh over the world, the
    tensor-parallel ranks of a replica consecutive, as Megatron lays them out (pipeline size 1 only)."""
    from torch.distributed.device_mesh import init_device_mesh

    if pipeline_model_parallel_size != 1 or _unsupported:
        raise NotImplementedError("fake megatron: only tensor x data parallelism is supported")
    tp = tensor_model_parallel_size
    _bind_mesh(init_device_mesh("cpu", (dist.get_world_size() // tp, tp), mesh_dim_names=("dp", "tp")))


def destroy_model_parallel() -> None:
    _bind_mesh(None)


def is_initialized() -> bool:
    return _MESH is not None


def model_parallel_is_initialized() -> bool:
    return _MESH is not None


def get_tensor_model_parallel_group(check_initialized: bool = True):  # noqa: ANN201
    return _group("tp")


def get_data_parallel_group(with_context_parallel: bool = False, partial_data_parallel: bool = False,
                            independent_all_gather: bool = False):  # noqa: ANN201
    return _group("dp")


def get_context_parallel_group(check_initialized: bool = True):  # noqa: ANN201
    return _group("cp")


def get_pipeline_model_parallel_group(check_initialized: bool = True):  # noqa: ANN201
    return _group("pp")


def get_expert_model_parallel_group(check_initialized: bool = True):  # noqa: ANN201
    return _group("ep")


def get_expert_tensor_parallel_group(check_initialized: bool = True):  # noqa: ANN201
    return _group("etp")


def get_expert_data_parallel_group(check_initialized: bool = True, partial_expert_data_parallel: bool = False):  # noqa: ANN201
    return _group("edp")


def get_tensor_model_parallel_world_size() -> int:
    return _size("tp")


def get_tensor_model_parallel_rank() -> int:
    return _rank("tp")


def get_tensor_model_parallel_src_rank() -> int:
    return dist.get_global_rank(_group("tp"), 0) if _size("tp") > 1 else dist.get_rank()


def get_data_parallel_world_size(with_context_parallel: bool = False, partial_data_parallel: bool = False) -> int:
    return _size("dp")


def get_data_parallel_rank(with_context_parallel: bool = False, partial_data_parallel: bool = False) -> int:
    return _rank("dp")


def get_context_parallel_world_size() -> int:
    return _size("cp")


def get_context_parallel_rank() -> int:
    return _rank("cp")


def get_pipeline_model_parallel_world_size() -> int:
    return _size("pp")


def get_pipeline_model_parallel_rank() -> int:
    return _rank("pp")


def is_pipeline_first_stage(ignore_virtual: bool = True, vp_stage: int | None = None) -> bool:
    return _rank("pp") == 0


def is_pipeline_last_stage(ignore_virtual: bool = True, vp_stage: int | None = None) -> bool:
    return _rank("pp") == _size("pp") - 1


def get_expert_model_parallel_world_size() -> int:
    return _size("ep")


def get_expert_model_parallel_rank() -> int:
    return _rank("ep")


def get_expert_tensor_parallel_world_size() -> int:
    return _size("etp")


def get_expert_tensor_parallel_rank() -> int:
    return _rank("etp")
