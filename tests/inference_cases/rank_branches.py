# spmdcheck: mesh = ["tp"]
"""A collective under a rank-dependent condition deadlocks unless the other branch runs the same collectives."""
import torch.distributed as dist
from megatron.core import parallel_state

import spmd_types as spmd
from spmd_types import I, P, R
from spmdcheck.annotations import Local


def f(x: Local["tp: P"], y: Local["tp: P"], z: Local["tp: P"], w: Local["tp: P"], debug: bool):
    rank = dist.get_rank()
    if rank == 0:
        x = spmd.all_reduce(x, "tp", src=P, dst=R)  # error: SPMD501 col 13
        print("reduced")
    if rank % 2 == 0:
        y = spmd.all_reduce(y, "tp", src=P, dst=I)
    else:
        y = spmd.all_reduce(y, "tp", src=P, dst=I)
    if debug:
        z = spmd.all_reduce(z, "tp", src=P, dst=I)
    tp_rank = parallel_state.get_tensor_model_parallel_rank()
    if tp_rank != 0 and debug:
        pass
    else:
        dist.all_reduce(w)  # error: SPMD501 col 9
    return y

# [expected messages] line:column CODE: message
# 14:13 SPMD501: `all_reduce` on axis 'tp' runs only on the ranks where the rank-dependent condition at line 13 is true: the other ranks never join it (or join another collective), and the program hangs
# 26:9 SPMD501: `dist.all_reduce` on axis 'tp' runs only on the ranks where the rank-dependent condition at line 23 is false: the other ranks never join it (or join another collective), and the program hangs
