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
    y = F.linear(h, w1)  # warning: SPMD109
    z = F.linear(F.gelu(y), w2)
    out = F.gelu(z)  # warning: SPMD201
    return spmd.all_reduce(z, "tp", src=V, dst=I)


def loop(x: Local["tp: I"], ws: list):
    for w in ws:
        x = x + 1
    return x


def inplace(buf: Local["tp: R"], v: Local["tp: V"], p: Local["tp: P"]):
    buf.add_(v)  # error: SPMD110
    p.mul_(2)
    p.add_(1)  # error: SPMD104
    torch.add(p, p, out=buf)  # buf's type is unknown after the failed write above: no cascade
    buf[0] = v  # error: SPMD111


def shard_moves(x: Local["tp: S(1)"]):
    y = x.transpose(0, 1)
    spmd.all_gather(y, "tp", src=S(1), dst=R)  # error: SPMD305
    z = x.unsqueeze(0)
    spmd.all_gather(z, "tp", src=S(2), dst=R)
    spmd.all_gather(x, "tp", src=S(2), dst=R)  # error: SPMD305


def raw(w: Local["tp: P"]):
    p = torch.nn.Parameter(torch.randn(4, 4))
    y = p * 2
    dist.all_reduce(y)  # error: SPMD306
    dist.all_reduce(w)
    dist.all_reduce(w)  # error: SPMD302


def nograd():
    a = spmd.assert_type(torch.randn(4, requires_grad=True), {"tp": I})
    b = torch.ones(4)
    c = a + b
    with torch.no_grad():
        d = spmd.assert_type(torch.randn(4), {"tp": R})
    e = spmd.assert_type(torch.randn(4, requires_grad=True), {"tp": R})
    f = a + e  # error: SPMD102
