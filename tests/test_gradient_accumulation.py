"""Gradient accumulation and global-norm clipping in the gradient walk (analysis/gradients/accumulation.py,
norms.py): SPMD604 where the sync runs relative to the micro-batches, SPMD605 where the squared norm is summed;
silent wherever the walk cannot tell (an averaging sync, a hook per micro-batch, an unknown group or op)."""

from __future__ import annotations

import pytest

from spmdcheck.api import Settings, check_source

WRAPPER = """
from contextlib import contextmanager, nullcontext

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


class DataParallel(nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module
        self.sync = True
        for param in module.parameters():
            param.{register}(self._sync_grad)

    def _sync_grad(self, param):
        if self.sync:
            {sync}

    @contextmanager
    def no_sync(self):
        self.sync = False
        yield
        self.sync = True

    def forward(self, x):
        return self.module(x)


def train(inputs, targets):
    model = DataParallel(nn.Linear(8, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs = inputs.chunk(dist.get_world_size())[dist.get_rank()]
    targets = targets.chunk(dist.get_world_size())[dist.get_rank()]
    for i, (x, y) in enumerate(zip(inputs.chunk(3), targets.chunk(3))):
        with model.no_sync() if {condition} else nullcontext():
            F.mse_loss(model(x), y).backward()
    optimizer.step()
"""

SUM = "dist.all_reduce(param.grad)"
AVERAGE = "dist.all_reduce(param.grad, op=dist.ReduceOp.AVG)"
POST = "register_post_accumulate_grad_hook"


def _codes(source: str, mesh: tuple[str, ...]) -> list[tuple[int, str]]:
    return [(d.line, d.code) for d in check_source(source, "<accumulation>", Settings(mesh=mesh))]


def _line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


@pytest.mark.parametrize(
    "register,sync,condition,expected",
    [
        (POST, SUM, "i < 2", None),  # no_sync() for all micro-batches but the last
        (POST, SUM, "i == 0", "backward"),  # the second backward() syncs, the third adds and syncs again
        (POST, SUM, "i < 3", "step"),  # the last backward() inside no_sync(): never synced
        (POST, SUM, "False", "backward"),  # every backward() syncs the sum of all before it
        (POST, AVERAGE, "i == 0", None),  # an average synced early and averaged again stays right
        ("register_hook", SUM, "False", None),  # each micro-batch's own gradient synced before it is added
    ],
)
def test_micro_batches_under_a_hooked_wrapper(register, sync, condition, expected):
    hook = sync if register == POST else sync.replace("param.grad", "param")
    source = WRAPPER.format(register=register, sync=hook, condition=condition)
    found = _codes(source, ("dp",))
    if expected is None:
        assert found == []
    else:
        where = "backward()" if expected == "backward" else "optimizer.step()"
        assert found == [(_line_of(source, where), "SPMD604")]


MODULE_HOOK = """
from contextlib import contextmanager, nullcontext

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


class DataParallel(nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module
        self.sync = True
        module.register_full_backward_hook(self._sync_grads)

    def _sync_grads(self, module, grad_input, grad_output):
        if self.sync:
            for param in module.parameters():
                dist.all_reduce(param.grad)

    @contextmanager
    def no_sync(self):
        previous, self.sync = self.sync, False
        try:
            yield
        finally:
            self.sync = previous

    def forward(self, x):
        return self.module(x)


def train(inputs, targets):
    model = DataParallel(nn.Linear(8, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs = inputs.chunk(dist.get_world_size())[dist.get_rank()]
    targets = targets.chunk(dist.get_world_size())[dist.get_rank()]
    for i, (x, y) in enumerate(zip(inputs.chunk(3), targets.chunk(3))):
        with model.no_sync() if {condition} else nullcontext():
            F.mse_loss(model(x), y).backward()
    optimizer.step()
"""


@pytest.mark.parametrize("condition,expected", [("i < 2", None), ("i < 3", "step"), ("i == 0", "backward")])
def test_micro_batches_under_a_module_backward_hook(condition, expected):
    source = MODULE_HOOK.format(condition=condition)
    found = _codes(source, ("dp",))
    if expected is None:
        assert found == []
    else:
        where = "backward()" if expected == "backward" else "optimizer.step()"
        assert found == [(_line_of(source, where), "SPMD604")]


DDP = """
from contextlib import nullcontext

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

MICRO = 4


def train(inputs, targets):
    model = DistributedDataParallel(nn.Linear(8, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs = inputs.chunk(dist.get_world_size())[dist.get_rank()]
    targets = targets.chunk(dist.get_world_size())[dist.get_rank()]
    for i, (x, y) in enumerate(zip(inputs.chunk(MICRO), targets.chunk(MICRO))):
        with model.no_sync() if i < {last} else nullcontext():
            F.mse_loss(model(x), y).backward()
    optimizer.step()
"""


@pytest.mark.parametrize("last,reported", [("MICRO - 1", False), ("MICRO", True)])
def test_distributed_data_parallel_no_sync(last, reported):
    source = DDP.format(last=last)
    found = _codes(source, ("dp",))
    assert found == ([(_line_of(source, "optimizer.step()"), "SPMD604")] if reported else [])


CLIP = """
import torch
import torch.distributed as dist
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(16, 8).chunk(dist.get_world_size())[dist.get_rank()])
        self.weight.tensor_model_parallel = True
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(x) @ self.weight.t()


def clip(parameters, group):
    total = torch.zeros(())
    for p in parameters:
        if {counted}:
            total += p.grad.norm() ** 2
    {reduction}
    return total.sqrt()


def train_step(batch, group):
    model = Block()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(batch).sum().backward()
    clip(model.parameters(), group)
    optimizer.step()
"""

ONE_RANK = 'getattr(p, "tensor_model_parallel", False) or dist.get_rank() == 0'


@pytest.mark.parametrize(
    "counted,reduction,reported",
    [
        (ONE_RANK, "dist.all_reduce(total)", False),
        ("True", "dist.all_reduce(total)", True),  # the LayerNorm counted on every tp rank
        (ONE_RANK, "pass", False),  # never reduced: maybe a per-rank norm for logging, not reported
        ("True", "dist.all_reduce(total, op=dist.ReduceOp.MAX)", False),  # not a sum (an inf-norm)
        ("True", "dist.all_reduce(total, group=group)", False),  # a group the walk cannot place
        ("p.grad is not None and (" + ONE_RANK + ")", "dist.all_reduce(total)", False),
        ("p.requires_grad", "dist.all_reduce(total)", True),
    ],
)
def test_squared_norm_reduction(counted, reduction, reported):
    source = CLIP.format(counted=counted, reduction=reduction)
    found = _codes(source, ("tp",))
    assert found == ([(_line_of(source, reduction), "SPMD605")] if reported else [])


FOREACH = """
import torch
import torch.distributed as dist
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(16, 8).chunk(dist.get_world_size())[dist.get_rank()])
        self.weight.tensor_model_parallel = True
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(x) @ self.weight.t()


def clip(parameters):
    grads = []
    for p in parameters:
        if {counted}:
            grads.append(p.grad)
    {total}
    {reduction}
    return total.sqrt()


def train_step(batch):
    model = Block()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(batch).sum().backward()
    clip(model.parameters())
    optimizer.step()
"""

TOTALS = {
    "foreach": "total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0) ** 2",
    "foreach-each": (
        "norms = torch._foreach_norm(grads)\n"
        "    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(n) for n in norms])) ** 2"
    ),
    "get_total_norm": "total = torch.nn.utils.get_total_norm(grads, 2.0, foreach=True) ** 2.0",
    "p-norm": "total = torch.nn.utils.get_total_norm(grads, norm_type=3) ** 3",
}


@pytest.mark.parametrize("total", sorted(TOTALS))
@pytest.mark.parametrize(
    "counted,reduction,reported",
    [
        (ONE_RANK, "dist.all_reduce(total)", False),
        ("True", "dist.all_reduce(total)", True),  # the LayerNorm counted on every tp rank
        (ONE_RANK, "pass", False),  # never reduced: maybe a per-rank norm for logging, not reported
        ("True", "dist.all_reduce(total, op=dist.ReduceOp.MAX)", False),  # not a sum
    ],
)
def test_squared_norm_of_foreach_and_total_norms(total, counted, reduction, reported):
    source = FOREACH.format(counted=counted, total=TOTALS[total], reduction=reduction)
    found = _codes(source, ("tp",))
    assert found == ([(_line_of(source, reduction), "SPMD605")] if reported else [])


def test_a_norm_squared_to_another_power_than_its_order_is_not_followed():
    total = "total = torch.nn.utils.get_total_norm(grads, 3.0) ** 2"
    source = FOREACH.format(counted="True", total=total, reduction="dist.all_reduce(total)")
    assert _codes(source, ("tp",)) == []


CLIP_GRAD_NORM = """
import torch
import torch.distributed as dist
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(16, 8).chunk(dist.get_world_size())[dist.get_rank()])
        self.weight.tensor_model_parallel = {sharded}
        self.norm = nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(x) @ self.weight.t()


def train_step(batch):
    model = Block()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(batch).sum().backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
    optimizer.step()
"""


@pytest.mark.parametrize("sharded,reported", [("True", True), ("False", False)])
def test_clip_grad_norm_takes_the_norm_of_this_ranks_shards(sharded, reported):
    source = CLIP_GRAD_NORM.format(sharded=sharded)
    found = _codes(source, ("tp",))
    assert found == ([(_line_of(source, "clip_grad_norm_"), "SPMD605")] if reported else [])
