"""The rule registry of a run: the shipped stubs, then the user's stub directories, cached on disk."""

from __future__ import annotations

import functools
import hashlib
import os
import pathlib

from spmdcheck.rules.cache import CacheError, dump_registry, load_cached_registry
from spmdcheck.rules.stubs import Registry, load_stub_dirs

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


@functools.lru_cache(maxsize=8)
def load_registry(stub_path: tuple[str, ...] = ()) -> Registry:
    """Shipped stubs, then the user's stub directories; cached on disk by the files' stamps."""
    from spmdcheck import __version__

    dirs = [shipped_stubs(), *(pathlib.Path(p) for p in stub_path)]
    stamp = hashlib.sha256(__version__.encode())
    for d in dirs:
        stamp.update(str(d).encode())
        if d.is_dir():
            for p in sorted(d.rglob("*.pyi")):
                st = p.stat()
                stamp.update(f"{p}:{st.st_mtime_ns}:{st.st_size}".encode())
    # plain JSON with a format number and a hash (rules.cache): the folder is user-writable, never unpickle
    cache = user_cache_dir() / f"registry-{stamp.hexdigest()[:24]}.json"
    registry = load_cached_registry(cache, stamp.hexdigest())
    if registry is not None:
        return registry
    registry = load_stub_dirs(dirs)
    try:
        dump_registry(registry, cache, stamp.hexdigest())
    except (OSError, CacheError):
        pass  # a read-only home: just no cache
    return registry
