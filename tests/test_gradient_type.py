"""The gradient-type duality of the lattice (what reveal_spmd_type and --show-types print as the gradient)."""

from __future__ import annotations

import pytest

from spmdcheck.lattice import AI, AP, AR, AV, AxisType, Kind, S, Site, SpmdType, gradient_axis_type, gradient_type


@pytest.mark.parametrize(
    "forward,backward",
    [(AR, AP), (AP, AR), (AI, AI), (AV, AV), (S(0), S(0)), (S(-1), S(-1))],
    ids=["R->P", "P->R", "I->I", "V->V", "S(0)->S(0)", "S(-1)->S(-1)"],
)
def test_axis_duality(forward, backward):
    assert gradient_axis_type(forward) == backward


def test_duality_is_an_involution():
    for t in (AR, AI, AV, AP, S(2)):
        assert gradient_axis_type(gradient_axis_type(t)) == t


def test_pending_sum_is_plain_v_in_the_gradient():
    pending = AxisType(Kind.V, pending=Site(3, "einsum"))
    assert gradient_axis_type(pending) == AV
    assert gradient_axis_type(AxisType(Kind.V, shard=1, pending=Site(3))) == S(1)


def test_whole_type_per_axis():
    forward = SpmdType({"tp": AI, "dp": S(0), "cp": AR, "ep": AP})
    assert gradient_type(forward) == SpmdType({"tp": AI, "dp": S(0), "cp": AP, "ep": AR})
    assert gradient_type(SpmdType()) == SpmdType()


def test_agrees_with_spmd_types_backward_type():
    spmd_types = pytest.importorskip("spmd_types")
    theirs = {
        Kind.R: spmd_types.R,
        Kind.I: spmd_types.I,
        Kind.V: spmd_types.V,
        Kind.P: spmd_types.P,
    }
    for kind, their_type in theirs.items():
        ours = gradient_axis_type(AxisType(kind)).kind
        assert theirs[ours] is their_type.backward_type(), kind
