"""DTensor values (issue 22): placements read as local types at the DTensor/local boundary.

The fixtures in fixtures/dtensor/ hold the public bugs; these cases pin the interface (analysis/dtensor/) and the
boundary rules one at a time: the placement table, `from_local`'s check, the gradient placement of `to_local` and
`full_tensor`, silent ops on DTensors, and that wrapping local code in a `from_local`/`to_local` pair around a
helper does not change the verdict on it.
"""

from __future__ import annotations

import pytest

from spmdcheck.analysis.dtensor import (
    PARTIAL,
    REPLICATE,
    SHARD,
    DTensorValue,
    PlacementValue,
    from_local_type,
    local_type,
    make_dtensor,
    to_local,
)
from spmdcheck.analysis.dtensor.values import axis_local_type
from spmdcheck.analysis.values import MeshValue
from spmdcheck.api import Settings, check_source
from spmdcheck.lattice import AI, AP, AR, S, SpmdType

R_, P_, S0 = PlacementValue(REPLICATE), PlacementValue(PARTIAL), PlacementValue(SHARD, 0)


@pytest.mark.parametrize(
    ("forward", "gradient", "local"),
    [
        (R_, R_, AI),
        (R_, P_, AR),
        (S0, S0, S(0)),
        (P_, P_, AP),
        (P_, R_, AP),
        (S0, R_, None),
        (PlacementValue(PARTIAL, reduce_op="max"), None, None),
    ],
)
def test_placement_and_gradient_placement_give_the_local_type(forward, gradient, local):
    assert axis_local_type(forward, gradient if gradient is not None else forward) == local


def test_a_dtensor_on_a_2d_mesh_maps_each_dim_to_its_axis():
    dt = make_dtensor(MeshValue(("dp", "tp")), (S0, R_))
    assert isinstance(dt, DTensorValue) and dt.dims == (("dp",), ("tp",))
    assert local_type(dt) == SpmdType({"dp": S(0), "tp": AI})
    assert local_type(dt, (S0, P_)) == SpmdType({"dp": S(0), "tp": AR})
    assert from_local_type(dt.dims, SpmdType({"dp": S(0), "tp": AI})) == (S0, R_)
    assert to_local(make_dtensor(MeshValue(("tp",)), (None,))).opaque  # nothing known: unknown, silent


PRELUDE = """\
import torch
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
"""


def _codes(body: str, registry, mesh: tuple[str, ...] = ("tp",)) -> list[tuple[int, str]]:
    source = PRELUDE + body
    found = check_source(source, "<t>", Settings(mesh=mesh), registry)
    return sorted((d.line - PRELUDE.count("\n"), d.code) for d in found)


def test_to_local_of_a_replicate_dtensor_is_invariant_unless_its_gradient_is_partial(registry):
    bug = """
def f(x, mesh):
    w = distribute_tensor(torch.randn(4, 8), mesh, [Shard(1)]).to_local()
    h = DTensor.from_local(x, mesh, [Replicate()])
    return h.to_local() @ w
"""
    assert _codes(bug, registry) == [(5, "SPMD102")]
    assert _codes(bug.replace("h.to_local()", "h.to_local(grad_placements=(Partial(),))"), registry) == []


def test_full_tensor_defaults_to_a_replicate_gradient(registry):
    bug = """
def f(x, mesh):
    w = distribute_tensor(torch.randn(4, 8), mesh, [Shard(1)]).to_local()
    h = DTensor.from_local(x, mesh, [Shard(0)]).full_tensor()
    return h @ w
"""
    assert _codes(bug, registry) == [(5, "SPMD102")]
    assert _codes(bug.replace("full_tensor()", "full_tensor(grad_placements=[Partial()])"), registry) == []


def test_from_local_checks_the_local_value_against_its_placements(registry):
    bug = """
def f(mesh):
    w = distribute_tensor(torch.randn(8, 4), mesh, [Shard(0)]).to_local()
    partial = torch.randn(4, 8) @ w
    return DTensor.from_local(partial, mesh, [Replicate()])
"""
    assert _codes(bug, registry) == [(5, "SPMD401")]
    assert _codes(bug.replace("[Replicate()]", "[Partial()]"), registry) == []
    sharded = """
def f(mesh):
    w = distribute_tensor(torch.randn(8, 4), mesh, [Shard(0)]).to_local()
    return DTensor.from_local(w, mesh, [Shard(1)])
"""
    assert _codes(sharded, registry) == [(4, "SPMD401")]
    assert _codes(sharded.replace("[Shard(1)]", "[Shard(0)]"), registry) == []


def test_ops_on_dtensors_are_never_reported(registry):
    # a Partial into a non-linear op and added to a Replicate: DTensor all-reduces it first
    body = """
def f(x, mesh):
    a = distribute_tensor(torch.randn(4, 8), mesh, [Shard(1)])
    b = distribute_tensor(torch.randn(8, 4), mesh, [Shard(0)])
    p = a @ b
    r = distribute_tensor(torch.randn(4, 4), mesh, [Replicate()])
    return torch.softmax(p, dim=-1) + (p + r)
"""
    assert _codes(body, registry) == []


def test_a_from_local_to_local_pair_around_a_helper_keeps_the_verdict(registry):
    helper = """
def helper(h, w):
    return h @ w

def f(x, mesh):
    w = distribute_tensor(torch.randn(4, 8), mesh, [Shard(1)]).to_local()
    h = DTensor.from_local(x, mesh, [Replicate()]).to_local()
    return helper({arg}, w)
"""
    plain = _codes(helper.format(arg="h"), registry)
    wrapped = _codes(helper.format(arg="DTensor.from_local(h, mesh, [Replicate()]).to_local()"), registry)
    assert plain == wrapped == [(3, "SPMD102")]


def test_mixing_a_dtensor_and_a_local_tensor_and_redistributing_to_partial_are_reported(registry):
    body = """
def f(mesh):
    w = distribute_tensor(torch.randn(4, 4), mesh, [Replicate()])
    y = w + torch.zeros(4, 4)
    return w.redistribute(mesh, [Partial()])
"""
    assert _codes(body, registry) == [(4, "SPMD112"), (5, "SPMD407")]


def test_a_dtensor_of_unknown_placements_is_silent(registry):
    body = """
def f(x, mesh, placements):
    w = distribute_tensor(torch.randn(4, 8), mesh, placements).to_local()
    h = DTensor.from_local(x, mesh, placements)
    return h.to_local() @ w
"""
    assert _codes(body, registry) == []


def test_the_local_map_decorator_types_the_body_by_in_placements_and_in_grad_placements(registry):
    body = """
from torch.distributed.tensor.experimental import local_map


@local_map(out_placements=[Partial()], in_placements=((Replicate(),), (Shard(1),)){grads})
def experts(x, w):
    return x @ w
"""
    assert _codes(body.format(grads=""), registry) == [(7, "SPMD102")]
    assert _codes(body.format(grads=", in_grad_placements=((Partial(),), (Shard(1),))"), registry) == []


def test_placements_align_with_a_2d_mesh_by_position_against_a_rank_piece(registry):
    # `mesh` is a parameter: `mesh["tp"]` is the configured axis; the rank's chunk along tp varies along tp
    bug = """
def f(mesh):
    tp_rank, tp_size = mesh["tp"].get_local_rank(), mesh["tp"].size()
    shard = torch.randn(16, 8).chunk(tp_size, dim=0)[tp_rank]
    return DTensor.from_local(shard, mesh, [Shard(0), Replicate()])
"""
    assert _codes(bug, registry, mesh=("dp", "tp")) == [(5, "SPMD401")]
    assert _codes(bug.replace("[Shard(0), Replicate()]", "[Replicate(), Shard(0)]"), registry, mesh=("dp", "tp")) == []
    # a rank along dp picks a dp piece: replicated on tp is then right
    dp_piece = bug.replace('mesh["tp"].get_local_rank()', 'mesh["dp"].get_local_rank()')
    assert _codes(dp_piece, registry, mesh=("dp", "tp")) == []


def test_a_rank_piece_of_a_partial_sum_or_of_a_plain_list_is_not_made_varying(registry):
    body = """
def f(mesh, x):
    rank = mesh["tp"].get_local_rank()
    w = distribute_tensor(torch.randn(8, 4), mesh, [Shard(0)]).to_local()
    pending = (torch.randn(4, 8) @ w).chunk(2, dim=0)[rank]
    same = [torch.randn(4, 4)] * 2
    return DTensor.from_local(pending, mesh, [Partial()]), DTensor.from_local(same[rank], mesh, [Replicate()])
"""
    assert _codes(body, registry) == []


def test_a_rank_block_of_a_replicated_value_cut_into_the_axis_size_is_sharded_on_its_dim(registry):
    # `n` is `mesh["tp"].size()`: the block is S(0), so declaring it Shard(1) is the shard-dim mismatch
    body = """
import spmd_types as spmd

def f(mesh):
    tp_rank, tp_size = mesh["tp"].get_local_rank(), mesh["tp"].size()
    w = spmd.assert_type(torch.randn(16, 8), {{"dp": spmd.R, "tp": spmd.R}})
    return DTensor.from_local(w.chunk({count}, dim=0)[tp_rank], mesh, [Replicate(), Shard({dim})])
"""
    mesh = ("dp", "tp")
    assert _codes(body.format(count="tp_size", dim=1), registry, mesh) == [(7, "SPMD401")]
    assert _codes(body.format(count="tp_size", dim=0), registry, mesh) == []
    assert _codes(body.format(count="4", dim=1), registry, mesh) == []  # not one block per rank: V, no dim


def test_a_piece_of_an_unknown_tensor_at_a_rank_index_varies_along_that_axis(registry):
    # `batch` is untyped: its rank piece is V on tp all the same (other axes unknown), so declaring it Replicate
    # is the mismatch; `split` (also a str method) and a piece at a constant index stay unknown
    body = """
def f(mesh, batch):
    rank = mesh["tp"].get_local_rank()
    x = batch["x"].chunk(2, dim=0)[rank]
    return DTensor.from_local(x, mesh, [Replicate()])
"""
    assert _codes(body, registry) == [(5, "SPMD401")]
    assert _codes(body.replace("[Replicate()]", "[Shard(0)]"), registry) == []
    assert _codes(body.replace(".chunk(2, dim=0)[rank]", ".split(2)[rank]"), registry) == []
    assert _codes(body.replace(".chunk(2, dim=0)[rank]", ".chunk(2, dim=0)[0]"), registry) == []


def test_an_unknown_objects_get_local_rank_is_the_configured_meshs(registry):
    body = """
def f(model, batch):
    rank = model.mesh.get_local_rank({axis})
    x = batch["x"].chunk(2, dim=0)[rank]
    return DTensor.from_local(x, model.mesh, [Replicate()])
"""
    assert _codes(body.format(axis=""), registry) == [(5, "SPMD401")]
    # a 2-D mesh: a rank without a dim is the global rank (PyTorch refuses it); named, it is that axis's
    assert _codes(body.format(axis=""), registry, mesh=("dp", "tp")) == []
    assert _codes(body.format(axis='"tp"'), registry, mesh=("dp", "tp")) == []  # placements for 1 of 2 dims
    two = body.format(axis='"tp"').replace("[Replicate()]", "[Replicate(), Replicate()]")
    assert _codes(two, registry, mesh=("dp", "tp")) == [(5, "SPMD401")]


MODULE_STEP = """
from torch import nn


class Norm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        w = distribute_tensor(torch.randn(8), None, [Replicate()])
        self.weight = nn.Parameter(w)

    def forward(self, x):
        return x * self.weight.to_local()


def step({param}, batch):
    rank = mesh["tp"].get_local_rank()
    x = batch.chunk(2, dim=0)[rank]
    {model}
    return model(x)
"""


def test_a_parameter_annotated_with_a_module_class_runs_its_forward_like_a_built_module(registry):
    # `model: Norm` is the object Norm's methods are checked on: model(x) runs forward on x (V mixed with the
    # I weight), as a model built in the step does; `Norm | None` may be None: left unknown
    built = MODULE_STEP.format(param="mesh", model="model = Norm()")
    annotated = MODULE_STEP.format(param="mesh, model: Norm", model="")
    assert _codes(built, registry) == _codes(annotated, registry) == [(12, "SPMD102")]
    optional = MODULE_STEP.format(param="mesh, model: Norm | None", model="")
    assert _codes(optional, registry) == []


PLANNED_HEAD = """
from torch import nn
from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 32, bias=False)

    def run(self, part):
        return self.proj(part)


def build(mesh):
    return parallelize_module(Head(), mesh, {{"proj": ColwiseParallel(use_local_output=False)}})


def grads(model: Head, hidden: DTensor):
    part = hidden.detach().requires_grad_()
    out = {call}
    out.sum().backward()
    return DTensor.from_local(part.grad.to_local(), hidden.device_mesh, [{declared}])


def step(model: Head, x, mesh):
    return grads(model, DTensor.from_local(x, mesh, [Replicate()]))
"""


@pytest.mark.parametrize("call", ["model.proj(part)", "model.run(part)"])
def test_a_replicate_dtensor_given_to_a_column_parallel_module_gets_a_partial_gradient(registry, call):
    # the planned submodule called through the object or from a method of its class: the same crossing; its
    # input's `.grad` is Partial (each rank's weight rows give one share), so re-wrapping it Replicate is wrong
    bug = PLANNED_HEAD.format(call=call, declared="Replicate()")
    assert _codes(bug, registry) == [(23, "SPMD401")]
    assert _codes(PLANNED_HEAD.format(call=call, declared="Partial()"), registry) == []


def test_the_gradient_of_a_sharded_dtensor_is_sharded_alike_and_of_a_replicate_one_unknown(registry):
    body = """
def f(mesh, x):
    s = DTensor.from_local(x, mesh, [Shard(0)]).requires_grad_()
    r = DTensor.from_local(x, mesh, [Replicate()]).requires_grad_()
    (s.sum() + r.sum()).backward()
    return DTensor.from_local(s.grad.to_local(), mesh, [{s}]), DTensor.from_local(r.grad.to_local(), mesh, [Partial()])
"""
    assert _codes(body.format(s="Shard(1)"), registry) == [(6, "SPMD401")]
    assert _codes(body.format(s="Shard(0)"), registry) == []


def test_cross_entropy_inside_loss_parallel_is_a_replicate_loss_of_the_logits_mesh(registry):
    # loss_parallel: vocabulary-sharded logits and a local target give a Replicate loss DTensor, Invariant once
    # local (mixed with a rank's piece: SPMD102); outside it PyTorch refuses the local target, and another
    # reduction is not a scalar: unknown, silent
    body = """
import torch.nn.functional as F
from torch.distributed.tensor.parallel import loss_parallel


def f(mesh, logits_local, target, batch):
    piece = batch.chunk(2, dim=0)[mesh["tp"].get_local_rank()]
    logits = DTensor.from_local(logits_local, mesh, [Shard(-1)])
    with loss_parallel():
        loss = F.cross_entropy(logits, target{reduction})
    return loss.to_local() * piece
"""
    assert _codes(body.format(reduction=""), registry) == [(11, "SPMD102")]
    assert _codes(body.format(reduction=', reduction="sum"'), registry) == [(11, "SPMD102")]
    assert _codes(body.format(reduction=', reduction="none"'), registry) == []
    outside = body.format(reduction="").replace("    with loss_parallel():\n        loss", "    loss")
    assert _codes(outside, registry) == []


DISTRIBUTED_MODULE = """
from torch import nn
from torch.distributed.tensor import distribute_module


class Scale(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(8))

    def forward(self, x):
        return x * self.weight


def f(mesh, batch):
    piece = batch.chunk(2, dim=0)[mesh["tp"].get_local_rank()]
    m = distribute_module(Scale(), mesh{extra})
    return piece * m.weight.to_local(), m(torch.randn(4, 8))
"""


def test_distribute_module_replicates_every_parameter_unless_a_function_lays_them_out(registry):
    # by default every parameter is a Replicate DTensor: its to_local() is I (mixed with a rank's piece:
    # SPMD102) and forward given a local tensor mixes it with a DTensor (SPMD112); a partition_fn or an
    # input_fn does what the checker does not follow: the parameters are forgotten, silent
    assert _codes(DISTRIBUTED_MODULE.format(extra=""), registry) == [(12, "SPMD112"), (18, "SPMD102")]
    assert _codes(DISTRIBUTED_MODULE.format(extra=", partition_fn"), registry) == []
    assert _codes(DISTRIBUTED_MODULE.format(extra=", input_fn=to_dtensor"), registry) == []
