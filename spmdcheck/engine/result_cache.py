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
import shutil
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spmdcheck.diagnostics.render import Diagnostic
    from spmdcheck.settings import Settings

FORMAT_VERSION = 7
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
    package = pathlib.Path(__file__).resolve().parent.parent  # spmdcheck/ (this file is in spmdcheck/engine/)
    h.update(json.dumps([FORMAT_VERSION, __version__, sys.version_info[:3], asdict(settings)]).encode())
    # The checker's own source: an edited or upgraded checker must not reuse old results.
    for p in sorted(package.rglob("*.py")):
        st = p.stat()
        h.update(f"{p.relative_to(package)}:{st.st_size}:{st.st_mtime_ns}".encode())
    for d in stub_dirs:
        h.update(str(d).encode("utf-8", "surrogateescape"))
        if d.is_dir():
            _hash_files(d.rglob("*.pyi"), h)
    h.update(_libcst_release().encode())
    return h.hexdigest()


def _libcst_release() -> str:
    """Which libcst is installed, without importing it (or importlib.metadata: a tenth of a warm run): its
    distribution's folder name (it holds the version), or the size and time of its package file."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("libcst")
    except (ImportError, ValueError):
        return ""
    if spec is None or spec.origin is None:
        return ""
    origin = pathlib.Path(spec.origin)
    releases = sorted(p.name for p in origin.parent.parent.glob("libcst-*.dist-info"))
    if releases:
        return ",".join(releases)
    try:
        st = origin.stat()
    except OSError:
        return ""
    return f"{origin}:{st.st_size}:{st.st_mtime_ns}"


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass
class ResultCache:
    """One run key's store, in three JSON files read as far as a run needs them:

    - results: the key of the whole last run (every path and content hash) with each file's result,
      for an unchanged tree; each program's diagnostics under its key; the pre-pass's taint of the last
      run (`taint`: its key, made of every file's scan hash, and each file's relevance and blanked spans);
    - index: path -> (content hash, scan hash, the scan's small part: module, imports, cuts...);
    - units/: one file per scanned file and content: the scan's units, read only when the taint must be
      computed again.
    """

    file: pathlib.Path
    key: str
    _index: dict[str, tuple[str, str, object]] | None = None
    _new_units: dict[str, tuple[str, object]] = field(default_factory=dict)
    programs: dict[str, dict[str, list[list[Any]]]] = field(default_factory=dict)
    tree: str = ""
    results: dict[str, tuple[bool, list[list[Any]]]] = field(default_factory=dict)
    stub_errors: list[str] | None = None
    seeds: list[str] | None = None  # the pre-pass's seed words (they follow from the stubs and settings)
    taint: tuple[str, dict[str, list]] = ("", {})
    dirty: bool = False
    scans_dirty: bool = False
    digests: dict[str, tuple[str, str]] = field(default_factory=dict)  # path -> (contents+blanks, analysed digest)

    @classmethod
    def open(cls, directory: pathlib.Path, key: str) -> ResultCache:
        cache = cls(directory / f"results-{key[:24]}.json", key)
        doc = cache._read(cache.file)
        if doc is None:
            return cache
        errors = doc.get("stub_errors")
        if isinstance(errors, list) and all(isinstance(e, str) for e in errors):
            cache.stub_errors = errors
        seeds = doc.get("seeds")
        if isinstance(seeds, list) and all(isinstance(e, str) for e in seeds):
            cache.seeds = seeds
        taint = doc.get("taint")
        if isinstance(taint, list) and len(taint) == 2 and isinstance(taint[0], str) and isinstance(taint[1], dict):
            cache.taint = (taint[0], taint[1])
        for pkey, per_file in _dict(doc.get("programs")).items():
            per_file = _dict(per_file)
            if per_file and all(_diagnostics_shape(d) for d in per_file.values()):
                cache.programs[pkey] = per_file
        for path, entry in _dict(doc.get("digests")).items():
            if isinstance(entry, list) and len(entry) == 2 and all(isinstance(e, str) for e in entry):
                cache.digests[path] = (entry[0], entry[1])
        tree, results = doc.get("tree"), _dict(doc.get("results"))
        if isinstance(tree, str) and all(
            isinstance(r, list) and len(r) == 2 and isinstance(r[0], bool) and _diagnostics_shape(r[1])
            for r in results.values()
        ):
            cache.tree, cache.results = tree, {p: (r[0], r[1]) for p, r in results.items()}
        return cache

    def _read(self, path: pathlib.Path) -> dict | None:
        try:
            doc = json.loads(path.read_bytes())
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):
            return None
        if isinstance(doc, dict) and doc.get("version") == FORMAT_VERSION and doc.get("key") == self.key:
            return doc
        return None

    def _sibling(self, kind: str) -> pathlib.Path:
        return self.file.with_name(self.file.name.replace("results-", f"{kind}-", 1))

    @property
    def index(self) -> dict[str, tuple[str, str, object]]:
        if self._index is None:
            self._index = {}
            for path, entry in _dict((self._read(self._sibling("index")) or {}).get("files")).items():
                if (
                    isinstance(entry, list)
                    and len(entry) == 3
                    and isinstance(entry[0], str)
                    and isinstance(entry[1], str)
                ):
                    self._index[path] = (entry[0], entry[1], entry[2])
        return self._index

    @property
    def records_dir(self) -> pathlib.Path:
        return self._sibling("records").with_suffix("")

    def _record_file(self, shape: str) -> pathlib.Path:
        return self.records_dir / f"{shape[:32]}.json"

    def record(self, shape: str) -> dict | None:
        """The last run's record of a program (incremental.py), by its shape (its files); read on demand."""
        doc = self._read(self._record_file(shape))
        return doc.get("record") if doc is not None and doc.get("shape") == shape else None

    def store_record(self, shape: str, record: dict) -> None:
        try:
            self.records_dir.mkdir(parents=True, exist_ok=True)
        except OSError:
            return
        doc = {"version": FORMAT_VERSION, "key": self.key, "shape": shape, "record": record}
        _write_atomically(self._record_file(shape), doc)

    def prune_records(self, live: Iterable[str]) -> None:
        """Keep the records of this run's programs, and of KEEP_RECORDS others, most recent first."""
        keep = {self._record_file(shape).name for shape in live}
        try:
            others = [p for p in self.records_dir.iterdir() if p.name not in keep]
            others.sort(key=lambda p: p.stat().st_mtime, reverse=True)
            for stale in others[KEEP_RECORDS:]:
                stale.unlink()
        except OSError:
            pass

    @property
    def units_dir(self) -> pathlib.Path:
        return self._sibling("units").with_suffix("")

    def _units_file(self, path: str, content: str) -> pathlib.Path:
        name = hashlib.blake2b(f"{path}\0{content}".encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()
        return self.units_dir / f"{name}.json"

    def scan_summary(self, path: str, content: str) -> tuple[str, object] | None:
        """(scan hash, the scan's small part) of a file with this content hash, if known."""
        entry = self.index.get(path)
        return (entry[1], entry[2]) if entry is not None and entry[0] == content else None

    def scan_units(self, path: str, content: str) -> object | None:
        """The units of a file's scan (one small file each: an edit rewrites only its own)."""
        doc = self._read(self._units_file(path, content))
        return doc.get("units") if doc is not None and doc.get("path") == path else None

    def store_scan(self, path: str, content: str, scan_hash: str, small: object, units: object) -> None:
        self.index[path] = (content, scan_hash, small)
        self._new_units[path] = (content, units)
        self.dirty = self.scans_dirty = True

    def vocabulary(self) -> set[str] | None:
        """The names the last taint's units bind, call as methods or read as `self.<attr>` (read on demand)."""
        doc = self._read(self._sibling("vocabulary"))
        words = doc.get("words") if doc is not None else None
        if isinstance(words, list) and all(isinstance(w, str) for w in words) and doc.get("taint") == self.taint[0]:
            return set(words)
        return None

    def set_vocabulary(self, taint_key: str, words: list[str]) -> None:
        doc = {"version": FORMAT_VERSION, "key": self.key, "taint": taint_key, "words": words}
        _write_atomically(self._sibling("vocabulary"), doc)

    def set_taint(self, key: str, plans: dict[str, list]) -> None:
        if self.taint != (key, plans):
            self.taint = (key, plans)
            self.dirty = True

    def set_seeds(self, seeds: list[str]) -> None:
        if self.seeds != seeds:
            self.seeds = list(seeds)
            self.dirty = True

    def note_digest(self, path: str, key: str, digest: str) -> None:
        """A file's analysed digest (engine.run.analysed_digest) for `key` (its contents and blanked bodies)."""
        if self.digests.get(path) != (key, digest):
            self.digests[path] = (key, digest)
            self.dirty = True

    def set_stub_errors(self, errors: list[str]) -> None:
        if self.stub_errors != errors:
            self.stub_errors = list(errors)
            self.dirty = True

    def finish(self, tree: str, results: dict[str, tuple[bool, list[list[Any]]]], programs: dict) -> None:
        """Remember this run: its tree key, every file's result, and the programs it analysed; programs of
        earlier runs are kept too, up to twice as many again (an edit undone, a branch switched back)."""
        kept = dict(programs)
        room = 2 * len(programs) + KEEP_EXTRA_PROGRAMS
        for key, entry in self.programs.items():
            if len(kept) >= room:
                break
            kept.setdefault(key, entry)
        if results and any(p not in results for p in self.digests):  # files gone from the tree
            self.digests = {p: e for p, e in self.digests.items() if p in results}
            self.dirty = True
        if tree != self.tree or results != self.results or list(kept) != list(self.programs):
            self.tree, self.results, self.programs = tree, results, kept
            self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        doc = {
            "version": FORMAT_VERSION,
            "key": self.key,
            "stub_errors": self.stub_errors,
            "seeds": self.seeds,
            "taint": list(self.taint),
            "tree": self.tree,
            "results": {p: list(r) for p, r in self.results.items()},
            "programs": self.programs,
            "digests": {p: list(e) for p, e in self.digests.items()},
        }
        if self.scans_dirty:
            head = {"version": FORMAT_VERSION, "key": self.key}
            try:
                self.units_dir.mkdir(exist_ok=True)
            except OSError:
                pass
            for path, (content, units) in self._new_units.items():
                _write_atomically(self._units_file(path, content), {**head, "path": path, "units": units})
            self._new_units.clear()
            _write_atomically(self._sibling("index"), {**head, "files": {p: list(e) for p, e in self.index.items()}})
            live = {self._units_file(p, e[0]).name for p, e in self.index.items()}
            try:
                for stale in [u for u in self.units_dir.iterdir() if u.name not in live]:
                    stale.unlink()
            except OSError:
                pass
        _write_atomically(self.file, doc)
        self.dirty = self.scans_dirty = False
        _prune(self.file.parent)


KEEP_EXTRA_PROGRAMS = 16  # beyond twice this run's programs, results of earlier runs kept
KEEP_STORES = 8  # run keys kept side by side (settings groups, recent checker versions)
KEEP_RECORDS = 64  # records of programs not in the last run (incremental.py) kept, most recent first


def _prune(directory: pathlib.Path) -> None:
    """Drop the stores of all but the most recently written run keys."""
    try:
        stores = sorted(directory.glob("results-*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return
    for old in stores[KEEP_STORES:]:
        siblings = [old.with_name(old.name.replace("results-", f"{kind}-", 1)) for kind in ("index", "vocabulary")]
        for path in [old, *siblings]:
            try:
                path.unlink()
            except OSError:
                pass
        shutil.rmtree(old.with_name(old.name.replace("results-", "units-", 1)).with_suffix(""), ignore_errors=True)
        shutil.rmtree(old.with_name(old.name.replace("results-", "records-", 1)).with_suffix(""), ignore_errors=True)


def _write_atomically(target: pathlib.Path, doc: dict) -> None:
    """Write to a temporary file beside `target`, then rename: readers see the old or the new file."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=target.parent)
        text = json.dumps(doc, separators=(",", ":"))  # dumps, not dump: the C encoder, ten times faster
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
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
