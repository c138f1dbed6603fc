"""Test-only `megatron.core.transformer`: a `TransformerConfig` holding what it is given."""
from __future__ import annotations


class TransformerConfig:
    def __init__(self, sequence_parallel: bool = False, **fields) -> None:  # noqa: ANN003
        self.sequence_parallel = sequence_parallel
        self.__dict__.update(fields)
