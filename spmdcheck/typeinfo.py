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
from spmdcheck.api import Settings, check_source
from spmdcheck.diagnostics.render import Diagnostic, make
from spmdcheck.frontend.inline_config import read_inline_config
from spmdcheck.rules.stubs import Registry


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
    """The on_bind observer: every (node, value) the analysis binds in the file of interest."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.module: cst.Module | None = None
        self.seen: dict[int, tuple[cst.CSTNode, str, list[Value]]] = {}

    def __call__(self, name: str, value: Value, node: cst.CSTNode, ctx: FileContext) -> None:
        if ctx.path != self.path:
            return  # a binding in another file of the program
        self.module = ctx.module
        entry = self.seen.setdefault(id(node), (node, name, []))
        entry[2].append(value)

    def bindings(self, mesh: tuple[str, ...]) -> list[Binding]:
        if self.module is None:
            return []
        positions = MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
        out: list[Binding] = []
        for node, name, values in self.seen.values():
            pos = positions.get(node)
            views = [v for v in (view_of(value, mesh) for value in values) if v is not None]
            if pos is None or not views:
                continue
            out.append(
                Binding(
                    self.path,
                    pos.start.line,
                    pos.start.column + 1,
                    pos.end.line,
                    pos.end.column + 1,
                    name,
                    merge_views(views),
                )
            )
        return sorted(out, key=lambda b: (b.line, b.column, b.name))


def infer_source(
    text: str, path: str = "<string>", settings: Settings | None = None, registry: Registry | None = None
) -> TypedFile:
    """Diagnostics and bindings of one source text (always analysed: no relevance pre-filter)."""
    settings = settings or Settings()
    collector = _Collector(path)
    diagnostics = check_source(text, path, settings, registry, on_bind=collector)
    inline = read_inline_config(text)
    mesh = inline.mesh if inline.mesh is not None else settings.mesh
    return TypedFile(path, diagnostics, collector.bindings(tuple(mesh)))


def infer_file(path: str, settings: Settings, registry: Registry | None = None) -> TypedFile:
    try:
        text = pathlib.Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return TypedFile(path, [make(path, "SPMD005", f"cannot read file: {exc}")])
    return infer_source(text, path, settings, registry)
