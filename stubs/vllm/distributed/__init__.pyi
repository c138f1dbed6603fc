"""spmdcheck models of `vllm.distributed`'s tensor-parallel collectives."""

import spmd_types as spmd
from spmdcheck.annotations import model


@model
def tensor_model_parallel_all_reduce(input_):
    """Sums the per-rank partial results of a row-parallel product over tp."""
    return spmd.all_reduce(input_, "tp", src=spmd.P, dst=spmd.R)


@model
def tensor_model_parallel_all_gather(input_, dim=-1):
    return spmd.all_gather(input_, "tp", src=spmd.S(dim), dst=spmd.R)
