"""Test-only `deepspeed.utils`."""
from __future__ import annotations

from . import groups  # noqa: F401
