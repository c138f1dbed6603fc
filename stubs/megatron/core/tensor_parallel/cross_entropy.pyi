"""spmdcheck model of `megatron.core.tensor_parallel.cross_entropy`."""

import spmd_types as spmd
from spmdcheck.annotations import model


@model
def vocab_parallel_cross_entropy(vocab_parallel_logits, target, label_smoothing=0.0):
    """Logits split on the vocabulary (last) dim on tp; the per-token loss it returns is the same on every
    tp rank (max, sum of exponentials and the target logit are all-reduced inside)."""
    spmd.assert_type(vocab_parallel_logits, {"tp": spmd.S(-1)})
    summed = spmd.reinterpret(vocab_parallel_logits.sum(dim=-1), "tp", src=spmd.V, dst=spmd.P)
    return spmd.all_reduce(summed, "tp", src=spmd.P, dst=spmd.R)
