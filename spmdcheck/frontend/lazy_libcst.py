"""libcst, imported on first use: a run answered from the result cache never pays its import (a
sixth of a second, more than the rest of such a run's start-up)."""

from __future__ import annotations

from typing import Any


class _LazyLibcst:
    """Stands for the `libcst` module; the first attribute read imports it and keeps what was read."""

    def __getattr__(self, name: str) -> Any:
        import libcst

        value = getattr(libcst, name)
        setattr(self, name, value)
        return value


cst: Any = _LazyLibcst()
