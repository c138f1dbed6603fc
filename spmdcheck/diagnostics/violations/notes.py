"""9xx: information the source asks for (notes, not findings)."""

from __future__ import annotations

from spmdcheck.diagnostics.violation import Violation


class RevealType(Violation):
    """reveal_spmd_type(x): `expression`'s forward and gradient types (None: x is not a tensor)."""

    code = "SPMD901"
    expression: str
    forward: str | None = None
    gradient: str | None = None

    @property
    def message(self) -> str:
        if self.forward is None:
            return f"revealed type of `{self.expression}`: not a tensor"
        return f"revealed type of `{self.expression}`: forward {self.forward}; gradient {self.gradient}"
