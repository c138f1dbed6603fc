"""A program's own torch.autograd.Function (analysis/autograd_functions.py) and its own Megatron-like
parallel_state (analysis/group_inference.py): raw collectives inside forward/backward are no SPMD306, and
`Fn.apply` is typed as the collective forward and backward make together, on the axis the group spans."""

from __future__ import annotations

import libcst as cst
import pytest

from spmdcheck.analysis.group_inference import CONTIGUOUS, STRIDED, _group_grids
from spmdcheck.api import Settings, check_source

FUNCTIONS = """
import torch
import torch.distributed as dist
import torch.nn.functional as F
import spmd_types as spmd
from megatron.core import parallel_state
from spmdcheck.annotations import reveal_spmd_type


def _reduce(x):
    dist.all_reduce(x, group=parallel_state.get_tensor_model_parallel_group())
    return x


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return {forward}

    @staticmethod
    def backward(ctx, grad):
        return {backward}


def f():
    x = spmd.assert_type(torch.randn(4, 4, requires_grad=True), {{"tp": spmd.{given}}})
    y = Fn.apply(x * 2)
    reveal_spmd_type(y)
"""


def _check(forward: str, backward: str, given: str, registry) -> tuple[set[str], str]:  # noqa: ANN001
    source = FUNCTIONS.format(forward=forward, backward=backward, given=given)
    diags = check_source(source, "<t>", Settings(mesh=("tp",)), registry)
    revealed = next((d.message for d in diags if d.code == "SPMD901"), "")
    return {d.code for d in diags if d.code != "SPMD901"}, revealed


@pytest.mark.parametrize(
    "forward,backward,given,codes,revealed",
    [
        # Megatron's reduce_from: all_reduce(P -> I); its copy_to: convert(I -> R)
        ("_reduce(x.clone())", "grad", "P", set(), "forward {tp: I}"),
        ("x", "_reduce(grad.clone())", "I", set(), "forward {tp: R}"),
        # an all-reduce both ways: all_reduce(P -> R)
        ("_reduce(x.clone())", "_reduce(grad.clone())", "P", set(), "forward {tp: R}"),
        # the wrong input is reported at the apply, as for the stubbed mapping
        ("x", "_reduce(grad.clone())", "P", {"SPMD301"}, ""),
        ("_reduce(x.clone())", "grad", "R", {"SPMD302"}, ""),
        # no collective at all: forward as written (run without grad), the input's type
        ("x * 3", "grad * 3", "P", set(), "forward {tp: P}"),
    ],
)
def test_apply_is_the_collective_of_forward_and_backward(forward, backward, given, codes, revealed, registry):
    found, message = _check(forward, backward, given, registry)
    assert found == codes
    assert revealed in message


def test_no_spmd306_inside_forward_but_still_outside(registry):
    found, _ = _check("_reduce(x.clone())", "grad", "P", registry)
    assert "SPMD306" not in found
    outside = FUNCTIONS.format(forward="x", backward="grad", given="P")
    outside = outside.replace("y = Fn.apply(x * 2)", "y = _reduce(x * 2)")
    diags = check_source(outside, "<t>", Settings(mesh=("tp",)), registry)
    assert "SPMD306" in {d.code for d in diags}


PARALLEL_STATE = """
import torch
import torch.distributed as dist
import spmd_types as spmd

_TP = None
_DP = None
_ODD = None


def initialize(tp):
    global _TP, _DP, _ODD
    world, rank = dist.get_world_size(), dist.get_rank()
    for i in range(world // tp):
        ranks = list(range(i * tp, (i + 1) * tp))
        group = dist.new_group(ranks)
        if rank in ranks:
            _TP = group
    for j in range(tp):
        group = dist.new_group(range(j, world, tp))
        if rank in range(j, world, tp):
            _DP = group
    _ODD = dist.new_group(compute_ranks())


def get_tp():
    assert _TP is not None
    return _TP


def get_dp():
    return _DP


def get_odd():
    return _ODD


def f():
    x = spmd.assert_type(torch.randn(4), {{"dp": spmd.R, "tp": spmd.R}})
    with torch.no_grad():
        dist.all_reduce(x, group={getter}())
"""


@pytest.mark.parametrize("getter,axis", [("get_tp", "tp"), ("get_dp", "dp"), ("get_odd", None)])
def test_the_axis_of_a_group_is_read_from_its_rank_grid(getter, axis, registry):
    source = PARALLEL_STATE.format(getter=getter)
    diags = check_source(source, "<t>", Settings(mesh=("dp", "tp")), registry)
    reduced_twice = [d.message for d in diags if d.code == "SPMD302"]
    if axis is None:
        assert not reduced_twice  # a grid the checker cannot read: the axis stays unknown
    else:
        assert len(reduced_twice) == 1 and f"axis '{axis}'" in reduced_twice[0]


def test_rank_grids():
    module = cst.parse_module(PARALLEL_STATE.format(getter="get_tp"))
    assert _group_grids(module) == {"_TP": CONTIGUOUS, "_DP": STRIDED}
