"""The stub registry's on-disk cache: plain JSON data, never pickle.

The cache lives in a user-writable folder, so its content is untrusted: loading it must not be able to
run code (unpickling can). It is JSON holding only literals, lists and objects; the registry's
dataclasses and enums are rebuilt by name from a fixed list of the rule model's own classes, through
their constructors. A header carries a format number, the stamp of the stub files it was built from (a
digest of their paths and text: an edit that keeps a file's size and mtime, as `cp -p`, `rsync -a` or a
container COPY do, is a new stamp), and the SHA-256 of the payload; the whole file is sealed with the
user's key (`spmdcheck/cache_trust.py`) and read only as a regular file of this account (no symlink, no
FIFO, a size cap). A file that is truncated, tampered with, not written by this account, from another
version or for other stubs is ignored (and rebuilt by the caller). `--no-cache` (`use_disk_cache(False)`)
or SPMDCHECK_NO_CACHE bypasses it.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import json
import os
import pathlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from spmdcheck.cache_trust import read_regular, secret_key, unseal, write_sealed

if TYPE_CHECKING:
    from spmdcheck.rules.model import OpRule
    from spmdcheck.rules.stubs import Registry

FORMAT = 4  # 2: layout, module contract, assumed constants, instance tests; 3: contract builders; 4: sealed
REGISTRY_CAP = 256 << 20  # bytes read at most from a cached registry
_MEMORY: dict[str, Registry] = {}  # stamp -> registry, for this process (keyed on content like the disk)
_MEMORY_SIZE = 8
_disk = {"enabled": True}


@functools.cache
def _codec() -> tuple[dict[str, type], dict[str, type[enum.Enum]]]:
    """The rule model's classes and enums a cached registry may hold, by name. Imported when a registry is
    written or read, not when this module is: a run answered from the result cache only stamps the stubs."""
    from spmdcheck.lattice import AxisType, GradState, Kind, Linearity
    from spmdcheck.rules.model import (
        CollectiveRule,
        ContractRule,
        DimsRule,
        LayoutRule,
        MappingRule,
        OpRule,
        Param,
        ParamRole,
        RawCollectiveRule,
        Returns,
        Transition,
    )

    classes = (
        OpRule,
        Param,
        DimsRule,
        Transition,
        CollectiveRule,
        RawCollectiveRule,
        MappingRule,
        AxisType,
        LayoutRule,
        ContractRule,
    )
    enums = (Kind, Linearity, GradState, ParamRole, Returns)
    return {c.__name__: c for c in classes}, {e.__name__: e for e in enums}


class CacheError(ValueError):
    pass


def _encode(value: object) -> object:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if value is Ellipsis:
        return {"$": "..."}
    if isinstance(value, enum.Enum):
        if type(value).__name__ not in _codec()[1]:
            raise CacheError(f"cannot cache {type(value).__name__}")
        return {"$enum": type(value).__name__, "v": value.value}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = type(value).__name__
        if _codec()[0].get(name) is not type(value):
            raise CacheError(f"cannot cache {name}")
        return {"$": name, "f": {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, tuple):
        return {"$": "tuple", "i": [_encode(v) for v in value]}
    if isinstance(value, frozenset):
        return {"$": "frozenset", "i": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {"$": "dict", "i": [[_encode(k), _encode(v)] for k, v in value.items()]}
    raise CacheError(f"cannot cache {type(value).__name__}")


def _decode(value: object) -> object:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        raise CacheError("unexpected value")
    if "$enum" in value:
        return _codec()[1][value["$enum"]](value["v"])
    tag = value.get("$")
    if tag == "...":
        return Ellipsis
    if tag == "tuple":
        return tuple(_decode(v) for v in value["i"])
    if tag == "frozenset":
        return frozenset(_decode(v) for v in value["i"])
    if tag == "dict":
        return {_decode(k): _decode(v) for k, v in value["i"]}
    cls = _codec()[0].get(tag)  # type: ignore[arg-type]
    if cls is None:
        raise CacheError(f"unknown class {tag!r}")
    return cls(**{name: _decode(v) for name, v in value["f"].items()})


def stub_stamp(dirs: Sequence[pathlib.Path]) -> str:
    """What a registry is built from: the format, the checker's version, each folder and the path and
    text of each of its stubs (never their size or mtime: a same-size edit keeping the mtime is seen)."""
    from spmdcheck import __version__

    h = hashlib.sha256(f"{FORMAT}\0{__version__}\0".encode())
    for d in dirs:
        h.update(str(d).encode("utf-8", "surrogateescape") + b"\0")
        if d.is_dir():
            for p in sorted(d.rglob("*.pyi")):
                try:
                    text = p.read_bytes()
                except OSError:
                    text = b"\0<unreadable>"
                h.update(f"{p.relative_to(d)}\0{len(text)}\0".encode("utf-8", "surrogateescape") + text)
    return h.hexdigest()


def use_disk_cache(enabled: bool) -> None:
    """`check --no-cache` turns the on-disk registry cache off for the run (the command sets it each run)."""
    _disk["enabled"] = enabled


def disk_cache_enabled() -> bool:
    return _disk["enabled"] and not os.environ.get("SPMDCHECK_NO_CACHE")


def cached_registry(
    dirs: Sequence[pathlib.Path], build: Callable[[list[pathlib.Path]], Registry], folder: pathlib.Path
) -> Registry:
    """The registry of the stubs in `dirs`: from this process's memory or the cache in `folder` when built
    before from the same stub text, else `build(dirs)` (then cached)."""
    stamp = stub_stamp(dirs)
    registry = _MEMORY.get(stamp)
    if registry is not None:
        return registry
    path = folder / f"registry-{stamp[:24]}.json"
    use_disk = disk_cache_enabled()
    registry = load_cached_registry(path, stamp) if use_disk else None
    if registry is None:
        registry = build(list(dirs))
        if use_disk:
            try:
                dump_registry(registry, path, stamp)
            except (OSError, CacheError):
                pass  # a read-only home: just no cache
    if len(_MEMORY) >= _MEMORY_SIZE:
        _MEMORY.clear()
    _MEMORY[stamp] = registry
    return registry


def forget_registries() -> None:
    """Drop this process's registries (tests that change the cache folder)."""
    _MEMORY.clear()


def dump_registry(registry: Registry, path: pathlib.Path, stamp: str) -> None:
    """Write atomically (a temporary file in the same folder, then a rename), sealed with the user's key.
    Raises OSError, CacheError."""
    payload = json.dumps(
        {"rules": {k: _encode(v) for k, v in registry.rules.items()}, "errors": list(registry.errors)},
        separators=(",", ":"),
    )
    header = {"format": FORMAT, "stamp": stamp, "sha256": hashlib.sha256(payload.encode()).hexdigest()}
    key = secret_key()
    if key is None:
        raise CacheError("no key to seal the registry cache with")
    path.parent.mkdir(parents=True, exist_ok=True)
    if not write_sealed(path, key, path.name, (json.dumps(header) + "\n" + payload).encode()):
        raise OSError(f"cannot write {path}")


def load_cached_registry(path: pathlib.Path, stamp: str) -> Registry | None:
    """The cached registry, or None if the file is missing, damaged, tampered with, not written by this
    account (its seal), not a regular file, or for other stubs."""
    key = secret_key()
    data = read_regular(path, REGISTRY_CAP) if key is not None else None
    sealed = unseal(key, path.name, data) if key is not None and data is not None else None
    if sealed is None:
        return None
    try:
        header_line, _, payload = sealed.decode("utf-8").partition("\n")
        header = json.loads(header_line)
        if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("stamp") != stamp:
            return None
        if header.get("sha256") != hashlib.sha256(payload.encode()).hexdigest():
            return None
        data = json.loads(payload)
        raw = data["rules"]
        if not isinstance(raw, dict) or not all(isinstance(v, dict) and v.get("$") == "OpRule" for v in raw.values()):
            return None
        errors = data["errors"]
        if not isinstance(errors, list) or not all(isinstance(e, str) for e in errors):
            return None
        from spmdcheck.rules.stubs import Registry

        return Registry(rules=_LazyRules(raw), errors=list(errors))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError, UnicodeDecodeError):
        return None


_ABSENT = object()


class _LazyRules(dict):
    """The registry's rules, each decoded when first read: a run reads a few hundred of thousands."""

    def __init__(self, raw: dict[str, object]) -> None:
        super().__init__(raw)
        self._decoded: set[str] = set()

    def _rule(self, key: str) -> OpRule:
        value = dict.__getitem__(self, key)
        if key not in self._decoded:
            try:
                value = _decode(value)
            except (CacheError, KeyError, TypeError, ValueError, AttributeError, RecursionError):
                value = None
            if not isinstance(value, _codec()[0]["OpRule"]):  # written by no version of this checker: unknown rule
                dict.__delitem__(self, key)
                raise KeyError(key)
            dict.__setitem__(self, key, value)
            self._decoded.add(key)
        return value  # type: ignore[return-value]

    def __getitem__(self, key: str) -> OpRule:
        return self._rule(key)

    def get(self, key: str, default: object = None) -> object:  # type: ignore[override]
        value = dict.get(self, key, _ABSENT)  # the registry's hottest call: decoded rules return at once
        if value is _ABSENT:
            return default
        if type(value) is not dict:
            return value
        try:
            return self._rule(key)
        except KeyError:
            return default

    def __eq__(self, other: object) -> bool:
        return isinstance(other, dict) and dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]

    def __setitem__(self, key: str, value: OpRule) -> None:
        dict.__setitem__(self, key, value)
        self._decoded.add(key)

    def values(self):  # type: ignore[override]  # noqa: ANN201
        return [rule for _, rule in self.items()]

    def items(self):  # type: ignore[override]  # noqa: ANN201
        return [(k, self.get(k)) for k in list(self) if self.get(k) is not None]

    def update(self, other: object = (), **kw: object) -> None:  # type: ignore[override]
        for key, value in dict(other, **kw).items():  # type: ignore[call-overload]
            self[key] = value

    def copy(self) -> dict:  # type: ignore[override]
        return dict(self.items())

    def __reduce__(self):  # noqa: ANN204 - a worker gets plain decoded rules
        return (dict, (self.items(),))
