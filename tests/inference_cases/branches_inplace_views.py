# spmdcheck: mesh = ["tp"]
"""if/else joins name the branch, in-place and out= and setitem, shard dims through views, raw dist, no-grad relaxation."""
import torch
import torch.nn.functional as F
import torch.distributed as dist
from typing import Annotated
import spmd_types as spmd
from spmd_types import I, P, R, S, V
from spmdcheck.annotations import Local


def block(x: Annotated[torch.Tensor, {"tp": S(0)}], w1: Local["tp: S(0)"], w2: Local["tp: S(1)"], sequence_parallel: bool):
    if sequence_parallel:
        h = spmd.all_gather(x, "tp", src=S(0), dst=R)
    else:
        h = x
    y = F.linear(h, w1)  # warning: SPMD109 col 9
    z = F.linear(F.gelu(y), w2)
    out = F.gelu(z)  # warning: SPMD201 col 11
    return spmd.all_reduce(z, "tp", src=V, dst=I)


def loop(x: Local["tp: I"], ws: list):
    for w in ws:
        x = x + 1
    return x


def inplace(buf: Local["tp: R"], v: Local["tp: V"], p: Local["tp: P"]):
    buf.add_(v)  # error: SPMD110 col 5
    p.mul_(2)
    p.add_(1)  # error: SPMD104 col 5
    torch.add(p, p, out=buf)  # buf's type is unknown after the failed write above: no cascade
    buf[0] = v  # error: SPMD111 col 5


def shard_moves(x: Local["tp: S(1)"]):
    y = x.transpose(0, 1)
    spmd.all_gather(y, "tp", src=S(1), dst=R)  # error: SPMD305 col 5
    z = x.unsqueeze(0)
    spmd.all_gather(z, "tp", src=S(2), dst=R)
    spmd.all_gather(x, "tp", src=S(2), dst=R)  # error: SPMD305 col 5


def raw(w: Local["tp: P"]):
    p = torch.nn.Parameter(torch.randn(4, 4))
    y = p * 2
    dist.all_reduce(y)  # error: SPMD306 col 5
    dist.all_reduce(w)
    dist.all_reduce(w)  # error: SPMD302 col 5


def nograd():
    a = spmd.assert_type(torch.randn(4, requires_grad=True), {"tp": I})
    b = torch.ones(4)
    c = a + b
    with torch.no_grad():
        d = spmd.assert_type(torch.randn(4), {"tp": R})
    e = spmd.assert_type(torch.randn(4, requires_grad=True), {"tp": R})
    f = a + e  # error: SPMD102 col 9

# [expected messages] line:column CODE: message
# 17:9 SPMD109: `F.linear` (...i,oi->...o): labels E1, o sharded on axis 'tp' across the operands; each rank computes a block with no global layout (`h`: S(0), `w1`: S(0)) (when the `if` at line 13 takes the else branch)
# 19:11 SPMD201: `z` is a per-rank partial sum on axis 'tp' (from the sharded contraction at line 18) and goes through non-linear `F.gelu` before it is reduced
# 30:5 SPMD110: `Tensor.add_` would change the type of `buf` on axis 'tp' from R to V; an in-place write must keep its destination's type
# 32:5 SPMD104: `Tensor.add_` adds a Replicate or scalar term to a Partial on axis 'tp': it is counted once per rank (operands: `p`: P, `1`: Scalar)
# 34:5 SPMD111: `x[...] = y` would change the type of `buf` on axis 'tp' from P to V; an in-place write must keep its destination's type
# 39:5 SPMD305: `all_gather` gathers/splits dim 1 (src=S(1)) but `y` is sharded on dim 0 on axis 'tp': the blocks would be concatenated along the wrong dim
# 42:5 SPMD305: `all_gather` gathers/splits dim 2 (src=S(2)) but `x` is sharded on dim 1 on axis 'tp': the blocks would be concatenated along the wrong dim
# 48:5 SPMD306: `dist.all_reduce` on `y`, which needs grad: raw torch.distributed collectives have no backward, so its gradient is silently wrong
# 50:5 SPMD302: `dist.all_reduce` expects a Partial on axis 'tp' but `w` is I: it is already reduced, and reducing again multiplies it by the axis size
# 60:9 SPMD102: Invariant on axis 'tp' cannot be mixed with other types: its gradient would not be all-reduced (operands: `a`: I, `e`: R)
