"""The on-disk result cache: `.spmdcheck_cache/` in the project root, else the user cache dir.

A file's diagnostics are reused when nothing they can depend on changed: the run key (tool
version and source, settings, stub files, Python) and the file's content hash, and the content
hashes of every checked file it imports, directly or not (whole-program analysis reads them).
The store is one JSON document per run key with a version field, written atomically; it is data
only (never pickle), and an entry that does not have the expected shape is ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spmdcheck.api import Settings
    from spmdcheck.diagnostics.render import Diagnostic

FORMAT_VERSION = 2
DIRNAME = ".spmdcheck_cache"
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by spmdcheck.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n"
)


def user_cache_root() -> pathlib.Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "spmdcheck"


def _prepare(directory: pathlib.Path) -> bool:
    """Create the folder with its CACHEDIR.TAG and a `.gitignore` of `*`; False when not writable."""
    try:
        if directory.is_symlink():
            return False
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in (("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", "# created by spmdcheck\n*\n")):
            target = directory / name
            if not target.is_file():
                target.write_text(text, encoding="utf-8")
        return os.access(directory, os.W_OK)
    except OSError:
        return False


def locate(root: pathlib.Path) -> pathlib.Path | None:
    """`<root>/.spmdcheck_cache`, or a folder of the user cache dir named after the root."""
    local = root / DIRNAME
    if _prepare(local):
        return local
    digest = hashlib.sha256(str(root.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    fallback = user_cache_root() / "projects" / digest
    return fallback if _prepare(fallback) else None


def remove(root: pathlib.Path) -> list[pathlib.Path]:
    """`spmdcheck clean`: delete the project's cache folders (local and user-dir); what was removed."""
    import shutil

    digest = hashlib.sha256(str(root.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    removed = []
    for directory in (root / DIRNAME, user_cache_root() / "projects" / digest):
        if directory.is_dir() and not directory.is_symlink() and (directory / "CACHEDIR.TAG").is_file():
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory)
    return removed


def _hash_files(paths: Iterable[pathlib.Path], h: Any) -> None:
    for p in sorted(paths):
        h.update(str(p).encode("utf-8", "surrogateescape"))
        try:
            h.update(p.read_bytes())
        except OSError:
            h.update(b"<unreadable>")


def run_key(settings: Settings, stub_dirs: Iterable[pathlib.Path]) -> str:
    """Everything besides the files that decides a file's diagnostics."""
    from spmdcheck import __version__

    h = hashlib.sha256()
    package = pathlib.Path(__file__).resolve().parent
    h.update(json.dumps([FORMAT_VERSION, __version__, sys.version_info[:3], asdict(settings)]).encode())
    # The checker's own source: an edited or upgraded checker must not reuse old results.
    for p in sorted(package.rglob("*.py")):
        st = p.stat()
        h.update(f"{p.relative_to(package)}:{st.st_size}:{st.st_mtime_ns}".encode())
    for d in stub_dirs:
        h.update(str(d).encode("utf-8", "surrogateescape"))
        if d.is_dir():
            _hash_files(d.rglob("*.pyi"), h)
    try:
        from importlib.metadata import version

        h.update(version("libcst").encode())
    except Exception:  # noqa: BLE001 - no metadata: the checker's source hash still changes with it
        pass
    return h.hexdigest()


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass
class ResultCache:
    """One run key's store. `files`: path -> (content hash, pre-pass scan); `programs`: a program's
    key (its files' paths, content hashes and plans) -> each file's diagnostics; `tree`: the key of the
    whole last run (every path and content hash) with each file's result, for an unchanged tree."""

    file: pathlib.Path
    key: str
    _files: dict[str, tuple[str, object]] | None = None  # the scans, in their own file, read on first need
    programs: dict[str, dict[str, list[list[Any]]]] = field(default_factory=dict)
    tree: str = ""
    results: dict[str, tuple[bool, list[list[Any]]]] = field(default_factory=dict)
    stub_errors: list[str] | None = None
    dirty: bool = False
    scans_dirty: bool = False

    @classmethod
    def open(cls, directory: pathlib.Path, key: str) -> ResultCache:
        cache = cls(directory / f"results-{key[:24]}.json", key)
        try:
            doc = json.loads(cache.file.read_bytes())
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):
            return cache
        if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION or doc.get("key") != key:
            return cache
        errors = doc.get("stub_errors")
        if isinstance(errors, list) and all(isinstance(e, str) for e in errors):
            cache.stub_errors = errors
        for pkey, per_file in _dict(doc.get("programs")).items():
            per_file = _dict(per_file)
            if per_file and all(_diagnostics_shape(d) for d in per_file.values()):
                cache.programs[pkey] = per_file
        tree, results = doc.get("tree"), _dict(doc.get("results"))
        if isinstance(tree, str) and all(
            isinstance(r, list) and len(r) == 2 and isinstance(r[0], bool) and _diagnostics_shape(r[1])
            for r in results.values()
        ):
            cache.tree, cache.results = tree, {p: (r[0], r[1]) for p, r in results.items()}
        return cache

    @property
    def scans_file(self) -> pathlib.Path:
        return self.file.with_name(self.file.name.replace("results-", "scans-", 1))

    @property
    def files(self) -> dict[str, tuple[str, object]]:
        """path -> (content hash, the pre-pass scan as plain data); kept apart, so that an unchanged
        tree reads only the small results file."""
        if self._files is None:
            self._files = {}
            try:
                doc = json.loads(self.scans_file.read_bytes())
            except (OSError, ValueError, UnicodeDecodeError, RecursionError):
                doc = None
            if isinstance(doc, dict) and doc.get("version") == FORMAT_VERSION and doc.get("key") == self.key:
                for path, entry in _dict(doc.get("files")).items():
                    if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str):
                        self._files[path] = (entry[0], entry[1])
        return self._files

    def scan(self, path: str, content: str) -> object | None:
        entry = self.files.get(path)
        return entry[1] if entry is not None and entry[0] == content else None

    def store_scan(self, path: str, content: str, plain: object) -> None:
        self.files[path] = (content, plain)
        self.dirty = self.scans_dirty = True

    def set_stub_errors(self, errors: list[str]) -> None:
        if self.stub_errors != errors:
            self.stub_errors = list(errors)
            self.dirty = True

    def finish(self, tree: str, results: dict[str, tuple[bool, list[list[Any]]]], programs: dict) -> None:
        """Remember this run: its tree key, every file's result, and the programs it analysed."""
        if tree != self.tree or results != self.results or programs.keys() != self.programs.keys():
            self.tree, self.results, self.programs = tree, results, programs
            self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        doc = {
            "version": FORMAT_VERSION,
            "key": self.key,
            "stub_errors": self.stub_errors,
            "tree": self.tree,
            "results": {p: list(r) for p, r in self.results.items()},
            "programs": self.programs,
        }
        if self.scans_dirty:
            scans = {"version": FORMAT_VERSION, "key": self.key, "files": {p: list(e) for p, e in self.files.items()}}
            _write_atomically(self.scans_file, scans)
        _write_atomically(self.file, doc)
        self.dirty = self.scans_dirty = False
        _prune(self.file.parent)


KEEP_STORES = 8  # run keys kept side by side (settings groups, recent checker versions)


def _prune(directory: pathlib.Path) -> None:
    """Drop the stores of all but the most recently written run keys."""
    try:
        stores = sorted(directory.glob("results-*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return
    for old in stores[KEEP_STORES:]:
        for path in (old, old.with_name(old.name.replace("results-", "scans-", 1))):
            try:
                path.unlink()
            except OSError:
                pass


def _write_atomically(target: pathlib.Path, doc: dict) -> None:
    """Write to a temporary file beside `target`, then rename: readers see the old or the new file."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=target.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, separators=(",", ":"))
        os.replace(tmp, target)
    except (OSError, TypeError, ValueError):
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def tree_key(hashes: dict[str, str]) -> str:
    h = hashlib.sha256()
    for path in sorted(hashes):
        h.update(f"{path}\0{hashes[path]}\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def program_key(items: Iterable[tuple[str, str, bool, object]]) -> str:
    """A program's key: each file's path, content hash, whether it is relevant, and its blanked spans."""
    return hashlib.sha256(json.dumps(sorted(items, key=lambda i: i[0])).encode("utf-8", "surrogateescape")).hexdigest()


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _diagnostics_shape(value: object) -> bool:
    return isinstance(value, list) and all(_diagnostic_shape(d) for d in value)


def _diagnostic_shape(d: object) -> bool:
    if not (isinstance(d, list) and len(d) == 9):
        return False
    ints, strs, suggestions = d[0:4], d[4:8], d[8]
    if not all(type(i) is int for i in ints) or not all(isinstance(s, str) for s in strs):
        return False
    if not isinstance(suggestions, list):
        return False
    for s in suggestions:
        if not (isinstance(s, list) and len(s) == 3 and isinstance(s[0], str) and isinstance(s[1], str)):
            return False
        span = s[2]
        if span is not None and not (isinstance(span, list) and len(span) == 4 and all(type(i) is int for i in span)):
            return False
    return True


def to_plain(diags: list[Diagnostic]) -> list[list[Any]]:
    return [
        [
            d.line,
            d.column,
            d.end_line,
            d.end_column,
            d.code,
            d.name,
            d.severity,
            d.message,
            [[s.message, s.replacement, list(s.span) if s.span is not None else None] for s in d.suggestions],
        ]
        for d in diags
    ]


def from_plain(path: str, plain: list[list[Any]]) -> list[Diagnostic]:
    from spmdcheck.diagnostics.render import Diagnostic, SuggestionOut

    return [
        Diagnostic(
            path,
            line,
            column,
            end_line,
            end_column,
            code,
            name,
            severity,
            message,
            [SuggestionOut(m, r, tuple(span) if span is not None else None) for m, r, span in suggestions],
        )
        for line, column, end_line, end_column, code, name, severity, message, suggestions in plain
    ]
