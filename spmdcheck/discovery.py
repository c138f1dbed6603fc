"""Which files to check: recursion, default excludes, config globs, and .gitignore."""

from __future__ import annotations

import fnmatch
import os
import pathlib

DEFAULT_EXCLUDES = (
    ".git",
    ".hg",
    ".svn",
    ".venv",
    "venv",
    ".tox",
    ".nox",
    ".eggs",
    "__pycache__",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    "_build",
    "buck-out",
)


class GitIgnore:
    """A small .gitignore matcher: patterns from each directory's .gitignore, with negation."""

    def __init__(self) -> None:
        self.rules: list[tuple[pathlib.Path, str, bool, bool]] = []  # base, pattern, negated, dir_only

    def load(self, directory: pathlib.Path) -> None:
        path = directory / ".gitignore"
        if not path.is_file():
            return
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return
        for raw in lines:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            if negated:
                line = line[1:]
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            self.rules.append((directory, line, negated, dir_only))

    def ignored(self, path: pathlib.Path, is_dir: bool) -> bool:
        result = False
        for base, pattern, negated, dir_only in self.rules:
            if dir_only and not is_dir:
                continue
            try:
                rel = path.relative_to(base).as_posix()
            except ValueError:
                continue
            anchored = "/" in pattern.lstrip("/")
            pat = pattern.lstrip("/")
            if anchored:
                hit = fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(rel, pat + "/*")
            else:
                hit = fnmatch.fnmatch(path.name, pat)
            if hit:
                result = not negated
        return result


def _excluded(path: pathlib.Path, root: pathlib.Path, patterns: tuple[str, ...]) -> bool:
    if path.name in DEFAULT_EXCLUDES:
        return True
    try:
        rel = path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        rel = path.as_posix()
    return any(
        fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(path.name, p) or fnmatch.fnmatch(rel, p.rstrip("/") + "/*")
        for p in patterns
    )


def discover(
    paths: list[str],
    root: pathlib.Path,
    exclude: tuple[str, ...] = (),
    respect_gitignore: bool = True,
    force_exclude: bool = False,
) -> tuple[list[str], list[str]]:
    """Python files under `paths`, sorted; and the paths that do not exist."""
    found: list[str] = []
    missing: list[str] = []
    for given in paths:
        p = pathlib.Path(given)
        if not p.exists():
            missing.append(given)
            continue
        if p.is_file():
            if not (force_exclude and _excluded(p, root, exclude)):
                found.append(str(p))
            continue
        ignore = GitIgnore()
        if respect_gitignore:
            for parent in [p.resolve(), *p.resolve().parents]:
                ignore.load(parent)
                if (parent / ".git").exists():
                    break
        for dirpath, dirnames, filenames in os.walk(p):
            d = pathlib.Path(dirpath)
            if respect_gitignore and d != p:
                ignore.load(d)
            dirnames[:] = sorted(
                n
                for n in dirnames
                if not _excluded(d / n, root, exclude)
                and not (respect_gitignore and ignore.ignored((d / n).resolve(), True))
            )
            for name in sorted(filenames):
                f = d / name
                if not name.endswith(".py") or _excluded(f, root, exclude):
                    continue
                if respect_gitignore and ignore.ignored(f.resolve(), False):
                    continue
                found.append(str(f))
    return sorted(dict.fromkeys(found)), missing
