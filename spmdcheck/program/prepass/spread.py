"""The taint over the units of a run, to a fixed point, and what it leaves to libcst: the bodies to blank."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from spmdcheck.program.prepass.scan import FileScan, Unit


def spread(scans: list[FileScan]) -> None:
    """Taint to a fixed point over the units of a run (see the package docstring).

    Two ways to matter: a *source* may make a type or issue a collective (it names a seed, or
    reads a name a source binds: it may call it or read its value), so whatever reads it is a
    source too; an *exposed* unit may receive a typed value (a source or exposed unit names what
    it binds: it may be called with typed arguments), and so may whatever it names in turn.
    A name resolves in its own file and in the checked modules that file imports (and, through
    `import *`, the modules those re-export), never anywhere else.

    A layout (a placement) is no type: it becomes one only at a boundary, itself a source. So a unit naming
    a layout, or reading what a layout source binds, is a *layout source* once it matters (it is kept, and
    its file is checked: a library's functions are followed only where typed values flow in), and what it
    binds makes its readers layout units, not sources: a reader nothing that matters names never reaches a
    boundary (DTensor's own sharding rules name placements everywhere and are left out).
    """
    taint = _Taint(scans)
    for i, s in enumerate(scans):
        for u in s.units:
            if u.source:
                taint.matter(i, u, True)
    while taint.step():
        pass


class _Taint:
    """The state of `spread`: what each file can see, and what the units that matter bind and name so far."""

    def __init__(self, scans: list[FileScan]) -> None:
        self.scans = scans
        self.reach = _reach(scans)  # the files each file's names can come from
        self.bound: list[set[str]] = [set() for _ in scans]  # names each file's sources bind
        self.layout_bound: list[set[str]] = [set() for _ in scans]  # names each file's layout sources bind
        self.layout_sources: set[int] = set()  # ids of the units that are sources only as layouts
        self.named: list[set[str]] = [set() for _ in scans]  # words each file's units that matter mention
        # names each file's units that matter define (not imports: a library's state and decorators are not read)
        self.kept: list[set[str]] = [set() for _ in scans]
        self.anywhere: set[str] = set()  # words of every unit that matters: methods are called through objects
        self.classes = [(i, u) for i, s in enumerate(scans) for u in s.units if u.members]
        self.class_names_units: list[dict[str, list[Unit]]] = [{} for _ in scans]
        for i, u in self.classes:
            for name in u.binds:
                self.class_names_units[i].setdefault(name, []).append(u)
        self.class_names = [set(d) for d in self.class_names_units]
        self.writers = [(i, u) for i, s in enumerate(scans) for u in s.units if u.writes]
        self.decorated = [(i, u) for i, s in enumerate(scans) for u in s.units if u.decorators]

    def matter(self, i: int, u: Unit, source: bool) -> None:
        if source:
            u.source = True
            self.layout_sources.discard(id(u))
            self.bound[i] |= u.binds
        elif u.layout:  # a unit naming a layout makes one wherever it is run: a (layout) source once it matters
            u.source = True
            self.layout_sources.add(id(u))
            self.layout_bound[i] |= u.binds
        else:
            u.exposed = True
        self.named[i] |= u.words
        if not u.imports_only:
            self.kept[i] |= u.binds
        self.anywhere.update(u.words)

    def step(self) -> bool:
        """One round of every rule, in order; whether any unit came to matter."""
        changed = self._readers_of_sources()
        changed |= self._readers_of_layouts()
        changed |= self._classes_of_sources()
        changed |= self._readers_of_typed_attributes()
        changed |= self._named_by_what_matters()
        changed |= self._classes_written_by_sources()
        changed |= self._registered_where_code_that_matters_reads()
        changed |= self._methods_named_anywhere()
        changed |= self._methods_run_by_objects()
        return changed

    def _readers_of_sources(self) -> bool:
        changed = False
        for i, s in enumerate(self.scans):
            visible = self._visible(self.bound, i)
            for u in s.units:
                if not u.source and not u.words.isdisjoint(visible):
                    self.matter(i, u, True)
                    visible |= u.binds
                    changed = True
        return changed

    def _visible(self, bound: list[set[str]], i: int) -> set[str]:
        """The names `bound` holds for the files file `i` can read from (a new set: callers grow it)."""
        visible: set[str] = set()
        for j in self.reach[i]:
            visible |= bound[j]
        return visible

    def _readers_of_layouts(self) -> bool:
        """A unit reading what a layout source binds carries a layout: a layout source once it matters."""
        changed = False
        for i, s in enumerate(self.scans):
            visible = self._visible(self.layout_bound, i)
            if not visible:
                continue
            for u in s.units:
                if not u.source and not u.words.isdisjoint(visible):
                    changed |= self._carries_layout(i, u)
                    if u.source:
                        visible |= u.binds
        return changed

    def _carries_layout(self, i: int, u: Unit) -> bool:
        """Mark `u` a layout unit; whether that changed what matters (it did matter: it is a layout source)."""
        u.layout = True
        if u.matters and not u.source:
            self.matter(i, u, False)
            return True
        return False

    def _classes_of_sources(self) -> bool:
        changed = False
        for i, u in self.classes:
            if u.source:
                continue
            if any(m.source and id(m) not in self.layout_sources for m in u.members):
                self.matter(i, u, True)  # its name now leads to a source
                changed = True
            elif not u.layout and any(m.source for m in u.members):
                changed |= self._carries_layout(i, u)  # its objects make layouts
        return changed

    def _readers_of_typed_attributes(self) -> bool:
        """`self.<attr>` set or read by a source method may hold a type in every method of the class and of its
        subclasses (every method is checked on an object its `__init__` built); `self.<method>` and
        `super().<method>` of a source method is a source."""
        changed = False
        for i, u in self.classes:
            typed, laid = self._source_attrs(u)
            for j in self.reach[i]:
                for name in u.words & self.class_names[j]:
                    for base in self.class_names_units[j][name]:
                        if base is not u:
                            base_typed, base_laid = self._source_attrs(base)
                            typed |= base_typed
                            laid |= base_laid
            for m in u.members:
                if m.source and id(m) not in self.layout_sources:
                    continue
                if not m.words.isdisjoint(typed):
                    self.matter(i, m, True)
                    changed = True
                elif not m.source and not m.layout and not m.words.isdisjoint(laid):
                    changed |= self._carries_layout(i, m)
        return changed

    def _source_attrs(self, cls: Unit) -> tuple[set[str], set[str]]:
        """The `self.<attr>` names of a class's source methods, and of its layout sources."""
        typed: set[str] = set()
        laid: set[str] = set()
        for m in cls.members:
            if m.source:
                (laid if id(m) in self.layout_sources else typed).update(m.attrs)
        return typed, laid

    def _named_by_what_matters(self) -> bool:
        changed = False
        for i in range(len(self.scans)):
            if not self.named[i]:
                continue
            for j in self.reach[i]:
                for u in self.scans[j].units:
                    if not u.matters and u.method is None and not u.binds.isdisjoint(self.named[i]):
                        self.matter(j, u, False)
                        changed = True
        return changed

    def _classes_written_by_sources(self) -> bool:
        """A source assigning an attribute of a class (`RowLinear._sharding_config = ShardingConfig(...)`, from
        any file) may give its methods types (a contract types `forward`): the class is a source."""
        changed = False
        for i, u in self.writers:
            if u.source:
                layout_only = id(u) in self.layout_sources
                for j in self.reach[i]:
                    for name in u.writes & self.class_names[j]:
                        for cls in self.class_names_units[j][name]:
                            if cls.source:
                                continue
                            if not layout_only:
                                self.matter(j, cls, True)
                                changed = True
                            elif not cls.layout:
                                changed |= self._carries_layout(j, cls)
        return changed

    def _registered_where_code_that_matters_reads(self) -> bool:
        """A decorator is called with what it decorates when its module runs, and may store it where code that
        matters looks it up (`REGISTRY[name] = cls`, read back as `REGISTRY["row"]()`): a unit writing into state
        a unit that matters binds may put anything there, so it is exposed, and so is whatever a decorator that
        matters decorates. Names an import binds are not state of the program (`@torch.no_grad()`,
        `os.environ[k] = v`); a registry filled through a module object (`layers.REG[k] = v`) is not seen."""
        changed = False
        for i, u in self.writers:
            if not u.matters and any(not u.writes.isdisjoint(self.kept[j]) for j in self.reach[i]):
                self.matter(i, u, False)
                changed = True
        for i, u in self.decorated:
            if not u.matters and any(not u.decorators.isdisjoint(self.kept[j]) for j in self.reach[i]):
                self.matter(i, u, False)
                changed = True
        return changed

    def _methods_named_anywhere(self) -> bool:
        """A method named by a unit that matters, of a class that matters: the analysis runs a method only on an
        object whose class it knows, and it knows a class only where code it reads names it."""
        changed = False
        for i, u in self.classes:
            if not u.matters:
                continue
            for m in u.members:
                if not m.matters and m.method in self.anywhere:
                    self.matter(i, m, False)
                    changed = True
        return changed

    def _methods_run_by_objects(self) -> bool:
        """Building an object runs `__init__`; calling it, `forward`; operators, the other dunders."""
        changed = False
        for i, u in self.classes:
            if u.matters or any(m.matters for m in u.members):
                for m in u.members:
                    if not m.matters and (m.method == "forward" or (m.method or "").startswith("__")):
                        self.matter(i, m, False)
                        changed = True
        return changed


def _reach(scans: list[FileScan]) -> list[list[int]]:
    """The files each file's names can come from: itself, what it imports, what those re-export."""
    by_name: dict[str, FileScan] = {}
    for s in scans:
        by_name.setdefault(s.module, s)
    index = {id(s): i for i, s in enumerate(scans)}

    def star_closure(start: FileScan) -> list[int]:
        seen, todo = {index[id(start)]}, [start]
        while todo:
            for name in todo.pop().star:
                other = by_name.get(name)
                if other is not None and index[id(other)] not in seen:
                    seen.add(index[id(other)])
                    todo.append(other)
        return sorted(seen)

    stars = [star_closure(s) for s in scans]
    reach: list[list[int]] = []
    for i, s in enumerate(scans):
        out = set(stars[i])
        for name in s.imports:
            other = by_name.get(name)
            if other is not None:
                out.update(stars[index[id(other)]])
        reach.append(sorted(out))
    return reach


@dataclass(frozen=True)
class Plan:
    """What to hand to libcst: nothing (`skip`), or the text with `blank` line spans emptied."""

    skip: bool
    blank: tuple[tuple[int, int], ...] = ()


def plan(s: FileScan) -> Plan:
    """`skip` when nothing in the file matters (it may still run as an import of another file)."""
    if s.whole:
        return Plan(False)
    blank = tuple(span for u in s.units if not u.matters for span in u.bodies)
    return Plan(not any(u.matters for u in s.units), blank)


def blank_spans(s: FileScan, matters: Iterable[int]) -> tuple[tuple[int, int], ...]:
    """`plan(s).blank` from the indices of the units that matter (the taint of an earlier run)."""
    if s.whole:
        return ()
    keep = set(matters)
    return tuple(span for i, u in enumerate(s.units) if i not in keep for span in u.bodies)


def blank_bodies(text: str, spans: Iterable[tuple[int, int]], filler: str = "pass", enclose: bool = False) -> str:
    """Empty the given 1-based line spans, the first line of each becoming `filler` at its indentation.

    Lines keep their endings, so every position outside the spans is unchanged. `enclose`: the filler is
    a string literal (`filler` its text) whose quotes enclose the span's emptied lines: one token for
    libcst where blank lines would be one node each (a quarter of the parse of a file mostly left out).
    """
    spans = sorted(spans)
    if not spans:
        return text
    pieces = re.split(r"(\r\n|\r|\n)", text)  # [line, ending, line, ending, ..., last line]
    for start, end in spans:
        first = 2 * (start - 1)
        if first >= len(pieces):
            continue
        line = pieces[first]
        indent = line[: len(line) - len(line.lstrip(" \t\f"))]
        last = min(2 * (end - 1), len(pieces) - 1)
        if not enclose:
            pieces[first] = indent + filler
        elif last > first:
            pieces[first] = f'{indent}"""{filler}'
        else:
            pieces[first] = f'{indent}"{filler}"'
        for idx in range(first + 2, last + 1, 2):
            pieces[idx] = ""
        if enclose and last > first:
            pieces[last] = '"""'
    return "".join(pieces)
