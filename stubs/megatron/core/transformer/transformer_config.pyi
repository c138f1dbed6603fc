"""spmdcheck model of Megatron's TransformerConfig: only the fields that choose collectives."""

from spmdcheck.annotations import model


@model
class TransformerConfig:
    def __init__(self, *args, sequence_parallel=False, tensor_model_parallel_size=1, **kwargs):
        self.sequence_parallel = sequence_parallel
        self.tensor_model_parallel_size = tensor_model_parallel_size
