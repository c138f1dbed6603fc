# spmdcheck: mesh = ["dp", "tp"]
"""Program-defined decorators (the wrapper runs with the wrapped function as a value: closures, factories,
forwarded *args/**kwargs, methods, staticmethod) and rank dependence carried by sequences and objects
(a rank's stride of a list, its len, __len__/__iter__, generators)."""
import functools

import torch
import torch.distributed as dist

import spmd_types as spmd
from spmd_types import I, P, R, V
from spmdcheck.annotations import Local


def as_partial(fn):
    """A wrapper that changes the argument's type before the call: the wrapped body sees it changed."""

    @functools.wraps(fn)
    def wrapper(x, *args, **kwargs):
        return fn(spmd.reinterpret(x, "dp", src=V, dst=P), *args, **kwargs)

    return wrapper


def on_axis(axis):
    def deco(fn):
        def wrapper(*args, **kwargs):
            return fn(*args, axis=axis, **kwargs)

        return wrapper

    return deco


@as_partial
def reduce_partial(x, axis="dp"):
    return spmd.all_reduce(x, axis, dst=R)


@on_axis("tp")
def reduce_on(x, axis="dp"):
    return spmd.all_reduce(x, axis, src=P, dst=R)


def rank_zero_only(fn):
    def wrapped(*args, **kwargs):
        if dist.get_rank() == 0:
            return fn(*args, **kwargs)
        return None

    return wrapped


class Logger:
    @staticmethod
    @rank_zero_only
    def report(x):
        spmd.all_reduce(x, "dp", src=P, dst=R)  # error: SPMD501 col 9

    @rank_zero_only
    def log(self, x):
        print(x.sum().item())

    @functools.lru_cache(maxsize=None)
    def width(self, n):
        return n * 2


def decorated(x: Local["dp: V, tp: I"], y: Local["dp: I, tp: P"], z: Local["dp: P, tp: I"]):
    a = reduce_partial(x)
    spmd.assert_type(a, {"dp": R, "tp": I})
    b = reduce_on(y)
    spmd.assert_type(b, {"dp": I, "tp": P})  # error: SPMD401 col 5
    Logger.report(z)
    Logger().log(z)
    return a, b


class Shard:
    def __init__(self, n):
        indices = list(range(n))
        self.indices = indices[dist.get_rank() :: dist.get_world_size()]
        even = indices[: len(indices) - len(indices) % dist.get_world_size()]
        self.even = even[dist.get_rank() :: dist.get_world_size()]

    def __len__(self):
        return len(self.indices)

    def __iter__(self):
        for i in self.indices:
            yield i

    def balanced(self):
        yield from self.even


def rank_state(z: Local["dp: P, tp: I"]):
    shard = Shard(10)
    for _ in shard:
        spmd.all_reduce(z, "dp", dst=R)  # error: SPMD501 col 9
    for _ in range(len(shard)):
        spmd.all_reduce(z, "dp", dst=R)  # error: SPMD501 col 9
    for _ in shard.balanced():
        spmd.all_reduce(z, "dp", dst=R)
    if shard.indices:
        spmd.all_reduce(z, "dp", dst=R)  # error: SPMD501 col 9
    return z

# [expected messages] line:column CODE: message
# 58:9 SPMD501: `all_reduce` on axis 'dp' runs only on the ranks where the rank-dependent condition at line 47 is true: the other ranks never join it (or join another collective), and the program hangs
# 73:5 SPMD401: assert_type: on axis 'tp' the value is R but P is declared
# 100:9 SPMD501: `all_reduce` on axis 'dp' is reached only on some ranks of its group: the rank-dependent loop at line 99 lets the other ranks skip it (or run it another number of times), and the program hangs
# 102:9 SPMD501: `all_reduce` on axis 'dp' is reached only on some ranks of its group: the rank-dependent loop at line 101 lets the other ranks skip it (or run it another number of times), and the program hangs
# 106:9 SPMD501: `all_reduce` on axis 'dp' runs only on the ranks where the rank-dependent condition at line 105 is true: the other ranks never join it (or join another collective), and the program hangs
