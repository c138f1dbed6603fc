"""6xx: global-norm gradient clipping (SPMD605): the squared norm's reduction against the axes the
gradients are sharded over."""

from __future__ import annotations

from spmdcheck.diagnostics.violation import Violation

_NAMED = 3  # gradients named in a message; the rest are elided


def _axes(axes: tuple[str, ...]) -> str:
    return ", ".join(repr(a) for a in axes)


class ClipNormWrongAxes(Violation):
    """The squared gradient norm summed over `reduced` by this reduction.

    missing: axes the gradients are sharded over (or counted on one rank of), left out of the sum;
    duplicated: axes summed over on which some gradients (`replicated`, a few by name) are whole on every
    rank and counted on each; tensor_parallel: the one of those that is the tensor-parallel axis, where the
    fix is to count a replicated gradient on one rank (elsewhere it is to leave the axis out).
    """

    code = "SPMD605"
    reduced: tuple[str, ...]
    missing: tuple[str, ...] = ()
    duplicated: tuple[str, ...] = ()
    replicated: tuple[str, ...] = ()
    tensor_parallel: str | None = None
    local_api: str | None = None  # the norm is this library call's, taken on each rank alone (`reduced` empty)

    @property
    def message(self) -> str:
        parts = []
        if self.missing:
            parts.append(
                f"the gradients are sharded over {_axes(self.missing)}, which this sum leaves out (each rank "
                f"clips with the norm of its own shards)"
            )
        if self.duplicated:
            names = ", ".join(f"`{n}`" for n in self.replicated[:_NAMED])
            which = f" ({names}{', ...' if len(self.replicated) > _NAMED else ''})" if names else ""
            if self.tensor_parallel is not None:
                fix = (
                    f"count them on one rank of {self.tensor_parallel!r} only (Megatron: "
                    f"`getattr(p, 'tensor_model_parallel', False) or tp_rank == 0`)"
                )
            else:
                fix = f"leave {_axes(self.duplicated)} out of the sum"
            parts.append(
                f"gradients whole on every rank of {_axes(self.duplicated)}{which} are counted once per rank "
                f"there: {fix}"
            )
        if self.local_api is not None:
            head = f"`{self.local_api}` clips with the gradient norm of this rank alone, summed over no axis: "
        else:
            head = f"the squared gradient norm of global-norm clipping is summed over {_axes(self.reduced)}: "
        return head + "; ".join(parts)

    @property
    def fix_title(self) -> str:
        if self.local_api is not None:
            return "compute the norm with a sum over the axes the gradients are sharded over, then clip with it"
        return "sum the squared norm over exactly the axes the gradients are sharded over"
