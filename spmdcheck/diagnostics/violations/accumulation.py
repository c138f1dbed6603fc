"""6xx: gradient accumulation over micro-batches (SPMD604): where the gradient synchronisation runs
relative to the last backward() before the optimizer step."""

from __future__ import annotations

from typing import Literal

from spmdcheck.diagnostics.violation import Violation, on_axis, site


def _parameters(names: tuple[str, ...]) -> str:
    """`w1`, `b1` and 1 more: the parameters a finding is about, a few by name."""
    shown = ", ".join(f"`{n}`" for n in names[:3])
    more = len(names) - 3
    return f"{shown} and {more} more" if more > 0 else shown


class AccumulationSyncMisplaced(Violation):
    """With gradient accumulation, the hook registered at `hook_site` (or the DistributedDataParallel wrapper
    made there, `by_ddp`) sums the gradients of `params` over `axis` at the wrong backward().

    when: `early` - a backward() before the last one of the micro-batch loop syncs them (reported at that
    backward), and later backward() calls add to the synced gradients; `never` - every backward() ran
    with the hook switched off by `no_sync()` (entered at `context_site`), reported at the optimizer step.
    """

    code = "SPMD604"
    when: Literal["early", "never"]
    axis: str | None
    params: tuple[str, ...]
    hook_site: int
    context_site: int | None = None
    by_ddp: bool = False  # the sync is DistributedDataParallel's (made at `hook_site`), not a hook's
    # the sync is a reduction the step calls itself (this `api`, the first at `hook_site`), not a hook's
    api: str | None = None
    repeated: bool = False  # that first sum is this one, run on an earlier micro-batch

    @property
    def message(self) -> str:
        grads = f"the gradients of {_parameters(self.params)}"
        if self.when == "early" and self.api is not None:
            first = "its first run" if self.repeated else f"the sum at {site(self.hook_site)}"
            return (
                f"this `{self.api}` sums {grads} {on_axis(self.axis)}again: {first} synced them before the last "
                f"micro-batch and a later backward() added local gradients to the synced ones, so the synced part "
                f"is summed once more; sync once, after the last micro-batch's backward()"
            )
        if self.when == "early":
            return (
                f"this backward() syncs {grads} {on_axis(self.axis)}(the hook registered at "
                f"{site(self.hook_site)}) before the last micro-batch: the next backward() adds local gradients to "
                f"the synced ones and the next sync sums the synced part again; run every backward() but the last "
                f"inside `no_sync()`"
            )
        where = f" (entered at {site(self.context_site)})" if self.context_site is not None else ""
        syncer = (
            f"the DistributedDataParallel wrapper made at {site(self.hook_site)}"
            if self.by_ddp
            else f"the hook registered at {site(self.hook_site)}"
        )
        return (
            f"the optimizer steps with {grads} never synced {on_axis(self.axis).rstrip()}: the last backward() ran "
            f"inside `no_sync()`{where}, so {syncer} never summed them and each rank steps with its own; run "
            f"the last micro-batch's backward() outside `no_sync()`"
        )

    @property
    def fix_title(self) -> str:
        if self.api is not None:
            return "sync the gradients once, after the last micro-batch's backward()"
        return "run only the last micro-batch's backward() outside no_sync()"
