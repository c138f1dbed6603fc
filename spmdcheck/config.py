"""`[tool.spmdcheck]` in pyproject.toml (or a `spmdcheck.toml` without the prefix)."""

from __future__ import annotations

import pathlib
import tomllib
from dataclasses import dataclass, field

KNOWN_KEYS = {
    "mesh": list,
    "strict": bool,
    "stub_path": list,
    "stub-path": list,
    "exclude": list,
    "extend-exclude": list,
    "extend_exclude": list,
    "select": list,
    "ignore": list,
    "respect-gitignore": bool,
    "respect_gitignore": bool,
    "jobs": int,
}


class ConfigError(Exception):
    pass


@dataclass
class Config:
    mesh: tuple[str, ...] = ()
    strict: bool = False
    stub_path: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    respect_gitignore: bool = True
    jobs: int = 0
    root: pathlib.Path = field(default_factory=pathlib.Path.cwd)
    source: pathlib.Path | None = None


def find_config(start: pathlib.Path) -> pathlib.Path | None:
    """The closest spmdcheck.toml, or pyproject.toml with a [tool.spmdcheck] table, walking up."""
    start = start.resolve()
    for directory in [start, *start.parents]:
        for name in ("spmdcheck.toml", ".spmdcheck.toml"):
            candidate = directory / name
            if candidate.is_file():
                return candidate
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            try:
                data = tomllib.loads(candidate.read_text(encoding="utf-8"))
            except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError):
                return candidate  # report the broken file rather than skip it
            if "spmdcheck" in data.get("tool", {}):
                return candidate
    return None


def load_config(path: pathlib.Path | None) -> Config:
    """Raises ConfigError with a clear message; the caller reports it and goes on with defaults."""
    if path is None:
        return Config()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    table = data if path.name != "pyproject.toml" else data.get("tool", {}).get("spmdcheck", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.spmdcheck] must be a table")
    cfg = Config(root=path.parent, source=path)
    for key, value in table.items():
        want = KNOWN_KEYS.get(key)
        if want is None:
            raise ConfigError(
                f"{path}: unknown key {key!r} in [tool.spmdcheck] "
                f"(known: {', '.join(sorted(k for k in KNOWN_KEYS if '_' not in k))})"
            )
        if not isinstance(value, want) or (want is list and not all(isinstance(v, str) for v in value)):
            raise ConfigError(f"{path}: {key} must be {'a list of strings' if want is list else want.__name__}")
    cfg.mesh = tuple(table.get("mesh", ()))
    cfg.strict = bool(table.get("strict", False))
    stub_path = table.get("stub_path", table.get("stub-path", ()))
    cfg.stub_path = tuple(str((path.parent / p).resolve()) for p in stub_path)
    cfg.exclude = tuple(table.get("exclude", ())) + tuple(table.get("extend-exclude", table.get("extend_exclude", ())))
    cfg.select = tuple(table.get("select", ()))
    cfg.ignore = tuple(table.get("ignore", ()))
    cfg.respect_gitignore = bool(table.get("respect-gitignore", table.get("respect_gitignore", True)))
    cfg.jobs = int(table.get("jobs", 0))
    if len(set(cfg.mesh)) != len(cfg.mesh):
        raise ConfigError(f"{path}: mesh names an axis twice")
    return cfg
