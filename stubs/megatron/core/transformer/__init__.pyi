"""spmdcheck rules for `megatron.core.transformer` (re-exports)."""

from .transformer_config import TransformerConfig as TransformerConfig
