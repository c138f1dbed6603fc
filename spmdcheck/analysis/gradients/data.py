"""Data loading in the gradient walk: a `DataLoader` given a `DistributedSampler` yields this rank's batches.

`DistributedSampler(dataset, num_replicas, rank)` hands each rank its own share of the dataset, on the axis its
`rank` (else its `num_replicas`) is taken on, the world's by default (`library.world_axis`): a `Sampler`. A
`DataLoader(dataset, ..., sampler=Sampler)` (or `batch_sampler=` a `BatchSampler` over one) is a sequence of an
unknown number of batches (`loops.Count`, named by the loader's code), each split over that axis, as
`x.chunk(world_size)[rank]` is: a loop over it is a micro-batch loop when its body calls `backward()`
(loops.py), and a training loop's body sees such a batch.
A loader without a distributed sampler, or one whose axis the walk cannot place, is not followed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import libcst as cst

from spmdcheck.analysis.gradients import loops
from spmdcheck.analysis.gradients.state import OPAQUE, Data, Rank, WorldSize, argument

if TYPE_CHECKING:
    from spmdcheck.analysis.gradients.walker import Walker

LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
SAMPLERS = frozenset({"torch.utils.data.DistributedSampler", "torch.utils.data.distributed.DistributedSampler"})
BATCH_SAMPLERS = frozenset({"torch.utils.data.BatchSampler", "torch.utils.data.sampler.BatchSampler"})


@dataclass(frozen=True)
class Sampler:
    """A `DistributedSampler`: the mesh axis whose ranks each read their own share of the dataset."""

    axis: str


def distributed_sampler(args: list, kwargs: dict, world_axis: str | None) -> Any:
    """`DistributedSampler(dataset, num_replicas=None, rank=None, ...)`: a `Sampler`, or OPAQUE when its ranks
    are not on one axis the walk knows."""
    axes: set[str] = set()
    for index, name, kind in ((1, "num_replicas", WorldSize), (2, "rank", Rank)):
        value, given = argument(args, kwargs, index, name)
        if not given or value is None:
            continue  # the default: the world's
        if not isinstance(value, kind):
            return OPAQUE
        axes.add(value.axis)
    if not axes and world_axis is not None:
        axes.add(world_axis)
    return Sampler(axes.pop()) if len(axes) == 1 else OPAQUE


def batch_sampler(args: list, kwargs: dict) -> Any:
    """`BatchSampler(sampler, batch_size, drop_last)`: batches of the indices `sampler` gives (its `Sampler`)."""
    sampler, _ = argument(args, kwargs, 0, "sampler")
    return sampler if isinstance(sampler, Sampler) else OPAQUE


def data_loader(walker: Walker, args: list, kwargs: dict, node: cst.Call) -> Any:
    """`DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, ...)` over a `Sampler`: its batches, an
    unknown number of them, each this rank's share on the sampler's axis; OPAQUE for any other loader."""
    sampler, given = argument(args, kwargs, 3, "sampler")
    if not given or sampler is None:
        sampler, _ = argument(args, kwargs, 4, "batch_sampler")
    if not isinstance(sampler, Sampler):
        return OPAQUE
    axes = frozenset({sampler.axis})
    return loops.Counted(loops.Count(f"len({walker.text(node)})"), lambda _: Data(axes))
