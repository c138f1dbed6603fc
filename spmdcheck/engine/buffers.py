"""One file checked with the rest of its program when its text is not (only) on disk: an editor's buffer, with
the unsaved buffers of other open files, or `check --stdin-filename F -`; and `--show-types`, which types the
files named with the rest of their program (from disk, or stdin's text) as a check analyses them.

The command line analyses a file with the other files of its packages (`cli.project.project_context`): their
callers give its functions their types, and a finding in it may come from a helper elsewhere. Here the same
program is formed from texts: the file's own text, the open buffers over the files on disk, restricted (as
`plan.plan_programs` does with a focus) to the files that import it, directly or not, and what they import.
Every file is analysed whole (no pre-pass: it reads the files from disk), which finds what the pre-pass
finds; the result cache is not used.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spmdcheck.engine.check import check_sources
from spmdcheck.engine.typeinfo import BindingCollector, TypedFile
from spmdcheck.frontend.source import ParseFailure
from spmdcheck.frontend.source_file import SourceFile
from spmdcheck.program.graph import build_graph

if TYPE_CHECKING:
    from spmdcheck.analysis.context import BindObserver
    from spmdcheck.diagnostics.render import Diagnostic
    from spmdcheck.rules.stubs import Registry
    from spmdcheck.settings import Settings


@dataclass
class DiskTexts:
    """Texts of files on disk, read again only when their modification time or size changed (a language
    server checks the same program on every keystroke)."""

    texts: dict[str, tuple[tuple[int, int], str | None]] = field(default_factory=dict)

    def read(self, path: str) -> str | None:
        try:
            info = os.stat(path)
        except OSError:
            return None
        stamp = (info.st_mtime_ns, info.st_size)
        cached = self.texts.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        try:
            source = SourceFile.read(path)
        except OSError:
            return None
        text = None if isinstance(source, ParseFailure) else source.text
        self.texts[path] = (stamp, text)
        return text


def program_texts(
    path: str,
    text: str,
    context: list[str],
    buffers: Mapping[str, str] | None = None,
    disk: DiskTexts | None = None,
) -> dict[str, str]:
    """The texts of `path`'s program: `path` first, then each context file that imports it (directly or not)
    and every file those import. `buffers` (unsaved editor texts, by path as in `context`) win over the disk;
    a context file that cannot be read or decoded is left out, as the command line leaves it unanalysed."""
    return programs_texts({path: text}, context, buffers, disk)


def programs_texts(
    focus: Mapping[str, str],
    context: list[str],
    buffers: Mapping[str, str] | None = None,
    disk: DiskTexts | None = None,
) -> dict[str, str]:
    """`program_texts` for several files (`focus`: path -> text, first in the result): the files that import
    one of them (directly or not) and every file those import. A context file with the module name of a
    focus file is left out (one program holds one module of each name)."""
    buffers = buffers or {}
    disk = disk or DiskTexts()
    texts = dict(focus)
    for other in context:
        other_text = buffers.get(other)
        if other_text is None:
            other_text = disk.read(other)
        if other_text is not None and other not in texts:
            texts[other] = other_text
    if len(texts) == len(focus):
        return texts
    graph = build_graph(texts)
    name_of = {m.path: m.name for m in graph.modules.values()}
    path_of = {m.name: m.path for m in graph.modules.values()}
    starts = graph.importers_closure([name_of[p] for p in focus if p in name_of])
    wanted = set(starts)
    for name in starts:
        wanted |= graph.imports_closure(name)
    paths = {path_of[n] for n in wanted if n in path_of}
    return {p: t for p, t in texts.items() if p in paths or p in focus}


def check_in_program(
    path: str,
    text: str,
    settings: Settings,
    registry: Registry | None,
    context: list[str],
    buffers: Mapping[str, str] | None = None,
    on_bind: BindObserver | None = None,
    disk: DiskTexts | None = None,
) -> tuple[list[Diagnostic], list[str]]:
    """`path`'s diagnostics when checked with its program (see `program_texts`), and the program's paths."""
    texts = program_texts(path, text, context, buffers, disk)
    return check_sources(texts, settings, registry, on_bind=on_bind)[path], list(texts)


def typed_in_program(
    paths: list[str],
    settings: Settings,
    registry: Registry | None,
    context: list[str],
    texts: Mapping[str, str] | None = None,
) -> list[TypedFile]:
    """`--show-types`: the diagnostics and bindings of `paths` (files of distinct module names), analysed with
    the rest of their program among `context` (see `programs_texts`), in the given order. `texts` (stdin's)
    win over the disk; a file named that cannot be read is an SPMD005 diagnostic of its own."""
    from spmdcheck.diagnostics.render import diagnostic_of
    from spmdcheck.diagnostics.violations.inputs import ConfigError

    focus: dict[str, str] = {}
    unreadable: dict[str, TypedFile] = {}
    for path in paths:
        if texts is not None and path in texts:
            focus[path] = texts[path]
            continue
        try:
            with open(path, encoding="utf-8") as fh:
                focus[path] = fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            unreadable[path] = TypedFile(path, [diagnostic_of(path, ConfigError("unreadable", str(exc)))])
    collector = BindingCollector()
    program = programs_texts(focus, context) if focus else {}
    diagnostics = check_sources(program, settings, registry, on_bind=collector) if program else {}
    return [
        unreadable.get(path) or TypedFile(path, diagnostics.get(path, []), collector.bindings(path)) for path in paths
    ]
