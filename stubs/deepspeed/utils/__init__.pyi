"""spmdcheck rules for `deepspeed.utils` (package re-exports)."""

from . import groups as groups
