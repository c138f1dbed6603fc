"""spmdcheck rules for `megatron.core.tensor_parallel.mappings` (never imported).

Each function is typed as the spmd_types call of type_system.md section 6
on the tensor-parallel axis `tp` (or on the axis of `group=` when passed).

The two plain "tensor_model_parallel_region" scatter/gather functions follow
Megatron's ACTUAL autograd pairs, not the spmd_types guide's reading:

* `scatter_to_tensor_model_parallel_region`: forward split of the last dim,
  backward all-gather (no reduction) -> `convert(x, tp, src=I, dst=S(-1))`
  (the guide's `reduce_scatter(dst=S(-1))` would need a reduction forward);
* `gather_from_tensor_model_parallel_region`: forward all-gather of the last
  dim, backward split (no reduction) -> `all_gather(x, tp, src=S(-1), dst=I)`
  (the guide's `dst=R` would need a reduce-scatter backward).
"""

from torch import Tensor
from torch.distributed import ProcessGroup

from spmdcheck.annotations import maps_to

# forward identity, backward all-reduce
@maps_to("convert", axis="tp", src="I", dst="R")
def copy_to_tensor_model_parallel_region(input_: Tensor, group: ProcessGroup | None = None) -> Tensor: ...

# forward all-reduce, backward identity
@maps_to("all_reduce", axis="tp", src="P", dst="I")
def reduce_from_tensor_model_parallel_region(input_: Tensor, group: ProcessGroup | None = None) -> Tensor: ...

# forward split (last dim), backward all-gather: Megatron's actual pair (see above)
@maps_to("convert", axis="tp", src="I", dst="S(-1)")
def scatter_to_tensor_model_parallel_region(input_: Tensor, group: ProcessGroup | None = None) -> Tensor: ...

# forward all-gather (last dim), backward split: Megatron's actual pair (see above)
@maps_to("all_gather", axis="tp", src="S(-1)", dst="I")
def gather_from_tensor_model_parallel_region(input_: Tensor, group: ProcessGroup | None = None) -> Tensor: ...

# forward split (first dim), backward all-gather
@maps_to("convert", axis="tp", src="I", dst="S(0)")
def scatter_to_sequence_parallel_region(input_: Tensor, group: ProcessGroup | None = None) -> Tensor: ...

# forward all-gather (first dim); backward reduce-scatter (default) or split
# (tensor_parallel_output_grad=False)
@maps_to("all_gather", axis="tp", src="S(0)", dst="R")
@maps_to("all_gather", axis="tp", src="S(0)", dst="I", when={"tensor_parallel_output_grad": False})
def gather_from_sequence_parallel_region(
    input_: Tensor,
    tensor_parallel_output_grad: bool = True,
    group: ProcessGroup | None = None,
    output_split_sizes: list[int] | None = None,
    use_global_buffer: bool = False,
) -> Tensor: ...

# forward reduce-scatter (first dim), backward all-gather
@maps_to("reduce_scatter", axis="tp", src="P", dst="S(0)")
def reduce_scatter_to_sequence_parallel_region(
    input_: Tensor,
    group: ProcessGroup | None = None,
    input_split_sizes: list[int] | None = None,
    use_global_buffer: bool = False,
) -> Tensor: ...

# forward all-gather (last dim), backward reduce-scatter
@maps_to("all_gather", axis="tp", src="S(-1)", dst="R")
def all_gather_last_dim_from_tensor_parallel_region(input_: Tensor, group: ProcessGroup | None = None) -> Tensor: ...

# forward reduce-scatter (last dim), backward all-gather
@maps_to("reduce_scatter", axis="tp", src="P", dst="S(-1)")
def reduce_scatter_last_dim_to_tensor_parallel_region(input_: Tensor, group: ProcessGroup | None = None) -> Tensor: ...

# all-to-all both ways; the group is required (first positional argument)
@maps_to("all_to_all", axis=None, src="V", dst="V")
def all_to_all(
    group: ProcessGroup,
    input_: Tensor,
    output_split_sizes_: list[int] | None = None,
    input_split_sizes: list[int] | None = None,
) -> Tensor: ...

# [tokens/TP, H] -> [tokens, H/TP] on the tp group (input flattened to 2-D first)
@maps_to("all_to_all", axis="tp", src="S(0)", dst="S(-1)")
def all_to_all_sp2hp(input_: Tensor, group: ProcessGroup | None = None) -> Tensor: ...

# [tokens, H/TP] -> [tokens/TP, H]
@maps_to("all_to_all", axis="tp", src="S(-1)", dst="S(0)")
def all_to_all_hp2sp(input_: Tensor, group: ProcessGroup | None = None) -> Tensor: ...
