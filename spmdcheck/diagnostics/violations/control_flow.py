"""5xx: control flow (collectives and computation under rank-dependent conditions)."""

from __future__ import annotations

from typing import Literal

from spmdcheck.diagnostics.violation import Violation, on_axis, site


class CollectiveInRankBranch(Violation):
    """A collective `api` (on `axis`) that only some ranks of its group reach.

    divergence: a rank-dependent `loop` or `early exit` at site `divergence_site` lets ranks skip it, or
    a `branch` whose `arm` (true/false) alone runs it.
    """

    code = "SPMD501"
    api: str
    axis: str | None
    divergence: Literal["loop", "early exit", "branch"]
    divergence_site: int
    arm: bool = True

    @property
    def message(self) -> str:
        start = f"`{self.api}` {on_axis(self.axis)}"
        if self.divergence == "branch":
            return (
                f"{start}runs only on the ranks where the rank-dependent condition at {site(self.divergence_site)} "
                f"is {'true' if self.arm else 'false'}: the other ranks never join it (or join another "
                f"collective), and the program hangs"
            )
        return (
            f"{start}is reached only on some ranks of its group: the rank-dependent {self.divergence} at "
            f"{site(self.divergence_site)} lets the other ranks skip it (or run it another number of times), "
            f"and the program hangs"
        )


class RankSpecificGraph(Violation):
    """`variable` computed differently under the rank-dependent condition (or loop count) at `condition_site`."""

    code = "SPMD502"
    variable: str
    condition_site: int
    loop: bool = False

    @property
    def message(self) -> str:
        what = "loop count" if self.loop else "condition"
        result = (
            "run the loop the same number of times on every rank"
            if self.loop
            else "give some ranks the other branch's computation"
        )
        return (
            f"`{self.variable}` is computed differently depending on the rank-dependent {what} at "
            f"{site(self.condition_site)} and used after it: a program compiled once and run on every rank "
            f"would {result}"
        )
