"""spmdcheck: a static SPMD type checker for rank-local PyTorch code."""

__version__ = "0.1.0"
