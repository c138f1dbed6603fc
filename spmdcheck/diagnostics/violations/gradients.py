"""6xx: gradient synchronisation checked at the optimizer step (analysis/gradients/)."""

from __future__ import annotations

from spmdcheck.diagnostics.violation import Violation, site

_NAMED = 4  # parameters named in a message; the rest are counted


def _names(params: tuple[str, ...]) -> str:
    shown = ", ".join(f"`{p}`" for p in params[:_NAMED])
    more = len(params) - _NAMED
    return f"{shown} and {more} more" if more > 0 else shown


class MissingGradientReduction(Violation):
    """At the optimizer step the gradients of `params` are still pending sums over `axis`.

    `unmatched_filter`: the attribute the program's reduction loop selects parameters by, which none of
    them carries (None: no such loop, or it selects other parameters); `megatron_mark`: the attribute that
    marks a parameter for that reduction in the program's own spelling (`sequence_parallel`);
    `switched_off_by`: the config field that turned off the library reduction the mark asks for
    (`config.sequence_parallel`: Megatron's `finalize_model_grads` skips the marks while it is False);
    `reducing_call`: the library call that would have reduced them and that their backward bypassed.
    """

    code = "SPMD601"
    params: tuple[str, ...]
    axis: str
    unmatched_filter: str | None = None
    megatron_mark: str | None = None
    switched_off_by: str | None = None
    # the call that reduces them over `axis` and that their backward did not go through (DeepSpeed's engine's)
    reducing_call: str | None = None

    @property
    def message(self) -> str:
        what = "gradient" if len(self.params) == 1 else "gradients"
        one = len(self.params) == 1
        if self.reducing_call:
            why = (
                f"{'it' if one else 'they'} went through a plain backward(), and only `{self.reducing_call}` "
                f"reduces {'it' if one else 'them'}"
            )
        elif self.unmatched_filter:
            why = f"the reduction loop selects parameters by `{self.unmatched_filter}`, which none of them carries"
        elif self.switched_off_by:
            marks = "its mark asks" if one else "their marks ask"
            why = f"the library skips the reduction {marks} for while `{self.switched_off_by}` is False"
        else:
            why = (
                f"no all-reduce over {self.axis!r} reaches {'it' if one else 'them'}, or the reduced "
                f"{'value never gets' if one else 'values never get'} back into `.grad`"
            )
        return (
            f"at the optimizer step the {what} of {_names(self.params)} {'is' if len(self.params) == 1 else 'are'} "
            f"still a per-rank partial sum over axis {self.axis!r}: {why}, so each rank steps with its own share"
        )

    @property
    def fix_title(self) -> str:
        if self.reducing_call:
            return f"backpropagate with `{self.reducing_call}` instead of `loss.backward()`"
        if self.switched_off_by:
            return f"set `{self.switched_off_by.rpartition('.')[2]}=True` in the config the model is built with"
        if self.unmatched_filter and self.megatron_mark:
            return f"select the parameters by `{self.megatron_mark}`, the attribute they carry"
        if self.megatron_mark:
            return f"mark the parameters `{self.megatron_mark}` so the reduction loop sums them over {self.axis!r}"
        return f"all-reduce these gradients over {self.axis!r} after backward() and before the step"


class DoubleGradientReduction(Violation):
    """`api` sums the gradient `operand` over `axis` again: DistributedDataParallel's backward (`by_ddp`) or
    the reduction at site `first` already did."""

    code = "SPMD602"
    api: str
    operand: str
    axis: str
    by_ddp: bool = False
    first: int | None = None
    wrapper: str = "DistributedDataParallel"  # what reduced it in backward (`by_ddp`): DDP or FSDP2's fully_shard

    @property
    def message(self) -> str:
        before = (
            f"{self.wrapper} already averaged it during backward()"
            if self.by_ddp
            else f"the reduction at {site(self.first)} already summed it"
            if self.first is not None
            else "it is already reduced"
        )
        return (
            f"`{self.api}` sums the gradient `{self.operand}` over axis {self.axis!r} again: {before}, so the "
            f"step uses {self.axis!r}-size times the gradient"
        )

    @property
    def fix_title(self) -> str:
        return "remove this reduction" if self.by_ddp else "reduce each gradient once"


class GradientReductionWrongGroup(Violation):
    """`api` reduces the gradient `operand` of parameters marked `mark` (held differently across `axis`)
    over the whole group of `axis` instead of their own subgroup (`subgroup`, when the program names one)."""

    code = "SPMD603"
    api: str
    operand: str
    axis: str
    mark: str
    subgroup: str | None = None

    @property
    def message(self) -> str:
        return (
            f"`{self.api}` reduces the gradient `{self.operand}` over the whole {self.axis!r} group, but its "
            f"parameters are marked `{self.mark}`: different ranks of {self.axis!r} hold different parameters "
            f"(experts), and their gradients get mixed"
        )

    @property
    def fix_title(self) -> str:
        target = f"`{self.subgroup}`" if self.subgroup else "their expert-data-parallel group"
        return f"reduce these gradients over {target}"


class GradientAveragedTwice(Violation):
    """The average over `axis` applied twice: this division, and DistributedDataParallel's average
    (`by_ddp`) or the division at site `first`."""

    code = "SPMD606"
    axis: str
    by_ddp: bool = False
    first: int | None = None
    wrapper: str = "DistributedDataParallel"  # what averages in backward (`by_ddp`): DDP or FSDP2's fully_shard
    at: str = "during backward()"  # when it averages (Megatron's wrapper: at `finish_grad_sync()`)

    @property
    def message(self) -> str:
        other = (
            f"{self.wrapper} also averages the gradients over it {self.at}"
            if self.by_ddp
            else f"the gradient was already divided by it at {site(self.first)}"
            if self.first is not None
            else "the gradient is already averaged"
        )
        return (
            f"this divides by the size of axis {self.axis!r} and {other}: the gradients are averaged twice, "
            f"{self.axis!r}-size times too small"
        )

    @property
    def fix_title(self) -> str:
        return "remove this division" if self.by_ddp else "divide once"
