# spmdcheck: mesh = ["dp", "tp"]
"""`x[...] = y` combines what x held with what is written, as an op does (a deliberate difference: spmd_types
does not see item assignment). Replicated data written into a varying buffer leaves it varying; varying
data written into a replicated buffer that needs no gradient makes it varying; varying data written into
a buffer that takes part in autograd as replicated changes its type."""
import torch

import spmd_types as spmd


def replicated_into_varying(frames: torch.Tensor, n: int) -> torch.Tensor:
    pos = spmd.mutate_type(torch.zeros(n, 16), src=spmd.R, dst={"dp": spmd.V, "tp": spmd.R})
    spmd.assert_type(frames, {"dp": spmd.R, "tp": spmd.R})
    pos[0, :4] = frames
    spmd.assert_type(pos, {"dp": spmd.V, "tp": spmd.R})
    return pos


def varying_into_replicated_leaf(h: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(8, 16, requires_grad=True).clone()
    spmd.assert_type(h, {"dp": spmd.V, "tp": spmd.R})
    out[:, :4] = h  # error: SPMD111 col 5
    return out


def parameter_of_untyped_data(x: torch.Tensor) -> torch.Tensor:
    # laid out later by the module's parallelization: unknown here, so nothing is claimed about the write
    table = torch.nn.Parameter(torch.empty(4, 16))
    buf = spmd.mutate_type(torch.zeros(4, 16), src=spmd.R, dst={"dp": spmd.V, "tp": spmd.I})
    buf[:, :] = table * torch.ones(4, 16)
    return buf

# [expected messages] line:column CODE: message
# 22:5 SPMD111: `x[...] = y` would change the type of `out` on axis 'dp' from R to V; an in-place write must keep its destination's type
