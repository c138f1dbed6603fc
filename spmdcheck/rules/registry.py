"""The rule registry of a run: the shipped stubs, then the user's stub directories, cached by their text."""

from __future__ import annotations

import os
import pathlib
from typing import TYPE_CHECKING

from spmdcheck.rules.cache import cached_registry, forget_registries

if TYPE_CHECKING:  # the stub reader is imported by a run that builds a registry: a cached run only locates stubs
    from spmdcheck.rules.stubs import Registry

_PACKAGE = pathlib.Path(__file__).resolve().parent.parent  # spmdcheck/
SHIPPED_STUBS_CANDIDATES = (
    _PACKAGE / "_stubs",  # installed wheel
    _PACKAGE.parent / "stubs",  # source checkout / editable install
)


def shipped_stubs() -> pathlib.Path:
    for candidate in SHIPPED_STUBS_CANDIDATES:
        if candidate.is_dir():
            return candidate
    return SHIPPED_STUBS_CANDIDATES[-1]


def user_cache_dir() -> pathlib.Path:
    base = os.environ.get("SPMDCHECK_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "spmdcheck"
    )
    return pathlib.Path(base)


def load_registry(stub_path: tuple[str, ...] = ()) -> Registry:
    """Shipped stubs, then the user's stub directories; cached (in memory and on disk) by the stubs' text."""
    from spmdcheck.rules.stubs import load_stub_dirs

    dirs = [shipped_stubs(), *(pathlib.Path(p) for p in stub_path)]
    return cached_registry(dirs, load_stub_dirs, user_cache_dir())


load_registry.cache_clear = forget_registries  # type: ignore[attr-defined]
