# spmdcheck: mesh = ["dp", "tp"]
"""Megatron mappings, process groups from a DeviceMesh, the spmd_types conversion API, Scalar, meshes, local_map, loops."""
import torch
import torch.nn.functional as F
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
import spmd_types as spmd
from spmd_types import I, P, R, S, V
from megatron.core import parallel_state
from megatron.core.tensor_parallel import (
    copy_to_tensor_model_parallel_region,
    reduce_from_tensor_model_parallel_region,
    gather_from_sequence_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
)
from spmdcheck.annotations import Local

mesh = init_device_mesh("cpu", (2, 4), mesh_dim_names=("dp", "tp"))
tp = mesh.get_group("tp")


def meg(x: Local["dp: R, tp: I"], w1: Local["dp: R, tp: S(0)"], w2: Local["dp: R, tp: S(1)"]):
    h = F.linear(x, w1)  # error: SPMD102 col 9
    h2 = F.linear(copy_to_tensor_model_parallel_region(x), w1)
    y = F.linear(F.gelu(h2), w2)
    out = reduce_from_tensor_model_parallel_region(y)
    out2 = reduce_from_tensor_model_parallel_region(out)  # error: SPMD302 col 12
    z = spmd.all_reduce(y, tp, src=P, dst=I)
    z2 = spmd.all_reduce(y, "pp", src=P, dst=I)  # error: SPMD003 col 29
    return out


def sp(x: Local["tp: S(0)"], w1: Local["tp: S(0)"], w2: Local["tp: S(1)"]):
    full = gather_from_sequence_parallel_region(x)
    y = F.linear(F.gelu(F.linear(full, w1)), w2)
    back = reduce_scatter_to_sequence_parallel_region(y)
    res = x + back
    bad = x + y  # warning: SPMD201 col 11
    return res


def apis(x: Local["tp: I"], v: Local["tp: V"]):
    r = spmd.invariant_to_replicate(x, "tp")
    s = spmd.shard(r, "tp", src=R, dst=S(0))
    g = spmd.unshard(s, "tp", src=S(0), dst=R)
    red = spmd.redistribute(v, "tp", src=V, dst=R)
    p = spmd.reinterpret(v, "tp", src=V, dst=P)
    p2 = spmd.reinterpret(r, "tp", src=R, dst=P)  # error: SPMD304 col 10
    p3 = spmd.reinterpret(r, "tp", src=R, dst=P, expert_mode=True)
    c = spmd.convert(p, "tp", src=P, dst=R)  # error: SPMD303 col 9
    sc = spmd.Scalar(3, {"tp": V})
    n = torch.narrow(r, 0, sc, 2)
    q = p * sc  # error: SPMD103 col 9
    a, b = torch.chunk(p, 2)
    e = F.relu(a)  # error: SPMD101 col 9


def meshes():
    with spmd.set_current_mesh(mesh):
        u = spmd.assert_type(torch.randn(4), {"tp": V})
        w = torch.zeros(4)
        k = u + w
    with spmd.no_typecheck():
        junk = spmd.assert_type(torch.randn(4), {"tp": P})
        j2 = F.gelu(junk)


@spmd.local_map(in_types=({"tp": P},), out_types={"tp": R})
def lm(x):
    return F.gelu(x)  # error: SPMD101 col 12


def loop(x: Local["tp: I"], w: Local["tp: S(0)"]):
    for i in range(3):
        x = F.linear(x, w)  # error: SPMD102 col 13
    return x

# [expected messages] line:column CODE: message
# 23:9 SPMD102: Invariant on axis 'tp' cannot be mixed with other types: its gradient would not be all-reduced (operands: `x`: I, `w1`: S(0))
# 27:12 SPMD302: `all_reduce` expects a Partial on axis 'tp' but `out` is I: it is already reduced (by the reduction at line 26), and reducing again multiplies it by the axis size
# 29:29 SPMD003: unknown mesh axis 'pp'; the mesh in scope has dp, tp
# 38:11 SPMD201: `y` is a per-rank partial sum on axis 'tp' (from the sharded contraction at line 35) and is combined with a Varying value by `Tensor.__add__` before it is reduced
# 48:10 SPMD304: `reinterpret(src=R, dst=P)` needs expert_mode=True: it scales the value's meaning by the axis size
# 50:9 SPMD303: `convert` does not allow src=P -> dst=R; use `all_reduce` instead
# 53:9 SPMD103: Partial on axis 'tp' cannot be combined with Varying; reduce the Partial first (operands: `p`: P, `sc`: V)
# 55:9 SPMD101: Partial on axis 'tp' goes through non-linear `F.relu`: f(sum) != sum(f); reduce first (operands: `a`: P)
# 70:12 SPMD101: Partial on axis 'tp' goes through non-linear `F.gelu`: f(sum) != sum(f); reduce first (operands: `x`: P)
# 75:13 SPMD102: Invariant on axis 'tp' cannot be mixed with other types: its gradient would not be all-reduced (operands: `x`: I, `w`: S(0))
