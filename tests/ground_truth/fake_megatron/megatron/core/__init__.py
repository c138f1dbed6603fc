"""Test-only fake of `megatron.core`."""
from . import parallel_state, tensor_parallel

mpu = parallel_state

__all__ = ["parallel_state", "tensor_parallel", "mpu"]
