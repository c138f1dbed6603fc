"""The checker as a library: check a source string or a file with given settings."""

from __future__ import annotations

import functools
import hashlib
import os
import pathlib
import pickle
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst

from spmdcheck.analysis.context import Options
from spmdcheck.analysis.driver import analyze_module
from spmdcheck.analysis.values import Value
from spmdcheck.diagnostics.render import Diagnostic, make, render
from spmdcheck.frontend.inline_config import read_inline_config
from spmdcheck.frontend.source import ParseFailure, is_relevant, mesh_names_in, parse, syntax_error
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
    on_bind: Callable[[str, Value, cst.CSTNode, cst.Module], None] | None = None,
) -> list[Diagnostic]:
    """The diagnostics of one source text; `on_bind` observes every name binding (--show-types, hovers)."""
    settings = settings or Settings()
    registry = registry if registry is not None else load_registry(settings.stub_path)
    parsed = parse(text)
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
    ctx = analyze_module(parsed, registry, options, mesh_names_in(text), on_bind)
    diags = render(path, parsed, ctx.findings, ctx.sites, text.splitlines())
    diags += [make(path, "SPMD005", message, line) for line, message in inline.errors]
    diags = [d for d in diags if _selected(d.code, settings)]
    return sorted(diags, key=Diagnostic.sort_key)


def check_file(path: str, settings: Settings, registry: Registry | None = None) -> FileResult:
    try:
        data = pathlib.Path(path).read_bytes()
    except OSError as exc:
        return FileResult(path, [make(path, "SPMD005", f"cannot read file: {exc.strerror}")])
    if not is_relevant(data, bool(settings.mesh)):
        failure = syntax_error(data)
        if failure is None:
            return FileResult(path, skipped=True)
        return FileResult(
            path,
            [
                make(
                    path,
                    "SPMD001",
                    f"syntax error: {failure.message}; the file was not checked",
                    failure.line,
                    failure.column,
                )
            ],
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return FileResult(path, [make(path, "SPMD001", f"file is not UTF-8: {exc.reason}")])
    try:
        return FileResult(path, check_source(text, path, settings, registry))
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
