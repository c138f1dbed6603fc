# spmdcheck: mesh = ["dp", "tp"]
"""`view`/`reshape` whose sizes are the input's own keep those dims and their shards; a shard on the first
reshaped dim moves to an inferred (`-1`) outermost new dim. Other sizes lose the shard dim (silently)."""
import torch

import spmd_types as spmd


def head_split(t: torch.Tensor, head_dim: int) -> torch.Tensor:
    # torchtitan's local_head_split: (batch, seq, heads * head_dim) -> (batch, seq, heads, head_dim)
    spmd.assert_type(t, {"dp": spmd.S(0), "tp": spmd.S(2)})
    out = t.view(t.shape[0], t.shape[1], -1, head_dim)
    spmd.assert_type(out, {"dp": spmd.S(0), "tp": spmd.S(2)})
    spmd.assert_type(out, {"tp": spmd.S(3)})  # error: SPMD401 col 5
    return out


def unpacked_sizes(x: torch.Tensor) -> torch.Tensor:
    # `b, s, _ = x.shape` also says x has 3 dims: its last dim, sharded, is the one split
    spmd.assert_type(x, {"dp": spmd.S(0), "tp": spmd.S(-1)})
    b, s, _ = x.shape
    y = x.view(b, s, -1, 64)
    spmd.assert_type(y, {"tp": spmd.S(1)})  # error: SPMD401 col 5
    return y


def flattened(x: torch.Tensor) -> torch.Tensor:
    spmd.assert_type(x, {"dp": spmd.S(0), "tp": spmd.S(1)})
    flat = x.view(-1)  # dp's blocks of dim 0 are blocks of the flat dim; tp's dim-1 blocks are not
    spmd.assert_type(flat, {"dp": spmd.S(0)})
    spmd.assert_type(flat, {"tp": spmd.S(0)})
    return flat


def computed_sizes(x: torch.Tensor, n: int) -> torch.Tensor:
    # sizes the checker cannot relate to x's dims: the shard dim is unknown, and unknown is silent
    spmd.assert_type(x, {"tp": spmd.S(1)})
    y = x.reshape(n * 2, -1)
    spmd.assert_type(y, {"tp": spmd.S(0)})
    return y

# [expected messages] line:column CODE: message
# 14:5 SPMD401: assert_type: on axis 'tp' the value is sharded on dim 2 but S(3) is declared
# 23:5 SPMD401: assert_type: on axis 'tp' the value is sharded on dim 2 but S(1) is declared
