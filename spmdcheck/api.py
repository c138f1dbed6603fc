"""The checker as a library: check a source string or a file with given settings."""

from __future__ import annotations

import functools
import hashlib
import os
import pathlib
import pickle
import traceback
from dataclasses import dataclass, field

from spmdcheck import prepass
from spmdcheck.analysis.context import Options
from spmdcheck.analysis.driver import analyze_module
from spmdcheck.diagnostics.render import Diagnostic, make, render
from spmdcheck.frontend.inline_config import read_inline_config
from spmdcheck.frontend.source import ParseFailure, mesh_names_in, parse
from spmdcheck.prepass import blank_bodies
from spmdcheck.rules.stubs import Registry, load_stub_dirs

SHIPPED_STUBS_CANDIDATES = (
    pathlib.Path(__file__).resolve().parent / "_stubs",  # installed wheel
    pathlib.Path(__file__).resolve().parent.parent / "stubs",  # source checkout / editable install
)


def shipped_stubs() -> pathlib.Path:
    for candidate in SHIPPED_STUBS_CANDIDATES:
        if candidate.is_dir():
            return candidate
    return SHIPPED_STUBS_CANDIDATES[-1]


@dataclass(frozen=True)
class Settings:
    mesh: tuple[str, ...] = ()
    strict: bool = False
    stub_path: tuple[str, ...] = ()
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()


@dataclass
class FileResult:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    skipped: bool = False


def _cache_dir() -> pathlib.Path:
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
    cache = _cache_dir() / f"registry-{stamp.hexdigest()[:24]}.pickle"
    try:
        with cache.open("rb") as fh:
            registry = pickle.load(fh)
        if isinstance(registry, Registry):
            return registry
    except (OSError, pickle.PickleError, EOFError, AttributeError, ImportError):
        pass
    registry = load_stub_dirs(dirs)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        with tmp.open("wb") as fh:
            pickle.dump(registry, fh)
        tmp.replace(cache)
    except OSError:
        pass  # a read-only home: just no cache
    return registry


def _selected(code: str, settings: Settings) -> bool:
    from spmdcheck.diagnostics.codes import CODES

    def matches(pattern: str) -> bool:
        p = pattern.strip()
        if p.upper() == "ALL":
            return True
        return code.startswith(p.upper()) or CODES[code].name == p.lower()

    if settings.select and not any(matches(p) for p in settings.select):
        return False
    return not any(matches(p) for p in settings.ignore)


def check_source(
    text: str,
    path: str = "<string>",
    settings: Settings | None = None,
    registry: Registry | None = None,
    blank: tuple[tuple[int, int], ...] = (),
) -> list[Diagnostic]:
    """Diagnostics of one file's text. `blank`: line spans of function bodies the pre-pass proved
    inert; they are emptied before libcst parses the text (positions elsewhere do not move)."""
    settings = settings or Settings()
    registry = registry if registry is not None else load_registry(settings.stub_path)
    parsed = parse(blank_bodies(text, blank)) if blank else parse(text)
    if blank and isinstance(parsed, ParseFailure):
        parsed = parse(text)  # never report a syntax error the blanking made
    if isinstance(parsed, ParseFailure):
        diags = [
            make(
                path, "SPMD001", f"syntax error: {parsed.message}; the file was not checked", parsed.line, parsed.column
            )
        ]
        return [d for d in diags if _selected(d.code, settings)]
    inline = read_inline_config(text)
    options = Options(
        mesh=inline.mesh if inline.mesh is not None else settings.mesh,
        strict=inline.strict if inline.strict is not None else settings.strict,
    )
    ctx = analyze_module(parsed, registry, options, mesh_names_in(text))
    diags = render(path, parsed, ctx.findings, ctx.sites, text.splitlines())
    diags += [make(path, "SPMD005", message, line) for line, message in inline.errors]
    diags = [d for d in diags if _selected(d.code, settings)]
    return sorted(diags, key=Diagnostic.sort_key)


def check_file(
    path: str, settings: Settings, registry: Registry | None = None, plan: prepass.Plan | None = None
) -> FileResult:
    """One file's result; `plan` (from the pre-pass over the whole run) may skip it or blank bodies."""
    if plan is not None and plan.skip:
        return FileResult(path, skipped=True)
    try:
        data = pathlib.Path(path).read_bytes()
    except OSError as exc:
        return FileResult(path, [make(path, "SPMD005", f"cannot read file: {exc.strerror}")])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return FileResult(path, [make(path, "SPMD001", f"file is not UTF-8: {exc.reason}")])
    try:
        return FileResult(path, check_source(text, path, settings, registry, plan.blank if plan else ()))
    except RecursionError:
        return FileResult(path, [make(path, "SPMD001", "file is too deeply nested to analyse")])
    except Exception as exc:  # noqa: BLE001 - one file's bug in the checker must not stop the run
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return FileResult(
            path,
            [
                make(
                    path,
                    "SPMD000",
                    f"internal error: {type(exc).__name__}: {exc} "
                    f"(at {pathlib.Path(where.filename).name}:{where.lineno})",
                )
            ],
        )


def check_sources(
    sources: dict[str, str], settings: Settings | None = None, registry: Registry | None = None
) -> dict[str, list[Diagnostic]]:
    """Check files as one program: `sources` maps each path to its text; module names come from the
    paths' package folders (a folder is a package when `<folder>/__init__.py` is one of the keys or
    exists on disk). Returns each path's diagnostics, sorted.
    """
    settings = settings or Settings()
    registry = registry if registry is not None else load_registry(settings.stub_path)
    return {path: check_source(text, path, settings, registry) for path, text in sources.items()}


def check_files(files: list[str], settings: Settings, registry: Registry, jobs: int = 0) -> list[FileResult]:
    """Check files on `jobs` processes (0: one per core): the pre-pass over all of them, then libcst
    only where it found something to check. Results come in the order of `files`."""
    jobs = min(jobs or (os.cpu_count() or 1), len(files) or 1)
    with _pool(jobs, settings, registry) as run:
        if not prepass.enabled():
            return run(_check_one, [(f, None) for f in files])
        seeds = prepass.seed_words(registry, bool(settings.mesh))
        scans = run(_scan_one, [(f, seeds) for f in files])
        edges = _import_edges(files) if prepass.CROSS_FILE else None
        for group in prepass.groups(scans, prepass.CROSS_FILE, edges):
            prepass.spread(group)
        plans = [prepass.plan(s) for s in scans]
        todo = [(f, p) for f, p in zip(files, plans) if not p.skip]
        done = {r.path: r for r in run(_check_one, todo)}
        return [done.get(f) or FileResult(f, skipped=True) for f in files]


def _import_edges(files: list[str]) -> dict[str, set[str]]:
    from spmdcheck.program.graph import build_graph

    sources = {}
    for f in files:
        try:
            sources[f] = pathlib.Path(f).read_bytes()
        except OSError:
            continue
    graph = build_graph(sources)
    return {graph.modules[m].path: {graph.modules[t].path for t in ts} for m, ts in graph.edges.items()}


_WORKER_STATE: tuple[Settings, Registry] | None = None


def _scan_one(item: tuple[str, frozenset[str]]) -> prepass.FileScan:
    path, seeds = item
    try:
        data = pathlib.Path(path).read_bytes()
    except OSError:
        return prepass.FileScan(path, whole=True)  # check_file reports it
    return prepass.scan(path, data, seeds)


def _check_one(item: tuple[str, prepass.Plan | None]) -> FileResult:
    settings, registry = _WORKER_STATE  # type: ignore[misc]
    return check_file(item[0], settings, registry, item[1])


class _pool:  # noqa: N801 - used as a context manager: `with _pool(...) as run`
    """`run(fn, items)` in order, on forked workers sharing the parent's settings and registry."""

    def __init__(self, jobs: int, settings: Settings, registry: Registry) -> None:
        self.jobs, self.settings, self.registry = jobs, settings, registry
        self.pool = None

    def __enter__(self):  # noqa: ANN204
        global _WORKER_STATE
        _WORKER_STATE = (self.settings, self.registry)
        return self.run

    def run(self, fn, items: list):  # noqa: ANN001, ANN201
        if self.jobs > 1 and len(items) >= 8 and self.pool is None:
            import multiprocessing as mp

            try:  # started on first need: a small run never pays for the workers
                self.pool = mp.get_context("fork").Pool(self.jobs)
            except (ValueError, OSError):
                self.jobs = 1
        if self.pool is None or len(items) < 8:
            return [fn(item) for item in items]
        # Big files first, so one large file does not end the run alone on one core.
        order = sorted(range(len(items)), key=lambda i: -_size(items[i][0]))
        out = self.pool.map(fn, [items[i] for i in order], chunksize=1)
        result: list = [None] * len(items)
        for i, r in zip(order, out):
            result[i] = r
        return result

    def __exit__(self, *exc) -> None:  # noqa: ANN002
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
