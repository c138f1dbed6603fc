"""spmdcheck rules for `sglang.srt.layers.linear`: vLLM's layers (sglang keeps their keywords)."""

from vllm.model_executor.layers.linear import ColumnParallelLinear as ColumnParallelLinear
from vllm.model_executor.layers.linear import RowParallelLinear as RowParallelLinear
