"""spmdcheck models of Megatron's tensor-parallel layers (`megatron.core.tensor_parallel.layers`).

Each class is a @model: spmdcheck interprets these bodies like checked code, so the layer's
forward runs exactly the collectives Megatron's does, for the keywords the layer was built with
(`gather_output`, `input_is_parallel`, `sequence_parallel` or `config.sequence_parallel`,
`skip_bias_add`). Where a keyword is not a literal the checker can read, the layer's output is
unknown (and silent). Weights are typed by class-level annotations.
"""

import torch
import torch.nn.functional as F

import spmd_types as spmd
from megatron.core.tensor_parallel.mappings import (
    copy_to_tensor_model_parallel_region,
    gather_from_sequence_parallel_region,
    gather_from_tensor_model_parallel_region,
    reduce_from_tensor_model_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
    scatter_to_tensor_model_parallel_region,
)
from spmdcheck.annotations import Local, is_known, model, unknown


def _sequence_parallel(sequence_parallel, config):  # the keyword wins over the config's field
    if sequence_parallel is None:
        if config is None:
            return False
        return config.sequence_parallel
    return sequence_parallel


@model
class ColumnParallelLinear(torch.nn.Module):
    """Y = X A with A split by columns: the weight is S(0) on tp, the output S(-1) unless gathered."""

    weight: Local["tp: S(0)"]

    def __init__(
        self,
        input_size,
        output_size,
        *,
        config=None,
        init_method=None,
        bias=True,
        gather_output=False,
        stride=1,
        keep_master_weight_for_test=False,
        skip_bias_add=False,
        skip_weight_param_allocation=False,
        embedding_activation_buffer=None,
        grad_output_buffer=None,
        is_expert=False,
        tp_comm_buffer_name=None,
        disable_grad_reduce=False,
        tp_group=None,
        sequence_parallel=None,
    ):
        self.gather_output = gather_output
        self.skip_bias_add = skip_bias_add
        self.has_bias = bias
        self.sequence_parallel = _sequence_parallel(sequence_parallel, config)

    def forward(self, input_, weight=None, runtime_gather_output=None):
        if not (is_known(self.sequence_parallel) and is_known(self.gather_output) and is_known(self.has_bias)):
            return unknown(), unknown()
        if weight is None:
            weight = self.weight
        if self.sequence_parallel:
            input_parallel = gather_from_sequence_parallel_region(input_)
        else:
            input_parallel = copy_to_tensor_model_parallel_region(input_)
        if self.has_bias and not self.skip_bias_add:
            bias = spmd.assert_type(unknown(), {"tp": spmd.S(0)})
            output_parallel = F.linear(input_parallel, weight, bias)
        else:
            output_parallel = F.linear(input_parallel, weight)
        gather = self.gather_output if runtime_gather_output is None else runtime_gather_output
        if gather:
            output = gather_from_tensor_model_parallel_region(output_parallel)
        else:
            output = output_parallel
        if self.has_bias and self.skip_bias_add:
            return output, spmd.assert_type(unknown(), {"tp": spmd.S(0)})
        return output, None


@model
class RowParallelLinear(torch.nn.Module):
    """Y = X A with A split by rows: the weight is S(1) on tp, the local product a pending sum."""

    weight: Local["tp: S(1)"]

    def __init__(
        self,
        input_size,
        output_size,
        *,
        config=None,
        init_method=None,
        bias=True,
        input_is_parallel=False,
        skip_bias_add=False,
        stride=1,
        keep_master_weight_for_test=False,
        is_expert=False,
        tp_comm_buffer_name=None,
        tp_group=None,
        sequence_parallel=None,
    ):
        self.input_is_parallel = input_is_parallel
        self.skip_bias_add = skip_bias_add
        self.has_bias = bias
        self.sequence_parallel = _sequence_parallel(sequence_parallel, config)

    def forward(self, input_):
        if not (is_known(self.sequence_parallel) and is_known(self.input_is_parallel) and is_known(self.has_bias)):
            return unknown(), unknown()
        if self.input_is_parallel:
            input_parallel = input_
        else:
            input_parallel = scatter_to_tensor_model_parallel_region(input_)
        output_parallel = F.linear(input_parallel, self.weight)
        if self.sequence_parallel:
            output_ = reduce_scatter_to_sequence_parallel_region(output_parallel)
        else:
            output_ = reduce_from_tensor_model_parallel_region(output_parallel)
        if not self.has_bias:
            return output_, None
        bias = spmd.assert_type(unknown(), {"tp": spmd.R})
        if self.skip_bias_add:
            return output_, bias
        return output_ + bias, None


@model
class VocabParallelEmbedding(torch.nn.Module):
    """An embedding table split by vocabulary rows: each rank looks up its rows, the results are summed."""

    weight: Local["tp: S(0)"]

    def __init__(self, num_embeddings, embedding_dim, *, init_method=None, reduce_scatter_embeddings=False, config=None):
        self.reduce_scatter_embeddings = reduce_scatter_embeddings

    def forward(self, input_):
        if not is_known(self.reduce_scatter_embeddings):
            return unknown()
        # the rows of other ranks' vocabulary are zero here: a per-rank summand of the embedding
        output_parallel = spmd.reinterpret(F.embedding(input_, self.weight), "tp", src=spmd.V, dst=spmd.P)
        if self.reduce_scatter_embeddings:
            return reduce_scatter_to_sequence_parallel_region(output_parallel.transpose(0, 1))
        return reduce_from_tensor_model_parallel_region(output_parallel)
