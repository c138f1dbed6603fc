"""Generated inputs for the cost probes (issue 19, item 4 of Why): a large file, a deep class hierarchy.

`large_module(size)` writes a module of about `size` characters out of a rotation of realistic blocks:
annotated tensor-parallel layers (the three annotation spellings), functions checked by
`spmd.assert_type`, `nn.Module` classes whose `forward` calls the module's functions, callers of earlier
functions, rank-dependent branches, and plain helpers no type reaches (which the pre-pass blanks). Every
name is unique, so nothing collapses into one unit; one block in each rotation is a real bug (SPMD201:
a partial sum added to a replicated tensor before its reduction), so a run that gives up on the file
would be seen.

`deep_hierarchy(depth)` writes a chain of `depth` classes, each `forward` calling `super().forward`.
"""

from __future__ import annotations

HEADER = '''\
# spmdcheck: mesh = ["dp", "tp"]
"""Generated: a large tensor-parallel model file."""
from typing import Annotated

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import spmd_types as spmd
from spmd_types import I, P, R, S, V
from spmdcheck.annotations import Local

HIDDEN, FFN = 32, 128

'''

_BLOCKS = (
    # a column-parallel then row-parallel pair, in the Local spelling
    '''
def column_{i}(x: Local["tp: R"], w: Local["tp: S(0)"]) -> Local["tp: S(-1)"]:
    return F.linear(x, w)


def row_{i}(h: Local["tp: S(-1)"], w: Local["tp: S(1)"]) -> Local["tp: I"]:
    return spmd.all_reduce(F.linear(h, w), "tp", dst=I)

''',
    # the dict spelling, a convert and a layer norm
    '''
def block_{i}(
    x: Annotated[torch.Tensor, {{"dp": S(0), "tp": I}}],
    w1: Annotated[torch.Tensor, {{"dp": R, "tp": S(0)}}],
    w2: Annotated[torch.Tensor, {{"dp": R, "tp": S(1)}}],
) -> torch.Tensor:
    xr = spmd.convert(x, "tp", src=I, dst=R)
    h = F.gelu(F.linear(xr, w1))
    y = F.linear(h, w2)
    y = spmd.all_reduce(y, "tp", dst=R)
    return F.layer_norm(xr + y, (HIDDEN,))

''',
    # assert_type on unannotated parameters, a shape branch
    '''
def asserted_{i}(x, w):
    x = spmd.assert_type(x, {{"tp": R}})
    w = spmd.assert_type(w, {{"tp": V}})
    h = F.gelu(F.linear(x, w))
    y = h.sum(dim=0) + {i}
    if y.shape[0] > 3:
        y = y * 2
    return y

''',
    # a module whose forward calls the pair above, and holds a buffer
    '''
class Layer{i}(nn.Module):
    def __init__(self, hidden: int = HIDDEN) -> None:
        super().__init__()
        self.w1 = nn.Parameter(torch.empty(FFN, hidden))
        self.w2 = nn.Parameter(torch.empty(hidden, FFN))
        self.scale = {i} % 7 + 1

    def forward(self, x: Local["tp: R"], w1: Local["tp: S(0)"], w2: Local["tp: S(1)"]) -> torch.Tensor:
        h = column_{i}(x, w1)
        out = row_{i}(h, w2) * self.scale
        return out

''',
    # a caller of an earlier block, with a rank-dependent branch kept rank-independent
    '''
def step_{i}(x: Local["tp: I"], w1: Local["tp: S(0)"], w2: Local["tp: S(1)"]) -> Local["tp: I"]:
    xr = spmd.convert(x, "tp", src=I, dst=R)
    y = row_{i}(column_{i}(xr, w1), w2)
    if dist.get_rank() == 0:
        stats_{i} = y.detach().float().mean()
    return y

''',
    # plain helpers no type reaches: the pre-pass leaves their bodies out
    '''
def shape_of_{i}(sizes, factor=2):
    total = 1
    for s in sizes:
        total *= s * factor
    names = [f"dim{{k}}" for k in range(len(sizes))]
    return total, dict(zip(names, sizes))


def config_{i}(**kwargs):
    out = {{"hidden": HIDDEN, "ffn": FFN, "layers": {i}}}
    out.update(kwargs)
    return sorted(out.items())

''',
    # the bug: a partial sum (a matmul of two tp-sharded operands) added to a replicated tensor
    '''
def buggy_{i}(x: Local["tp: S(1)"], w: Local["tp: S(0)"], b: Local["tp: R"]):
    return x @ w + b

''',
)

def large_module(size: int) -> str:
    """A module of at least `size` characters (rounded up to whole rotations of the blocks)."""
    parts = [HEADER]
    length, i = len(HEADER), 0
    while length < size:
        for block in _BLOCKS:
            text = block.format(i=i)
            parts.append(text)
            length += len(text)
        i += 1
    return "".join(parts)


def rotations(text: str) -> int:
    """How many rotations of the blocks `large_module` wrote (one bug each)."""
    return text.count("\ndef buggy_")


def deep_hierarchy(depth: int) -> str:
    """`depth` classes, each a subclass of the one before, each `forward` calling `super().forward`,
    and a typed entry point at the bottom that calls the deepest (the annotation makes the chain analysed,
    not blanked) and holds one SPMD201 on its last line (the partial sum it passes down reaches the
    non-linear op at the chain's end, line 9, only where inlining goes that deep: six levels)."""
    lines = [
        '# spmdcheck: mesh = ["tp"]',
        "import torch",
        "import torch.nn as nn",
        "from spmdcheck.annotations import Local",
        "",
        "",
        "class Layer0(nn.Module):",
        "    def forward(self, x):",
        "        return x.exp()",
        "",
    ]
    for k in range(1, depth + 1):
        lines += [
            "",
            f"class Layer{k}(Layer{k - 1}):",
            "    def forward(self, x):",
            "        y = super().forward(x)",
            "        return y * 2",
            "",
        ]
    lines += [
        "",
        'def main(x: Local["tp: S(1)"], w: Local["tp: S(0)"]):',
        f"    model = Layer{depth}()",
        "    y = model(x @ w)",
        "    return y + (x @ w).exp()",  # a partial sum through a non-linear op: one SPMD201 on this line
        "",
    ]
    return "\n".join(lines)
