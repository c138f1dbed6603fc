"""spmdcheck rules for `megatron.core` (package re-exports)."""

from . import parallel_state as parallel_state
from . import tensor_parallel as tensor_parallel

# Legacy name of parallel_state.
mpu = parallel_state
