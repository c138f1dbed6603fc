"""Micro-batch loops of the gradient walk (analysis/gradients/loops.py): `for i in range(n)`, loops over
`x.chunk(n)`, lists of micro-batches and data loaders over a `DistributedSampler` (gradients/data.py), whatever
`n` is; a sync inside the loop on every micro-batch is synced
early (SPMD604), a sync missing after it SPMD601; one under a last-iteration test or after the loop is clean."""

from __future__ import annotations

import pytest

from spmdcheck.analysis.gradients.loops import Count, LoopIndex, compare
from spmdcheck.api import Settings, check_source

HEADER = """
from contextlib import contextmanager, nullcontext

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, TensorDataset


def shard(t):
    return t.chunk(dist.get_world_size())[dist.get_rank()]


def sync(model, op=dist.ReduceOp.SUM):
    for param in model.parameters():
        dist.all_reduce(param.grad, op=op)

"""

# each loop header with the statement of its body that runs one micro-batch; `last` is its last-iteration test
LOOPS = {
    "range-from-zero": (
        "xs, ys = shard(inputs).chunk(n), shard(targets).chunk(n)\n"
        "for i in range(0, n):\n"
        "    F.mse_loss(model(xs[i]), ys[i]).backward()",
        "i == n - 1",
    ),
    "range-unknown": (
        "xs, ys = shard(inputs).chunk(n), shard(targets).chunk(n)\n"
        "for i in range(n):\n"
        "    F.mse_loss(model(xs[i]), ys[i]).backward()",
        "i == n - 1",
    ),
    "range-constant": (
        "xs, ys = shard(inputs).chunk(4), shard(targets).chunk(4)\n"
        "for i in range(4):\n"
        "    F.mse_loss(model(xs[i]), ys[i]).backward()",
        "i == 3",
    ),
    "zip-of-chunks": (
        "for x, y in zip(shard(inputs).chunk(n), shard(targets).chunk(n)):\n    F.mse_loss(model(x), y).backward()",
        None,
    ),
    "list-of-batches": (
        "batches = list(zip(shard(inputs).chunk(n), shard(targets).chunk(n)))\n"
        "for i, (x, y) in enumerate(batches):\n"
        "    F.mse_loss(model(x), y).backward()",
        "i + 1 == len(batches)",
    ),
    "loader": (
        "dataset = TensorDataset(inputs, targets)\n"
        "loader = DataLoader(dataset, batch_size=4, sampler=DistributedSampler(dataset))\n"
        "for x, y in loader:\n"
        "    F.mse_loss(model(x), y).backward()",
        None,
    ),
    "enumerate-loader-on-a-group": (
        "dataset = TensorDataset(inputs, targets)\n"
        "sampler = DistributedSampler(dataset, num_replicas=dist.get_world_size(), rank=dist.get_rank())\n"
        "loader = DataLoader(dataset, 4, False, sampler)\n"
        "for i, batch in enumerate(loader):\n"
        "    F.mse_loss(model(batch[0]), batch[1]).backward()",
        "i == len(loader) - 1",
    ),
    "while-index": (
        "xs, ys = shard(inputs).chunk(n), shard(targets).chunk(n)\n"
        "i = 0\n"
        "while i < n:\n"
        "    F.mse_loss(model(xs[i]), ys[i]).backward()\n"
        "    i += 1",
        "i == n",  # read after the increment
    ),
    "while-next": (
        "batches = iter(zip(shard(inputs).chunk(n), shard(targets).chunk(n)))\n"
        "while True:\n"
        "    try:\n"
        "        x, y = next(batches)\n"
        "    except StopIteration:\n"
        "        break\n"
        "    F.mse_loss(model(x), y).backward()",
        None,
    ),
    "loader-of-batches": (
        "dataset = TensorDataset(inputs, targets)\n"
        "batches = BatchSampler(DistributedSampler(dataset), batch_size=4, drop_last=False)\n"
        "for x, y in DataLoader(dataset, batch_sampler=batches):\n"
        "    F.mse_loss(model(x), y).backward()",
        None,
    ),
    "range-of-len": (
        "batches = list(zip(shard(inputs).chunk(n), shard(targets).chunk(n)))\n"
        "for micro in range(len(batches)):\n"
        "    x, y = batches[micro]\n"
        "    F.mse_loss(model(x), y).backward()",
        "micro >= len(batches) - 1",
    ),
}


def _program(loop: str, inside: str = "", after: str = "") -> str:
    lines = [
        "def train(inputs, targets, n):",
        "    model = nn.Linear(8, 4)",
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)",
        *("    " + line for line in loop.splitlines()),
        *("        " + line for line in inside.splitlines()),
        *("    " + line for line in after.splitlines()),
        "    optimizer.step()",
    ]
    return HEADER + "\n".join(lines) + "\n"


def _found(source: str) -> list[tuple[str, str]]:
    """(code, the text of the line it is reported at)."""
    lines = source.splitlines()
    diags = check_source(source, "<loops>", Settings(mesh=("dp",)))
    return sorted((d.code, lines[d.line - 1].strip()) for d in diags)


STEP = "optimizer.step()"
REDUCE = "dist.all_reduce(param.grad, op=op)"


@pytest.mark.parametrize("name", sorted(LOOPS))
@pytest.mark.parametrize(
    "inside,after,expected",
    [
        ("", "sync(model)", []),  # synced once, after the last micro-batch
        ("", "", [("SPMD601", STEP)]),  # never synced
        ("sync(model)", "", [("SPMD604", REDUCE)]),  # synced on every micro-batch: the synced part summed again
        ("sync(model, dist.ReduceOp.AVG)", "", []),  # an average of averages stays right
        ("if LAST:\n    sync(model)", "", []),  # synced on the last micro-batch only
        # synced on every micro-batch but the last: summed again, and the last one's gradients never synced
        ("if not (LAST):\n    sync(model)", "", [("SPMD601", STEP), ("SPMD604", REDUCE)]),
    ],
    ids=["after", "never", "every", "every-average", "last", "all-but-last"],
)
def test_a_sync_placed_around_a_micro_batch_loop(name, inside, after, expected):
    loop, last = LOOPS[name]
    if "LAST" in inside and last is None:
        pytest.skip("this loop has no index")
    source = _program(loop, inside.replace("LAST", last or ""), after)
    assert _found(source) == expected


HOOKED = (
    HEADER
    + """
class DataParallel(nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module
        self.sync = True
        for param in module.parameters():
            param.register_post_accumulate_grad_hook(self._sync_grad)

    def _sync_grad(self, param):
        if self.sync:
            dist.all_reduce(param.grad)

    @contextmanager
    def no_sync(self):
        self.sync = False
        yield
        self.sync = True

    def forward(self, x):
        return self.module(x)


def train(inputs, targets, num_microbatches):
    model = DataParallel(nn.Linear(8, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    xs, ys = shard(inputs).chunk(num_microbatches), shard(targets).chunk(num_microbatches)
    for micro in range(num_microbatches):
        with model.no_sync() if {condition} else nullcontext():
            F.mse_loss(model(xs[micro]), ys[micro]).backward()
    optimizer.step()
"""
)


@pytest.mark.parametrize(
    "condition,expected",
    [
        ("micro < num_microbatches - 1", []),
        ("num_microbatches - 1 > micro", []),  # the same test, sides swapped
        ("micro + 1 != num_microbatches", []),
        ("micro == 0", [("SPMD604", "F.mse_loss(model(xs[micro]), ys[micro]).backward()")]),
        ("False", [("SPMD604", "F.mse_loss(model(xs[micro]), ys[micro]).backward()")]),
        ("True", [("SPMD604", STEP)]),  # the last backward() inside no_sync() too: never synced
    ],
)
def test_no_sync_in_a_loop_over_an_unknown_number_of_micro_batches(condition, expected):
    assert _found(HOOKED.format(condition=condition)) == expected


@pytest.mark.parametrize("zero_grad", ["optimizer.zero_grad()", "zero_all(optimizer)"], ids=["known", "not-followed"])
def test_a_training_loop_that_steps_in_each_iteration_is_not_a_micro_batch_loop(zero_grad):
    source = HEADER + (
        "def train(inputs, targets, n):\n"
        "    model = nn.Linear(8, 4)\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    for i in range(n):\n"
        f"        {zero_grad}\n"
        "        F.mse_loss(model(shard(inputs)), shard(targets)).backward()\n"
        "        sync(model)\n"
        "        optimizer.step()\n"
    )
    assert _found(source) == []


@pytest.mark.parametrize(
    "sync,expected", [("sync(model)", []), ("", [("SPMD601", STEP)])], ids=["synced", "never-synced"]
)
def test_a_training_loop_over_a_distributed_loader_sees_each_ranks_batch(sync, expected):
    """A loop stepping the optimizer on every batch is walked once: its batch is still this rank's share."""
    source = HEADER + (
        "def train(dataset, epochs):\n"
        "    model = nn.Linear(8, 4)\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    loader = DataLoader(dataset, batch_size=4, sampler=DistributedSampler(dataset, shuffle=True))\n"
        "    for epoch in range(epochs):\n"
        "        for x, y in loader:\n"
        "            optimizer.zero_grad()\n"
        "            F.mse_loss(model(x), y).backward()\n"
        f"            {sync}\n"
        "            optimizer.step()\n"
    )
    assert _found(source) == expected


@pytest.mark.parametrize(
    "loader",
    [
        "DataLoader(dataset, batch_size=4)",  # every rank reads the whole dataset: no share to sync
        "DataLoader(dataset, sampler=DistributedSampler(dataset, rank=my_rank))",  # a rank the walk cannot place
        "DataLoader(dataset, sampler=sampler)",  # a sampler it does not know
    ],
)
def test_a_loader_without_a_known_distributed_sampler_is_not_followed(loader):
    source = HEADER + (
        "def train(dataset, sampler, my_rank):\n"
        "    model = nn.Linear(8, 4)\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        f"    for x, y in {loader}:\n"
        "        F.mse_loss(model(x), y).backward()\n"
        "    optimizer.step()\n"
    )
    assert _found(source) == []


def test_a_loop_without_backward_over_an_unknown_count_is_walked_as_before():
    # its body once, joined with not running: a reduction under `i > 0` leaves the gradients unknown
    source = HEADER + (
        "def train(inputs, targets, n):\n"
        "    model = nn.Linear(8, 4)\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    F.mse_loss(model(shard(inputs)), shard(targets)).backward()\n"
        "    for i in range(n):\n"
        "        if i > 0:\n"
        "            sync(model)\n"
        "    optimizer.step()\n"
    )
    assert _found(source) == []


FIRST, MIDDLE, LAST = (LoopIndex(p, "n") for p in ("first", "middle", "last"))


@pytest.mark.parametrize(
    "op,left,right,expected",
    [
        ("Equal", FIRST, 0, True),
        ("Equal", MIDDLE, 0, False),
        ("Equal", LAST, 0, False),
        ("Equal", LAST, Count("n", -1), True),
        ("LessThan", MIDDLE, Count("n", -1), True),
        ("LessThan", LAST, Count("n", -1), False),
        ("Equal", MIDDLE, 1, None),  # the middle stands for 1 ... n - 2
        ("GreaterThan", MIDDLE, 0, True),
        ("Equal", LoopIndex("last", "n", 1), Count("n"), True),  # i + 1 == n
        ("LessThan", Count("n", -1), FIRST, False),  # sides swapped
        ("Equal", FIRST, Count("m", -1), None),  # another loop's count
        ("Equal", LAST, 5, None),  # n is not known
    ],
)
def test_a_loop_index_compares_where_its_position_decides(op, left, right, expected):
    assert compare(op, left, right) is expected
