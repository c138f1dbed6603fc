"""Which files to check: recursion, default excludes, config globs, and .gitignore."""

from __future__ import annotations

import errno
import fnmatch
import os
import pathlib
import stat

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
        try:
            if not path.is_file():
                return
        except OSError:  # a folder we may list but not search
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


def _resolved(path: pathlib.Path) -> pathlib.Path:
    """The real path, without raising on a symlink loop (pathlib's resolve raises RuntimeError there)."""
    return pathlib.Path(os.path.realpath(path))


def _real_child(folder: pathlib.Path, real_folder: pathlib.Path, name: str) -> pathlib.Path:
    """`_resolved(folder / name)` for a folder already resolved: one `lstat`, not one per path component."""
    child = folder / name
    return _resolved(child) if os.path.islink(child) else real_folder / name


def _excluded(
    path: pathlib.Path,
    root: pathlib.Path,
    patterns: tuple[str, ...],
    real: pathlib.Path | None = None,
    real_root: pathlib.Path | None = None,
) -> bool:
    """`real` and `real_root`: the resolved path and root when the caller knows them (a walk resolves each
    folder once, not every file)."""
    if path.name in DEFAULT_EXCLUDES:
        return True
    if not patterns:
        return False
    try:
        rel = (real or _resolved(path)).relative_to(real_root or _resolved(root)).as_posix()
    except ValueError:
        rel = path.as_posix()
    return any(
        fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(path.name, p) or fnmatch.fnmatch(rel, p.rstrip("/") + "/*")
        for p in patterns
    )


def _kind(path: pathlib.Path) -> str:
    """ "file", "dir", "missing", "loop", "unreadable" or "special" (a FIFO, socket or device: never opened)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "loop"
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return "broken link" if os.path.islink(path) else "missing"
        return "unreadable"
    if stat.S_ISREG(st.st_mode):
        return "file"
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    return "special"


_REASONS = {
    "loop": "a symbolic link loop",
    "broken link": "a symbolic link to nothing",
    "unreadable": "cannot be read (permission denied)",
    "special": "not a regular file (a FIFO, socket or device): not read",
}


def discover(
    paths: list[str],
    root: pathlib.Path,
    exclude: tuple[str, ...] = (),
    respect_gitignore: bool = True,
    force_exclude: bool = False,
    errors: list[str] | None = None,
    limit: int | None = None,
    walked: frozenset[str] = frozenset(),
) -> tuple[list[str], list[str]]:
    """Python files under `paths`, sorted; and the paths that do not exist. Folders whose real path is in
    `walked` are not entered (the caller has their files already).

    Paths that exist but cannot be checked (an unreadable folder, a symlink loop, a FIFO named on the
    command line) are added to `errors` as "path: reason"; a FIFO, socket or device found in a folder is
    skipped without being opened. With a `limit`, the walk stops once more than `limit` files are found
    (the caller only needs to know there are too many).
    """
    found: list[str] = []
    missing: list[str] = []
    problems = errors if errors is not None else []
    for given in paths:
        p = pathlib.Path(given)
        kind = _kind(p)
        if kind == "missing":
            missing.append(given)
            continue
        if kind != "dir":
            if kind != "file":
                problems.append(f"{given}: {_REASONS[kind]}")
            elif not (force_exclude and _excluded(p, root, exclude)):
                found.append(str(p))
            continue
        ignore = GitIgnore()
        real = _resolved(p)
        if str(real) in walked:
            continue
        if respect_gitignore:
            for parent in [real, *real.parents]:
                ignore.load(parent)
                if (parent / ".git").exists():
                    break

        def unreadable(exc: OSError) -> None:
            problems.append(f"{exc.filename}: cannot be read ({exc.strerror})")

        real_root = _resolved(root)
        for dirpath, dirnames, filenames in os.walk(p, onerror=unreadable):
            d = pathlib.Path(dirpath)
            d_real = _resolved(d)  # once per folder; a file's real path is its folder's, unless it is a link
            if respect_gitignore and d != p:
                ignore.load(d)
            kept = []
            for n in dirnames:
                real_n = _real_child(d, d_real, n)
                if walked and str(real_n) in walked:
                    continue
                if not _excluded(d / n, root, exclude, real_n, real_root) and not (
                    respect_gitignore and ignore.ignored(real_n, True)
                ):
                    kept.append(n)
            dirnames[:] = sorted(kept)
            for name in sorted(filenames):
                if not name.endswith(".py"):
                    continue
                f = d / name
                real_f = _real_child(d, d_real, name)
                if _excluded(f, root, exclude, real_f, real_root):
                    continue
                if respect_gitignore and ignore.ignored(real_f, False):
                    continue
                kind = _kind(f)
                if kind == "special":
                    continue  # a FIFO would block the read forever: never opened
                if kind != "file":
                    problems.append(f"{f}: {_REASONS.get(kind, kind)}")
                    continue
                found.append(str(f))
                if limit is not None and len(found) > limit:
                    return sorted(dict.fromkeys(found)), missing
    return sorted(dict.fromkeys(found)), missing
