"""spmdcheck models of vLLM's tensor-parallel linear layers (`vllm.model_executor.layers.linear`).

`RowParallelLinear(reduce_results=False)` returns the per-rank partial product: a pending sum the
caller must reduce (vLLM fuses it into a later all-reduce). Keywords the checker cannot read make
the output unknown (and silent).
"""

import torch
import torch.nn.functional as F

import spmd_types as spmd
from spmdcheck.annotations import Local, is_known, model, unknown
from vllm.distributed import tensor_model_parallel_all_gather, tensor_model_parallel_all_reduce


@model
class ColumnParallelLinear(torch.nn.Module):
    weight: Local["tp: S(0)"]

    def __init__(
        self,
        input_size,
        output_size,
        bias=True,
        gather_output=False,
        skip_bias_add=False,
        params_dtype=None,
        quant_config=None,
        output_sizes=None,
        prefix="",
        *,
        return_bias=True,
        disable_tp=False,
    ):
        self.gather_output = gather_output
        self.return_bias = return_bias
        self.disable_tp = disable_tp

    def forward(self, input_):
        if not (is_known(self.gather_output) and is_known(self.return_bias)) or self.disable_tp:
            return unknown()
        output_parallel = F.linear(input_, self.weight)
        output = tensor_model_parallel_all_gather(output_parallel) if self.gather_output else output_parallel
        if self.return_bias:
            return output, None
        return output


@model
class RowParallelLinear(torch.nn.Module):
    weight: Local["tp: S(1)"]

    def __init__(
        self,
        input_size,
        output_size,
        bias=True,
        input_is_parallel=True,
        skip_bias_add=False,
        params_dtype=None,
        reduce_results=True,
        quant_config=None,
        prefix="",
        *,
        return_bias=True,
        disable_tp=False,
    ):
        self.input_is_parallel = input_is_parallel
        self.reduce_results = reduce_results
        self.return_bias = return_bias
        self.disable_tp = disable_tp

    def forward(self, input_):
        known = is_known(self.input_is_parallel) and is_known(self.reduce_results) and is_known(self.return_bias)
        if not known or self.disable_tp or not self.input_is_parallel:
            return unknown()
        output_parallel = F.linear(input_, self.weight)
        output = tensor_model_parallel_all_reduce(output_parallel) if self.reduce_results else output_parallel
        if self.return_bias:
            return output, None
        return output
