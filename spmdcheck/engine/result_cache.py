"""The on-disk result cache: `.spmdcheck_cache/` in the project root, else the user cache dir.

A file's diagnostics are reused when nothing they can depend on changed: the run key (tool
version and source, settings, stub files, Python) and the file's content hash, and the content
hashes of every checked file it imports, directly or not (whole-program analysis reads them).
The store is one JSON document per run key with a version field, written atomically; it is data
only (never pickle), and an entry that does not have the expected shape is ignored.

The folder can come with the project (a pull request can add one), so nothing in it is trusted that
this account did not write on this machine: every file is sealed with the user's key and read only
through `cache_trust` (no symlink, no FIFO or device, a size cap), every field read is validated, and a
cache folder tracked by git is not used at all (docs/robustness.md, "The caches trust only themselves").
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from spmdcheck.cache_trust import (
    is_own_folder,
    make_own_folder,
    read_regular,
    secret_key,
    unseal,
    user_cache_root,
    write_sealed,
)

if TYPE_CHECKING:
    from spmdcheck.diagnostics.render import Diagnostic
    from spmdcheck.settings import Settings

# 8: every file sealed with the user's key (cache_trust); 9: call chain steps have a column; 10: the pre-pass's
# layout words (its seeds and scans); 11: the taint's layout sources, f-string text as prose (scans' words); 12: a
# unit's decorators, a function's writes and an import unit told apart (scans); 13: what the units that matter bind
# and name (the vocabulary)
FORMAT_VERSION = 13
DIRNAME = ".spmdcheck_cache"
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by spmdcheck.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n"
)


OWNER_FILE = ".owner"  # sealed: which folder (path, device, inode) this account made its cache
STORE_CAP = 512 << 20  # bytes read at most from a store file (results, index, vocabulary)


class Vocabulary(NamedTuple):
    """What a taint's units name, kept beside it so that the next run can tell an edit no taint can see."""

    words: frozenset[str]  # every name a unit binds, calls as a method or reads as `self.<attr>`
    matter_binds: frozenset[str]  # the names the units that matter bind
    matter_words: frozenset[str]  # the words the units that matter name
ENTRY_CAP = 64 << 20  # from one file of units/ or records/
_SMALL_CAP = 4096  # CACHEDIR.TAG, .gitignore, the owner file
MAX_POSITION = 10**7  # lines and columns beyond this are no position the checker reports


def _prepare(directory: pathlib.Path) -> bool:
    """Give an own cache folder its CACHEDIR.TAG and a `.gitignore` of `*`, repairing them when they are
    not exactly that (a full disk leaves them empty; a symlink or FIFO in their place is replaced, never
    written through); False when the folder is not writable."""
    for name, text in (("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", "# created by spmdcheck\n*\n")):
        target = directory / name
        if read_regular(target, _SMALL_CAP) != text.encode():
            if not _replace_with(target, text.encode()):
                return False
    return os.access(directory, os.W_OK)


def _replace_with(target: pathlib.Path, data: bytes) -> bool:
    """Write `data` to a temporary file beside `target`, then rename it over whatever `target` is."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=target.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
        return True
    except OSError:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return False


def _owner_stamp(directory: pathlib.Path) -> bytes | None:
    try:
        st = os.lstat(directory)
    except OSError:
        return None
    return f"{os.path.realpath(directory)}\0{st.st_dev}\0{st.st_ino}".encode("utf-8", "surrogateescape")


def _owned_cache(directory: pathlib.Path, key: bytes) -> bool:
    """The folder holds this account's seal for its own path, device and inode: this account made it
    here (a clone, checkout or copy of a cache folder is a new inode, and has no valid seal)."""
    stamp = _owner_stamp(directory)
    data = read_regular(directory / OWNER_FILE, _SMALL_CAP)
    return stamp is not None and data is not None and unseal(key, OWNER_FILE, data) == stamp


def _claim(directory: pathlib.Path, key: bytes) -> bool:
    stamp = _owner_stamp(directory)
    return stamp is not None and write_sealed(directory / OWNER_FILE, key, OWNER_FILE, stamp)


def tracked_by_git(directory: pathlib.Path) -> bool:
    """Whether git tracks a file under `directory`. Asked only of a folder this account did not make
    (`_owned_cache`), so once per new folder, never on a warm run. fsmonitor is turned off: a hostile
    repository's own config must not make this call run a program."""
    import subprocess  # (a warm run never asks: not imported at start-up)

    try:
        proc = subprocess.run(
            ["git", "-c", "core.fsmonitor=false", "ls-files", "-z", "--", directory.name],
            cwd=directory.parent,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return False  # no git, or no answer: the folder's files are still never trusted unsealed
    return proc.returncode == 0 and bool(proc.stdout)


def _usable(directory: pathlib.Path, key: bytes) -> bool:
    """`directory` is (or now is) this account's cache folder, ready for use."""
    if os.path.lexists(directory):
        if not is_own_folder(directory):  # a symlink, a file, another account's folder: left alone
            return False
        if not _owned_cache(directory, key):
            if tracked_by_git(directory):
                print(
                    f"spmdcheck: warning: {directory} is tracked by git: it is not used as a cache",
                    file=sys.stderr,
                )
                return False
            if not _claim(directory, key):
                return False
    else:
        try:
            directory.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            return False
        if not make_own_folder(directory) or not _claim(directory, key):
            return False
    return _prepare(directory)


def locate(root: pathlib.Path) -> pathlib.Path | None:
    """`<root>/.spmdcheck_cache`, or a folder of the user cache dir named after the root; None when
    neither can be used, or when there is no key to seal the cache with (then nothing is cached)."""
    key = secret_key()
    if key is None:
        return None
    local = root / DIRNAME
    if _usable(local, key):
        return local
    digest = hashlib.sha256(str(root.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    fallback = user_cache_root() / "projects" / digest
    return fallback if _usable(fallback, key) else None


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
    secret: bytes | None = None  # the user's key (cache_trust): without it nothing is read or written
    _index: dict[str, tuple[str, str, object]] | None = None
    _new_units: dict[str, tuple[str, object]] = field(default_factory=dict)
    programs: dict[str, dict[str, list[list[Any]]]] = field(default_factory=dict)
    tree: str = ""
    results: dict[str, tuple[bool, list[list[Any]]]] = field(default_factory=dict)
    stub_errors: list[str] | None = None
    seeds: list[list[str]] | None = None  # the pre-pass's words (prepass.SeedWords.to_plain): from stubs, settings
    taint: tuple[str, dict[str, list]] = ("", {})
    dirty: bool = False
    scans_dirty: bool = False
    digests: dict[str, tuple[str, str]] = field(default_factory=dict)  # path -> (contents+blanks, analysed digest)
    _own_folders: dict[pathlib.Path, bool] = field(default_factory=dict)

    @classmethod
    def open(cls, directory: pathlib.Path, key: str) -> ResultCache:
        """The store of run `key` in `directory`, a folder `locate` returned (an own folder)."""
        cache = cls(directory / f"results-{key[:24]}.json", key, secret_key())
        doc = cache._read(cache.file, STORE_CAP)
        if doc is None:
            return cache
        errors = doc.get("stub_errors")
        if isinstance(errors, list) and all(isinstance(e, str) for e in errors):
            cache.stub_errors = errors
        seeds = doc.get("seeds")
        if isinstance(seeds, list):  # read by prepass.SeedWords.from_plain, which checks its shape
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

    def _name(self, path: pathlib.Path) -> str:
        """`path`'s name inside the cache folder, which its seal covers (`units-<key>/<hash>.json`)."""
        return path.name if path.parent == self.file.parent else f"{path.parent.name}/{path.name}"

    def _in_own_folder(self, path: pathlib.Path, create: bool = False) -> bool:
        """`path` is in the cache folder or one of its own (not symlinked) subfolders, made if `create`."""
        folder = path.parent
        if folder == self.file.parent or self._own_folders.get(folder):
            return True
        own = make_own_folder(folder) if create else is_own_folder(folder)
        if own or create:
            self._own_folders[folder] = own
        return own

    def _read(self, path: pathlib.Path, cap: int = ENTRY_CAP) -> dict | None:
        """A document this account wrote for this run key at `path`, or None (absent, foreign, damaged)."""
        if self.secret is None or not self._in_own_folder(path):
            return None
        data = read_regular(path, cap)
        payload = unseal(self.secret, self._name(path), data) if data is not None else None
        if payload is None:
            return None
        try:
            doc = json.loads(payload)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return None
        if isinstance(doc, dict) and doc.get("version") == FORMAT_VERSION and doc.get("key") == self.key:
            return doc
        return None

    def _write(self, target: pathlib.Path, doc: dict) -> None:
        """Seal and write `doc` atomically, only inside the cache folder and its own subfolders."""
        if self.secret is None or not self._in_own_folder(target, create=True):
            return
        try:
            payload = json.dumps(doc, separators=(",", ":")).encode()  # dumps: the C encoder, ten times faster
        except (TypeError, ValueError):
            return
        write_sealed(target, self.secret, self._name(target), payload)

    def _sibling(self, kind: str) -> pathlib.Path:
        return self.file.with_name(self.file.name.replace("results-", f"{kind}-", 1))

    @property
    def index(self) -> dict[str, tuple[str, str, object]]:
        if self._index is None:
            self._index = {}
            for path, entry in _dict((self._read(self._sibling("index"), STORE_CAP) or {}).get("files")).items():
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
        doc = {"version": FORMAT_VERSION, "key": self.key, "shape": shape, "record": record}
        self._write(self._record_file(shape), doc)

    def prune_records(self, live: Iterable[str]) -> None:
        """Keep the records of this run's programs, and of KEEP_RECORDS others, most recent first."""
        keep = {self._record_file(shape).name for shape in live}
        if not is_own_folder(self.records_dir):  # a symlink to elsewhere: nothing there is ours to delete
            return
        _unlink_oldest(self.records_dir, keep, KEEP_RECORDS)

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

    def vocabulary(self) -> Vocabulary | None:
        """What the last taint's units name (prepass.spread), read on demand: None without it."""
        doc = self._read(self._sibling("vocabulary"), STORE_CAP)
        if doc is None or doc.get("taint") != self.taint[0]:
            return None
        lists = [doc.get(field) for field in ("words", "matter_binds", "matter_words")]
        if not all(isinstance(ws, list) and all(isinstance(w, str) for w in ws) for ws in lists):
            return None
        return Vocabulary(*(frozenset(ws) for ws in lists))  # type: ignore[arg-type]

    def set_vocabulary(self, taint_key: str, vocabulary: Vocabulary) -> None:
        doc = {
            "version": FORMAT_VERSION,
            "key": self.key,
            "taint": taint_key,
            "words": sorted(vocabulary.words),
            "matter_binds": sorted(vocabulary.matter_binds),
            "matter_words": sorted(vocabulary.matter_words),
        }
        self._write(self._sibling("vocabulary"), doc)

    def set_taint(self, key: str, plans: dict[str, list]) -> None:
        if self.taint != (key, plans):
            self.taint = (key, plans)
            self.dirty = True

    def set_seeds(self, seeds: list[list[str]]) -> None:
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
            for path, (content, units) in self._new_units.items():
                self._write(self._units_file(path, content), {**head, "path": path, "units": units})
            self._new_units.clear()
            self._write(self._sibling("index"), {**head, "files": {p: list(e) for p, e in self.index.items()}})
            live = {self._units_file(p, e[0]).name for p, e in self.index.items()}
            if is_own_folder(self.units_dir):  # a symlink to elsewhere: nothing there is ours to delete
                _unlink_oldest(self.units_dir, live, 0)
        self._write(self.file, doc)
        self.dirty = self.scans_dirty = False
        _prune(self.file.parent)


KEEP_EXTRA_PROGRAMS = 16  # beyond twice this run's programs, results of earlier runs kept
KEEP_STORES = 8  # run keys kept side by side (settings groups, recent checker versions)
KEEP_RECORDS = 64  # records of programs not in the last run (incremental.py) kept, most recent first


def _prune(directory: pathlib.Path) -> None:
    """Drop the stores of all but the most recently written run keys (names only: a symlink is removed,
    never followed; rmtree refuses a symlinked folder)."""
    try:
        stores = [(os.lstat(p).st_mtime, p) for p in directory.glob("results-*.json")]
    except OSError:
        return
    stores.sort(reverse=True)
    for _, old in stores[KEEP_STORES:]:
        siblings = [old.with_name(old.name.replace("results-", f"{kind}-", 1)) for kind in ("index", "vocabulary")]
        for path in [old, *siblings]:
            try:
                path.unlink()
            except OSError:
                pass
        for kind in ("units", "records"):
            folder = old.with_name(old.name.replace("results-", f"{kind}-", 1)).with_suffix("")
            shutil.rmtree(folder, ignore_errors=True)


def _unlink_oldest(folder: pathlib.Path, keep: set[str], room: int) -> None:
    """In an own folder: unlink the entries not in `keep` beyond the `room` most recently written."""
    try:
        others = []
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name not in keep:
                    st = entry.stat(follow_symlinks=False)
                    others.append((st.st_mtime, stat.S_ISDIR(st.st_mode), entry.path))
    except OSError:
        return
    others.sort(reverse=True)
    for _, is_dir, stale in others[room:]:
        if not is_dir:
            try:
                os.unlink(stale)
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


SEVERITIES = frozenset(("error", "warning", "note"))


def _position(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_POSITION


def _diagnostic_shape(d: object) -> bool:
    """A stored diagnostic as `to_plain` writes it: positions in range, a code that exists under its own
    name, a severity that exists, strings, and suggestions of the same kind."""
    from spmdcheck.diagnostics.codes import CODES

    if not (isinstance(d, list) and len(d) in (9, 10)):
        return False
    line, column, end_line, end_column, code, name, severity, message, suggestions, *chain = d
    if chain and not isinstance(chain[0], list):
        return False
    for site in chain[0] if chain else ():  # the call chain: [path, line, column] triples
        if not (isinstance(site, list) and len(site) == 3 and isinstance(site[0], str)):
            return False
        if not (_position(site[1]) and _position(site[2])):
            return False
    if not all(_position(i) for i in (line, column, end_line, end_column)) or not isinstance(message, str):
        return False
    info = CODES.get(code) if isinstance(code, str) else None
    if info is None or name != info.name or severity not in SEVERITIES:
        return False
    if not isinstance(suggestions, list):
        return False
    for s in suggestions:
        if not (isinstance(s, list) and len(s) in (3, 4) and isinstance(s[0], str) and isinstance(s[1], str)):
            return False
        if len(s) == 4 and not isinstance(s[3], bool):  # safe: a fix --fix applies without --unsafe-fixes
            return False
        span = s[2]
        if span is not None and not (isinstance(span, list) and len(span) == 4 and all(_position(i) for i in span)):
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
            [[s.message, s.replacement, list(s.span) if s.span is not None else None, s.safe] for s in d.suggestions],
            [list(site) for site in d.chain],
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
            [SuggestionOut(m, r, tuple(span) if span else None, *safe) for m, r, span, *safe in suggestions],
            chain=tuple((site[0], site[1], site[2]) for site in chain[0]) if chain else (),
        )
        for line, column, end_line, end_column, code, name, severity, message, suggestions, *chain in plain
    ]
