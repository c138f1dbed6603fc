"""Inferred types of every name binding in a source file: `check --show-types` and the editor hover.

One analysis gives both the diagnostics and the bindings; the analysis is
only observed (through its `on_bind` hook), never changed.
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from spmdcheck.analysis.context import FileContext
from spmdcheck.analysis.reveal import TypeView, merge_views, view_of
from spmdcheck.analysis.values import Value
from spmdcheck.diagnostics.render import Diagnostic, diagnostic_of
from spmdcheck.diagnostics.violations.inputs import ConfigError
from spmdcheck.engine.check import check_source, check_sources
from spmdcheck.rules.stubs import Registry
from spmdcheck.settings import Settings


@dataclass(frozen=True)
class Binding:
    """A name bound at a position (1-based line and column), with what the checker inferred for it."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    name: str
    view: TypeView

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "name": self.name,
            "type": self.view.forward,
            "grad_type": self.view.gradient,
            "axes": self.view.forward_axes,
            "grad_axes": self.view.gradient_axes,
            "requires_grad": self.view.requires_grad,
        }


@dataclass
class TypedFile:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    bindings: list[Binding] = field(default_factory=list)


class _Collector:
    """The on_bind observer: every (node, value) the analysis binds, per file; views made afterwards."""

    def __init__(self) -> None:
        self.modules: dict[str, cst.Module] = {}
        self.meshes: dict[str, tuple[str, ...]] = {}  # the mesh each file was analysed with (its header's or the run's)
        self.seen: dict[str, dict[int, tuple[cst.CSTNode, str, list[Value]]]] = {}

    def __call__(self, name: str, value: Value, node: cst.CSTNode, ctx: FileContext) -> None:
        self.modules[ctx.path] = ctx.module
        self.meshes[ctx.path] = ctx.options.mesh
        entry = self.seen.setdefault(ctx.path, {}).setdefault(id(node), (node, name, []))
        entry[2].append(value)

    def bindings(self, path: str) -> list[Binding]:
        module = self.modules.get(path)
        if module is None:
            return []
        mesh = tuple(self.meshes[path])
        positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        out: list[Binding] = []
        for node, name, values in self.seen[path].values():
            pos = positions.get(node)
            views = [v for v in (view_of(value, mesh) for value in values) if v is not None]
            if pos is None or not views:
                continue
            out.append(
                Binding(
                    path,
                    pos.start.line,
                    pos.start.column + 1,
                    pos.end.line,
                    pos.end.column + 1,
                    name,
                    merge_views(views),
                )
            )
        return sorted(out, key=lambda b: (b.line, b.column, b.name))


BindingCollector = _Collector  # for callers that form the program themselves (the editor: `engine.buffers`)


def infer_source(
    text: str, path: str = "<string>", settings: Settings | None = None, registry: Registry | None = None
) -> TypedFile:
    """Diagnostics and bindings of one source text on its own (always analysed: no relevance pre-filter)."""
    settings = settings or Settings()
    collector = _Collector()
    diagnostics = check_source(text, path, settings, registry, on_bind=collector)
    return TypedFile(path, diagnostics, collector.bindings(path))


def infer_files(paths: list[str], settings: Settings, registry: Registry | None = None) -> list[TypedFile]:
    """Files analysed as one program (calls and imports between them are followed), in the given order."""
    texts: dict[str, str] = {}
    unreadable: dict[str, TypedFile] = {}
    for path in paths:
        try:
            texts[path] = pathlib.Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            unreadable[path] = TypedFile(path, [diagnostic_of(path, ConfigError("unreadable", str(exc)))])
    collector = _Collector()
    diagnostics = check_sources(texts, settings, registry, on_bind=collector) if texts else {}
    return [
        unreadable.get(path) or TypedFile(path, diagnostics.get(path, []), collector.bindings(path)) for path in paths
    ]
