# spmdcheck: mesh = ["dp", "tp"]
"""A reduction over a negative dim of a tensor of unknown rank: the checker guesses a matrix (rank 2)
only when the layout allows it. An activation sharded on dim 1 on one axis and dim 2 on another has at
least 3 dims, so `mean(-1)` is not over the dim-1 shard (torchtitan's per-head RMSNormGated, whose
activations are S(1) on dp and S(2) on tp)."""
import torch

import spmd_types as spmd


def per_head_norm(x: torch.Tensor) -> torch.Tensor:
    spmd.assert_type(x, {"dp": spmd.S(1), "tp": spmd.S(2)})
    variance = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(variance + 1e-6)


def matrix_norm(x: torch.Tensor) -> torch.Tensor:
    # nothing says x has more than 2 dims: a matrix's last dim is the dp shard
    spmd.assert_type(x, {"dp": spmd.S(1)})
    variance = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(variance + 1e-6)  # warning: SPMD201 col 28

# [expected messages] line:column CODE: message
# 21:28 SPMD201: `variance` is a per-rank partial sum on axis 'dp' (from the sharded contraction at line 20) and gets a Replicate or scalar term added by `Tensor.__add__` (counted once per rank) before it is reduced
