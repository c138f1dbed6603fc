"""spmdcheck rules for `sglang.srt.distributed`: the same collectives as vLLM's."""

from vllm.distributed import tensor_model_parallel_all_gather as tensor_model_parallel_all_gather
from vllm.distributed import tensor_model_parallel_all_reduce as tensor_model_parallel_all_reduce
