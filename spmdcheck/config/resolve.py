"""Configuration as ruff does it: the closest config file to each checked file, `extend`, CLI overrides.

A config is `[tool.spmdcheck]` in a pyproject.toml, or a `spmdcheck.toml` /
`.spmdcheck.toml` without the prefix. Each checked file uses the closest one
among its folders (no implicit merging; `extend = "../pyproject.toml"` merges
explicitly). Keys are kebab-case as in ruff; snake_case spellings are accepted
too (`stub_path`). Relative paths and globs are relative to the file that
writes them.
"""

from __future__ import annotations

import fnmatch
import os
import pathlib
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from spmdcheck.config import helper_stubs

CONFIG_FILE_NAMES = ("spmdcheck.toml", ".spmdcheck.toml", "pyproject.toml")

# canonical (kebab-case) key -> the TOML type it takes
KNOWN_KEYS: dict[str, type] = {
    "extend": str,
    "mesh": list,
    "strict": bool,
    "preview": bool,
    "stub-path": list,
    "include": list,
    "exclude": list,
    "extend-exclude": list,
    "select": list,
    "extend-select": list,
    "ignore": list,
    "per-file-ignores": dict,
    "extend-per-file-ignores": dict,
    "respect-gitignore": bool,
    "project-context": bool,
    "jobs": int,
    "group-helpers": dict,
    "mesh-setters": list,
}
# keys whose value adds to what an `extend`ed config (or a lower-priority override) gave
_ACCUMULATING = ("extend-exclude", "extend-select", "extend-per-file-ignores")
_SELECTOR_KEYS = ("select", "extend-select", "ignore")


class ConfigError(Exception):
    pass


@dataclass(frozen=True)
class Glob:
    """A path pattern and the folder it is relative to."""

    base: pathlib.Path
    pattern: str

    def matches(self, path: pathlib.Path) -> bool:
        """A pattern without `/` matches a file or folder name at any depth below `base`; one with `/`
        matches the path relative to `base`, or one of its parent folders (so `legacy/` covers its files)."""
        pattern = self.pattern.removeprefix("./").rstrip("/")
        try:
            rel = path.relative_to(self.base)
        except ValueError:
            return "/" not in pattern and fnmatch.fnmatch(path.name, pattern)
        parts = rel.parts
        if "/" not in pattern:
            return any(fnmatch.fnmatch(part, pattern) for part in parts)
        return any(fnmatch.fnmatch("/".join(parts[:n]), pattern) for n in range(1, len(parts) + 1))


@dataclass(frozen=True)
class Config:
    mesh: tuple[str, ...] = ()
    strict: bool = False
    preview: bool = False  # preview rules run too
    stub_path: tuple[str, ...] = ()
    include: tuple[Glob, ...] = ()  # empty: every .py file discovery finds
    exclude: tuple[Glob, ...] = ()
    select: tuple[str, ...] = ()  # empty: every code
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[Glob, tuple[str, ...]], ...] = ()
    respect_gitignore: bool = True
    # files named on the command line are analysed with the rest of their project (reported alone)
    project_context: bool = True
    jobs: int = 0
    root: pathlib.Path = field(default_factory=pathlib.Path.cwd)
    source: pathlib.Path | None = None

    def excluded(self, path: pathlib.Path) -> bool:
        if not self.exclude:
            return False  # no glob: no need to resolve the path (a syscall per folder level)
        path = path.resolve()
        return any(g.matches(path) for g in self.exclude)

    def included(self, path: pathlib.Path) -> bool:
        if not self.include:
            return True
        path = path.resolve()
        return any(g.matches(path) for g in self.include)

    def ignores_for(self, path: pathlib.Path) -> tuple[str, ...]:
        if not self.per_file_ignores:
            return ()
        path = path.resolve()
        return tuple(code for g, codes in self.per_file_ignores if g.matches(path) for code in codes)

    def discovery_excludes(self) -> tuple[str, ...]:
        """The exclude globs as discovery's walk understands them (relative to `root`), to prune folders early."""
        out = []
        for g in self.exclude:
            if "/" not in g.pattern.strip("/"):
                out.append(g.pattern.strip("/"))
            elif g.base == self.root.resolve():
                out.append(g.pattern.removeprefix("./"))
        return tuple(out)


def canonical_key(key: str) -> str:
    return key.replace("_", "-")


def valid_selector(selector: str) -> bool:
    """`ALL`, a code, a code prefix (`SPMD1`) or a rule name."""
    from spmdcheck.diagnostics.codes import CODES, lookup

    s = selector.strip()
    if not s:
        return False
    return s.upper() == "ALL" or lookup(s) is not None or any(code.startswith(s.upper()) for code in CODES)


def has_config_table(path: pathlib.Path) -> bool:
    """spmdcheck.toml always counts; a pyproject.toml only with a [tool.spmdcheck] table (or when broken,
    so that the error is reported rather than the file skipped)."""
    if path.name != "pyproject.toml":
        return True
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError):
        return True
    tool = data.get("tool", {})
    return not isinstance(tool, dict) or "spmdcheck" in tool


def find_config(start: pathlib.Path) -> pathlib.Path | None:
    """The closest config file in `start` or its parents."""
    start = start.resolve()
    for directory in [start, *start.parents]:
        for name in CONFIG_FILE_NAMES:
            candidate = directory / name
            if candidate.is_file() and has_config_table(candidate):
                return candidate
    return None


def _read_table(path: pathlib.Path) -> dict:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    if path.name != "pyproject.toml":
        return data
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: `tool` must be a table, got {type(tool).__name__}")
    table = tool.get("spmdcheck", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.spmdcheck] must be a table, got {type(table).__name__}")
    return table


def _check_strings(where: str, key: str, value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: `{key}` must be a list of strings")
    return value


def _check_selectors(where: str, key: str, values: Iterable[str]) -> None:
    for v in values:
        if not valid_selector(v):
            raise ConfigError(
                f"{where}: unknown rule selector {v!r} in `{key}` (a code such as SPMD101, a prefix such as "
                f"SPMD1, a rule name, or ALL; see `spmdcheck rules`)"
            )


def check_mesh(names: object) -> str | None:
    """Why `names` is not a valid mesh (a list of distinct, non-empty axis names), or None."""
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        return "the mesh must be a list of axis names"
    for n in names:
        if not n.strip() or n != n.strip():
            return f"axis name {n!r} is empty or has surrounding spaces"
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        return f"the mesh names axis {dupes[0]!r} twice"
    return None


def normalise_table(table: dict, where: str, base: pathlib.Path) -> dict:
    """Validated values under canonical keys; paths and globs made relative to `base`."""
    out: dict = {}
    for raw_key, value in table.items():
        key = canonical_key(raw_key)
        want = KNOWN_KEYS.get(key)
        if want is None:
            raise ConfigError(f"{where}: unknown key {raw_key!r} in [tool.spmdcheck]{_did_you_mean(key)}")
        if key in out:
            raise ConfigError(f"{where}: `{key}` is given twice (kebab-case and snake_case)")
        if key in (helper_stubs.GROUP_HELPERS, helper_stubs.MESH_SETTERS):
            try:
                check = helper_stubs.check_group_helpers if key == helper_stubs.GROUP_HELPERS else None
                out[key] = check(value) if check else helper_stubs.check_mesh_setters(value)
            except helper_stubs.HelperConfigError as exc:
                raise ConfigError(f"{where}: {exc}") from exc
            continue
        if want is list:
            value = _check_strings(where, raw_key, value)
        elif want is bool and not isinstance(value, bool):
            raise ConfigError(f"{where}: `{raw_key}` must be true or false")
        elif want is int and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ConfigError(f"{where}: `{raw_key}` must be a non-negative integer")
        elif want is str and not isinstance(value, str):
            raise ConfigError(f"{where}: `{raw_key}` must be a string")
        elif want is dict:
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: `{raw_key}` must be a table of glob = [codes]")
            for glob, codes in value.items():
                _check_selectors(where, f"{raw_key}.{glob!r}", _check_strings(where, f"{raw_key}.{glob!r}", codes))
            value = tuple((Glob(base, g), tuple(codes)) for g, codes in value.items())
        if key in _SELECTOR_KEYS:
            _check_selectors(where, raw_key, value)
        if key == "mesh" and (problem := check_mesh(value)) is not None:
            raise ConfigError(f"{where}: `mesh`: {problem}")
        if key == "stub-path":
            dirs = [(base / p).resolve() for p in value]
            for given, d in zip(value, dirs):
                if not d.is_dir():
                    raise ConfigError(f"{where}: `{raw_key}`: {given!r} is not a directory ({d})")
            value = tuple(str(d) for d in dirs)
        if key in ("include", "exclude", "extend-exclude"):
            value = tuple(Glob(base, p) for p in value)
        if key == "extend":
            value = (base / value).resolve()
        out[key] = value
    return out


def _did_you_mean(key: str) -> str:
    """` (did you mean `mesh`?)` for a misspelt key, else the list of the known keys."""
    import difflib

    close = difflib.get_close_matches(key, list(KNOWN_KEYS), n=1, cutoff=0.6)
    if close:
        return f" (did you mean `{close[0]}`?)"
    return f" (known: {', '.join(sorted(KNOWN_KEYS))})"


def merge(lower: dict, higher: dict) -> dict:
    """`higher` wins key by key; the extend-* keys add to what `lower` had."""
    merged = {**lower, **higher}
    for key in _ACCUMULATING:
        if key in lower and key in higher:
            merged[key] = tuple(lower[key]) + tuple(higher[key])
    return merged


def _load_merged(path: pathlib.Path, chain: tuple[pathlib.Path, ...] = ()) -> dict:
    path = path.resolve()
    if path in chain:
        raise ConfigError(f"{path}: `extend` forms a cycle ({' -> '.join(str(p) for p in (*chain, path))})")
    table = normalise_table(_read_table(path), str(path), path.parent)
    parent = table.pop("extend", None)
    if parent is None:
        return table
    if not parent.is_file():
        raise ConfigError(f"{path}: `extend`: {parent} is not a file")
    return merge(_load_merged(parent, (*chain, path)), table)


def build_config(table: dict, root: pathlib.Path, source: pathlib.Path | None) -> Config:
    stub_path = tuple(table.get("stub-path", ()))
    helpers = (tuple(table.get(helper_stubs.GROUP_HELPERS, ())), tuple(table.get(helper_stubs.MESH_SETTERS, ())))
    if any(helpers):
        # declared helpers become a stub directory after the user's own (their entries win)
        try:
            generated = helper_stubs.materialize(*helpers)
        except helper_stubs.HelperConfigError as exc:
            raise ConfigError(f"{source or 'configuration'}: {exc}") from exc
        if generated is not None:
            stub_path = (*stub_path, str(generated))
    return Config(
        mesh=tuple(table.get("mesh", ())),
        strict=table.get("strict", False),
        preview=table.get("preview", False),
        stub_path=stub_path,
        include=tuple(table.get("include", ())),
        exclude=tuple(table.get("exclude", ())) + tuple(table.get("extend-exclude", ())),
        select=tuple(table.get("select", ())),
        extend_select=tuple(table.get("extend-select", ())),
        ignore=tuple(table.get("ignore", ())),
        per_file_ignores=tuple(table.get("per-file-ignores", ())) + tuple(table.get("extend-per-file-ignores", ())),
        respect_gitignore=table.get("respect-gitignore", True),
        project_context=table.get("project-context", True),
        jobs=table.get("jobs", 0),
        root=root,
        source=source,
    )


def load_config(path: pathlib.Path | None, overrides: dict | None = None) -> Config:
    """The config in `path` (following `extend`) with `overrides` on top; raises ConfigError."""
    table = _load_merged(path) if path is not None else {}
    if overrides:
        table = merge(table, overrides)
    root = path.resolve().parent if path is not None else pathlib.Path.cwd()
    return build_config(table, root, path.resolve() if path is not None else None)


def parse_override(text: str) -> dict:
    """`--config 'KEY = VALUE'` (TOML syntax), relative paths taken from the working directory."""
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"--config {text!r}: neither an existing config file nor a `key = value` in TOML syntax ({exc})"
        ) from exc
    table = table.get("tool", {}).get("spmdcheck", table) if isinstance(table.get("tool"), dict) else table
    if "extend" in {canonical_key(k) for k in table}:
        raise ConfigError(f"--config {text!r}: `extend` only works in a config file")
    return normalise_table(table, f"--config {text!r}", pathlib.Path.cwd())


class ConfigResolver:
    """Which config governs each checked file: `--config PATH` for all, defaults with `--isolated`, else the
    closest config file. A broken config is recorded once in `errors` and its files get the defaults (the
    command line then refuses to run, as ruff does; an editor keeps checking)."""

    def __init__(self, explicit: pathlib.Path | None = None, isolated: bool = False, overrides: dict | None = None):
        self.explicit = explicit
        self.isolated = isolated
        self.overrides = overrides or {}
        self.errors: list[str] = []
        self._by_file: dict[pathlib.Path | None, Config] = {}
        self._by_dir: dict[pathlib.Path, pathlib.Path | None] = {}
        self._by_given: dict[str, pathlib.Path | None] = {}

    def config_file_for(self, path: pathlib.Path) -> pathlib.Path | None:
        if self.isolated:
            return None
        if self.explicit is not None:
            return self.explicit
        # files of one folder share their folder's answer (keyed on the text of the path: pathlib is slow
        # at the thousands of files of a run)
        text = str(path)
        key = os.path.dirname(text) if text.endswith(".py") else text
        if key in self._by_given:
            return self._by_given[key]
        path = path.resolve()
        directory = path if path.is_dir() else path.parent
        self._by_given[key] = self._closest(directory)
        return self._by_given[key]

    def _closest(self, directory: pathlib.Path) -> pathlib.Path | None:
        """`find_config(directory)`, each folder looked at once in a run (the folders of a tree share parents)."""
        walked: list[pathlib.Path] = []
        found: pathlib.Path | None = None
        for folder in [directory, *directory.parents]:
            if folder in self._by_dir:
                found = self._by_dir[folder]
                break
            walked.append(folder)
            found = next(
                (c for name in CONFIG_FILE_NAMES if (c := folder / name).is_file() and has_config_table(c)), None
            )
            if found is not None:
                break
        for folder in walked:
            self._by_dir[folder] = found
        return found

    def for_path(self, path: pathlib.Path) -> Config:
        source = self.config_file_for(path)
        if source not in self._by_file:
            try:
                self._by_file[source] = load_config(source, self.overrides)
            except ConfigError as exc:
                self.errors.append(str(exc))
                root = source.resolve().parent if source is not None else pathlib.Path.cwd()
                try:
                    self._by_file[source] = load_config(None, self.overrides)
                except ConfigError:  # pragma: no cover - overrides were validated when parsed
                    self._by_file[source] = Config()
                self._by_file[source] = replace(self._by_file[source], root=root, source=None)
        return self._by_file[source]
