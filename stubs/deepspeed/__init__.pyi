"""spmdcheck rules for `deepspeed` (never imported).

`initialize` builds the engine: the gradient walk follows it as a rule of its own
(spmdcheck/analysis/gradients/deepspeed.py: the engine averages every gradient over
dp in `engine.backward(loss)`); for the type checker it returns untyped values.
"""

from typing import Any

from spmdcheck.annotations import passthrough

from . import comm as comm

@passthrough
def initialize(
    args: Any = None,
    model: Any = None,
    optimizer: Any = None,
    model_parameters: Any = None,
    training_data: Any = None,
    lr_scheduler: Any = None,
    distributed_port: int = 29500,
    mpu: Any = None,
    dist_init_required: bool | None = None,
    collate_fn: Any = None,
    config: Any = None,
    mesh_param: Any = None,
    config_params: Any = None,
) -> tuple[Any, Any, Any, Any]: ...
@passthrough
def init_distributed(
    dist_backend: str | None = None,
    auto_mpi_discovery: bool = True,
    distributed_port: int = 29500,
    verbose: bool = True,
    timeout: Any = None,
    init_method: str | None = None,
    dist_init_required: bool | None = None,
    config: Any = None,
    rank: int = -1,
    world_size: int = -1,
) -> None: ...
