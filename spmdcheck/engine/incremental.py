"""Analyse again only the roots of a program that an edit can change (docs/performance.md).

A cached run records, per program (analysis/roots.py): every file's *outline* (a hash of its text
outside function bodies, one hash per body, as the analysis read them: bodies the pre-pass blanked
are blank), and per root the bodies it executed, the roots whose shared results it reused, and its
diagnostics. When the same files come back changed, a *selective run* parses the program with the
bodies no affected root needs left out, runs the modules' top levels, then only the affected roots
(those that ran a changed body, or any code of a file changed outside its bodies or of a file
importing it); the other roots' diagnostics come from the record, merged in root order as the
program itself de-duplicates them. After edits inside bodies only, the other files' top levels run only
when a name of theirs is read (`_top_part`, analysis/program.py). The whole program runs instead (never
a guess) when:
- a file gained or lost a function body, or changed the axis names it mentions;
- the top level executed a changed body, or the edit reaches a root of the last run that was a writer
  (roots.py: the others run again with the affected roots), or a
  file changed outside its bodies while a module's top level wrote to another module's objects;
- the selective run reaches a body it left out, or a root or top level writes what it did not write before;
- a changed file's bodies could not be numbered, or a file held a syntax error.
Plain data only: the record is JSON in the result cache.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spmdcheck.analysis.roots import ELIDED, NAME_UNIT, TOP, descends, parent
from spmdcheck.program import prepass

RECORD_VERSION = 10
_LINE_END = re.compile(r"(\r\n|\r|\n)")


def _hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


# A module-level statement as an outline sees it: the hash of its text outside the bodies, its first and last
# lines, the names it binds and whether it is pure (prepass.statements)
Statement = tuple[str, int, int, tuple[str, ...], bool]


@dataclass(frozen=True)
class Outline:
    skeleton: str  # the text outside the bodies
    bodies: tuple[str, ...]  # one hash per body, in source order
    lengths: tuple[int, ...]  # each body's number of lines
    axes: tuple[str, ...]  # the mesh axis names the file mentions
    statements: tuple[Statement, ...] | None = None  # its module-level statements (None: unknown)
    header: str = ""  # the comments that open the file, where its settings are written (frontend/source_file.py)

    def plain(self) -> list:
        table = None if self.statements is None else [[h, a, b, list(n), p] for h, a, b, n, p in self.statements]
        return [self.skeleton, list(self.bodies), list(self.lengths), list(self.axes), table, self.header]

    @classmethod
    def from_plain(cls, data: Any) -> Outline:
        skeleton, bodies, lengths, axes, table, header = data
        statements = None
        if table is not None:
            statements = tuple((str(h), int(a), int(b), tuple(map(str, n)), p is True) for h, a, b, n, p in table)
        return cls(
            str(skeleton),
            tuple(map(str, bodies)),
            tuple(map(int, lengths)),
            tuple(map(str, axes)),
            statements,
            str(header),
        )


def outline(
    text: str,
    planned: str,
    spans: Iterable[tuple[int, int]],
    statements: Iterable[tuple[int, int, tuple[str, ...], bool]] | None = None,
    axes: Iterable[str] | None = None,
) -> Outline:
    """`planned` is the text the analysis parses (with the pre-pass's blanked bodies); `statements` its
    module-level statements as the pre-pass lists them (`prepass.statements`), when known; `axes` the mesh
    axis names of `text`, when the caller has them (SourceFile.mesh_names)."""
    from spmdcheck.frontend.source_file import mesh_names_in

    pieces = _LINE_END.split(planned)  # physical lines as CPython numbers them (not str.splitlines)
    lines = ["".join(pieces[i : i + 2]) for i in range(0, len(pieces), 2)]
    spans = sorted(spans)
    skeleton: list[str] = []
    bodies: list[str] = []
    at = 0
    for start, end in spans:
        skeleton.extend(lines[at : start - 1])
        skeleton.append("\0")
        bodies.append(_hash("".join(lines[start - 1 : end])))
        at = end
    skeleton.extend(lines[at:])
    return Outline(
        _hash("".join(skeleton)),
        tuple(bodies),
        tuple(end - start + 1 for start, end in spans),
        tuple(sorted(mesh_names_in(text) if axes is None else axes)),
        None if statements is None else _statement_hashes(lines, spans, statements),
        _hash("".join(itertools.takewhile(lambda line: not line.strip() or line.lstrip().startswith("#"), lines))),
    )


def _statement_hashes(
    lines: list[str], spans: list[tuple[int, int]], statements: Iterable[tuple[int, int, tuple[str, ...], bool]]
) -> tuple[Statement, ...]:
    """Each statement with the hash of its lines outside the bodies (a body counts as one mark)."""
    out: list[Statement] = []
    k = 0
    for first, last, names, pure in statements:
        while k < len(spans) and spans[k][1] < first:
            k += 1
        parts: list[str] = []
        at = first
        j = k
        while j < len(spans) and spans[j][0] <= last:
            start, end = spans[j]
            parts.extend(lines[at - 1 : start - 1])
            parts.append("\0")
            at = end + 1
            j += 1
        parts.extend(lines[at - 1 : last])
        out.append((_hash("".join(parts)), first, last, tuple(names), bool(pure)))
    return tuple(out)


def elide(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """The bodies of `spans` left out (same lines): entering one stops a selective run."""
    return prepass.blank_bodies(text, spans, filler=ELIDED, enclose=True)


# ---------------------------------------------------------------------------------------- records
@dataclass
class ProgramRecord:
    """What a run of one program left for the next: see the module docstring."""

    paths: list[str]
    outlines: list[Outline]
    spans: list[list[tuple[int, int]]]
    file_diags: dict[str, list]  # path -> the diagnostics made before the analysis (syntax, settings)
    roots: list[tuple[tuple, list[tuple[int, int]], list[tuple], list[list]]]  # key, units, providers, diags
    unmapped: list[int] = field(default_factory=list)
    top_writers: list[int] = field(default_factory=list)
    top_files: list[int] = field(default_factory=list)  # the file whose top level queued each root (0, k)
    top_order: list[int] = field(default_factory=list)  # the files in the order their top levels started
    keys: list[str] = field(default_factory=list)  # what each file's outline follows from (engine.record.outline_key)
    imports: list[str] = field(default_factory=list)  # a hash of the modules each file's imports name
    writers: list[tuple] = field(default_factory=list)  # the roots that wrote state later roots read
    checked: list[tuple] = field(default_factory=list)  # the roots whose function counts as checked
    top_units: list[tuple] = field(default_factory=list)  # the body of each top-level root (0, k) (roots.py)
    writes: list = field(default_factory=list)  # [writer key, what it wrote] (analysis/writes.py)

    def plain(self) -> dict:
        return {
            "version": RECORD_VERSION,
            "paths": self.paths,
            "outlines": [o.plain() for o in self.outlines],
            "spans": [[list(s) for s in spans] for spans in self.spans],
            "file_diags": self.file_diags,
            "roots": [[list(k), _plain_units(units), [list(p) for p in providers], diags]
                      for k, units, providers, diags in self.roots],
            "unmapped": self.unmapped,
            "top_writers": self.top_writers,
            "top_files": self.top_files,
            "top_order": self.top_order,
            "keys": self.keys,
            "imports": self.imports,
            "writers": [list(k) for k in self.writers],
            "checked": [list(k) for k in self.checked],
            "top_units": [list(u) for u in self.top_units],
            "writes": self.writes,
        }

    @classmethod
    def from_plain(cls, data: Any) -> ProgramRecord | None:
        try:
            if data.get("version") != RECORD_VERSION:
                return None
            return cls(
                [str(p) for p in data["paths"]],
                [Outline.from_plain(o) for o in data["outlines"]],
                [[(int(a), int(b)) for a, b in spans] for spans in data["spans"]],
                {str(p): list(d) for p, d in data["file_diags"].items()},
                [
                    (
                        tuple(k),
                        _units_from_plain(units),
                        [tuple(p) for p in providers],
                        [list(d) for d in diags],
                    )
                    for k, units, providers, diags in data["roots"]
                ],
                [int(i) for i in data["unmapped"]],
                [int(i) for i in data["top_writers"]],
                [int(i) for i in data["top_files"]],
                [int(i) for i in data["top_order"]],
                [str(k) for k in data["keys"]],
                [str(k) for k in data["imports"]],
                [tuple(k) for k in data["writers"]],
                [tuple(k) for k in data["checked"]],
                [(int(a), int(b)) for a, b in data["top_units"]],
                list(data["writes"]),
            )
        except (AttributeError, KeyError, TypeError, ValueError):
            return None


def writes_of(plain: Iterable) -> dict[tuple, list]:
    """A record's `writes` (or a run's), keyed by writer, each write as a tuple: what two runs compare."""
    out: dict[tuple, list] = {}
    for key, written in plain:
        out[tuple(key)] = [tuple(w) if w is not None else None for w in written]
    return out


def described_writes(record: ProgramRecord, reached: set[tuple]) -> bool:
    """Whether every write of the writers an edit reached is described (none holds an unknown part): a
    selective run can then tell whether they wrote the same again."""
    known = writes_of(record.writes)
    for writer in reached:
        written = known.get(tuple(writer))
        if not written or any(w is None or any(part is None for part in w) for w in written):
            return False
    return True


def _plain_units(units: Iterable[tuple]) -> list:
    """A root's units as plain data: the bodies as pairs, then the names it read as one string (compact)."""
    bodies = [list(u) for u in units if u[0] != NAME_UNIT]
    names = " ".join(sorted(str(u[1]) for u in units if u[0] == NAME_UNIT))
    return [*bodies, names] if names else bodies


def _units_from_plain(data: Iterable) -> list[tuple]:
    out: list[tuple] = []
    for item in data:
        if isinstance(item, str):
            out.extend((NAME_UNIT, name) for name in item.split())
        else:
            i, k = item
            out.append((int(i), int(k)))
    return out


# a file's planned text, or what makes it (a picklable bound method: engine/plan.py `LoadedFile.planned_text`)
Planned = str | Callable[[], str]


class LeftOut(Mapping[str, str]):
    """path -> a file's planned text with the bodies a selective run does not need left out, made when first
    read: most files of a program are never parsed by a selective run that defers their imports."""

    def __init__(self) -> None:
        self._planned: dict[str, tuple[Planned, list[tuple[int, int]]]] = {}
        self._made: dict[str, str] = {}

    def plan(self, path: str, planned: Planned, spans: list[tuple[int, int]]) -> None:
        self._planned[path] = (planned, spans)

    def __getitem__(self, path: str) -> str:
        made = self._made.get(path)
        if made is None:
            planned, spans = self._planned[path]
            made = self._made[path] = elide(planned() if callable(planned) else planned, spans)
        return made

    def __iter__(self) -> Iterator[str]:
        return iter(self._planned)

    def __len__(self) -> int:
        return len(self._planned)

    def __contains__(self, path: object) -> bool:
        return path in self._planned


@dataclass
class Selective:
    """The plan of a selective run, made by the parent from the last record and the new files."""

    run_only: set[tuple]  # the roots to run again
    known: set[tuple]  # every root of the last run (a root not among them is new: it runs)
    elided: Mapping[str, str]  # path -> the planned text with the unneeded bodies left out (LeftOut)
    old: ProgramRecord
    changed: set[str]  # the files whose outline changed
    # the files whose top levels run first (the others when a name of theirs is read: `_top_part`); None: all
    top_only: set[int] | None = None
    # with `top_only`: the top level's diagnostics are this run's (an edit outside bodies), not the recorded ones
    fresh_top: bool = False


def plan_selective(
    record: ProgramRecord,
    paths: list[str],
    outlines: list[Outline],
    planned: Sequence[Planned],
    spans: list[list[tuple[int, int]]] | None = None,
    importers: dict[int, set[int]] | None = None,
    imports: list[str] | None = None,
) -> Selective | None:
    """None when only the whole program can answer (see the module docstring). `spans`: each file's body
    spans now; `importers`: for each file, the files that import it (by index), directly, counting the
    packages an import runs; `imports`: each file's `import_key` now."""
    if paths != record.paths or len(outlines) != len(record.outlines):
        return None
    if any("SPMD001" in str(d) or "SPMD000" in str(d) for d in record.file_diags.values()):
        return None
    edit = _edit(record, paths, outlines, spans, importers)
    if edit is None:
        return None
    record = edit.record
    changed_units = edit.units
    top = next((r for r in record.roots if r[0] == TOP), None)
    if top is None:
        return None
    # An edit outside the bodies of a file changes its module's names (and what its top level made). When
    # every statement it changed is pure (prepass.statements: it only binds names) and no top level read one
    # of those names, what changed is those names and the statements' bodies: the roots that read one or ran
    # one run again (`named`). Otherwise every root that ran code of that file, or of a file importing it
    # (directly or not: names travel through imports), runs again. The top level itself always runs again.
    named = _changed_names(record, outlines, spans, edit.outside, top[1]) if edit.outside else set()
    readers: set[int] = set()
    if named is None:
        todo = list(edit.outside)
        while todo:
            i = todo.pop()
            if i not in readers:
                readers.add(i)
                todo.extend((importers or {}).get(i, ()))
    else:
        changed_units |= named
    if not changed_units and not readers and not edit.outside:
        return None
    if changed_units.intersection(top[1]):
        return None
    affected = _affected(record, changed_units, readers, edit.shifted)
    # The writers run again too (in queue order, with the affected roots): they rebuild the state the roots after
    # them read. One the edit reaches may write otherwise: only the whole program knows what reads it then.
    writers = set(record.writers)
    reached = {w for w in writers if w in affected or descends(w, affected)}
    if reached and not described_writes(record, reached):
        return None  # (with every write described, the run stands if each writer writes as before: engine/analyse.py)
    for writer in writers:
        node: tuple | None = writer
        while node is not None:  # a nested writer runs when the root that queues it runs
            affected.add(node)
            node = parent(node)
    needed = set(top[1]) | changed_units  # (a new function's body: its root runs, though no root ran it before)
    for key, units, _, _ in record.roots:
        if descends(key, affected):
            needed.update(units)
    elided = _left_out(record, paths, planned, spans, edit.changed, needed)
    edited = {i for i, p in enumerate(paths) if p in edit.changed}
    # an edit outside bodies that changed what a file imports may change which top level starts first in an
    # import cycle (the order a part of the top levels replays): then every top level runs
    same_imports = imports is not None and all(
        i < len(record.imports) and imports[i] and imports[i] == record.imports[i] for i in edited
    )
    rerun = readers | edit.outside  # the top levels that run again whatever is read: the edited ones and their readers
    top_only = _top_part(record, affected, top, edited, rerun, edit.shifted) if same_imports or not rerun else None
    return Selective(affected, {r[0] for r in record.roots}, elided, record, edit.changed, top_only, bool(rerun))


@dataclass
class _Edit:
    """What changed between the record and the files now."""

    record: ProgramRecord  # the record, its roots renamed where functions were added or removed
    units: set[tuple]  # the bodies (file, body) that changed or went away
    changed: set[str] = field(default_factory=set)  # the files whose outline changed
    shifted: set[str] = field(default_factory=set)  # the files whose lines moved (their diagnostics' positions)
    outside: set[int] = field(default_factory=set)  # the files changed outside their bodies


def _edit(
    record: ProgramRecord,
    paths: list[str],
    outlines: list[Outline],
    spans: list[list[tuple[int, int]]] | None,
    importers: dict[int, set[int]] | None,
) -> _Edit | None:
    """The edit since the record; None when only the whole program can answer it."""
    changed_units: set[tuple] = set()
    for i, (new, old) in enumerate(zip(outlines, record.outlines)):
        if len(new.bodies) != len(old.bodies):  # functions added or removed: the record renamed to match
            renamed = rekey(record, i, old, new) if spans is not None and i not in record.unmapped else None
            if renamed is None:
                return None
            record, gone = renamed
            changed_units |= gone
    edit = _Edit(record, changed_units)
    for i, (new, old) in enumerate(zip(outlines, record.outlines)):
        if new == old:
            continue
        if len(new.bodies) != len(old.bodies) or new.axes != old.axes or i in record.unmapped:
            return None
        if new.skeleton != old.skeleton:
            if record.top_writers or importers is None:
                return None  # a top level wrote to another's objects: what reads an edited one is unknown
            edit.outside.add(i)
        edit.changed.add(paths[i])
        edit.units.update((i, k) for k, (a, b) in enumerate(zip(new.bodies, old.bodies)) if a != b)
        moved = spans is not None and [tuple(x) for x in spans[i]] != [tuple(x) for x in record.spans[i]]
        if moved or new.lengths != old.lengths or new.skeleton != old.skeleton:
            edit.shifted.add(paths[i])
    return edit


def _affected(record: ProgramRecord, changed_units: set[tuple], readers: set[int], shifted: set[str]) -> set[tuple]:
    """The roots to run again, to a fixed point: what runs again makes its consumers and the roots that queued it
    run again."""
    from spmdcheck.diagnostics.render import display_path

    shown = [display_path(p) for p in shifted]
    affected: set[tuple] = set()
    grew = True
    while grew:
        grew = False
        for key, units, providers, diags in record.roots:
            if key == TOP or key in affected:
                continue
            if (
                descends(key, affected)
                or changed_units.intersection(units)
                or any(u[0] in readers for u in units)
                or affected.intersection(providers)
                or any(d[0] in shifted or any(s in d[2][7] for s in shown) for d in diags)
            ):
                affected.add(key)
                grew = True
        for key, _, _, _ in record.roots:
            if key in affected:
                more: set[tuple] = set()
                node = parent(key)
                while node is not None:  # only the root that queued a nested function can run it again
                    more.add(node)
                    node = parent(node)
                if more - affected:
                    affected.update(more)
                    grew = True
    return affected


def _left_out(
    record: ProgramRecord,
    paths: list[str],
    planned: Sequence[Planned],
    spans: list[list[tuple[int, int]]] | None,
    changed: set[str],
    needed: set[tuple],
) -> LeftOut:
    """The planned texts with the bodies no root that runs needs left out."""
    elided = LeftOut()
    for i, path in enumerate(paths):
        if i in record.unmapped:
            continue
        # an edited file's bodies are where they are now (its count of bodies is the recorded one)
        now = record.spans[i] if path not in changed else spans[i] if spans is not None else None
        left_out = [span for k, span in enumerate(now or ()) if (i, k) not in needed]
        if left_out:
            elided.plan(path, planned[i], left_out)
    return elided


def _changed_names(
    record: ProgramRecord,
    outlines: list[Outline],
    spans: list[list[tuple[int, int]]] | None,
    outside: set[int],
    top_units: Iterable[tuple],
) -> set[tuple] | None:
    """What an edit outside bodies changed, when it changed only pure statements that no top level reads: the
    names they bind, as units `(NAME_UNIT, name)`, and the bodies inside them, as units (file, body). None
    otherwise (a statement not pure, or unknown; a name a top level read)."""
    if spans is None:
        return None
    out: set[tuple] = set()
    for i in outside:
        old, new = record.outlines[i].statements, outlines[i].statements
        if old is None or new is None or record.outlines[i].header != outlines[i].header:
            return None  # (the file's settings may have changed: every check of its code may)
        matcher = difflib.SequenceMatcher(None, [s[0] for s in old], [s[0] for s in new], autojunk=False)
        for tag, a0, a1, b0, b1 in matcher.get_opcodes():
            if tag == "equal":
                continue
            for table, body_spans, lo, hi in ((old, record.spans[i], a0, a1), (new, spans[i], b0, b1)):
                for _, first, last, names, pure in table[lo:hi]:
                    if not pure:
                        return None
                    out.update((NAME_UNIT, name) for name in names)
                    out.update((i, k) for k, (a, b) in enumerate(body_spans) if first <= a and b <= last)
    read_at_top = {tuple(u) for u in top_units}
    if any(u in read_at_top for u in out if u[0] == NAME_UNIT):
        return None  # a top level read a changed name: what it made from it may reach any root
    return out


GONE = -3  # the body index of a unit that no longer exists (rekey): the roots that ran one run again


def rekey(record: ProgramRecord, i: int, old: Outline, new: Outline) -> tuple[ProgramRecord, set[tuple]] | None:
    """The record renamed for file `i`'s new bodies, after functions were added to it or removed from it: its
    bodies numbered as now (matched old to new by their hashes), the top level's roots numbered in the queue
    order the new file gives (its functions queue in the order of their bodies; a new one takes its place
    there, before the next kept body, after any one-line function between: a guess the run checks), the roots
    of removed functions gone. With the units that changed: each new body, and `(i, GONE)`,
    which the roots that ran a removed body, or reused a removed root's result, now hold. None when the record
    cannot be renamed so (a file whose functions did not queue in body order, a removed writer). The selective
    run checks that each top-level function is the body the renamed record says (roots.py): where it runs every
    top level (as with writers, whose order matters), each at the place the renamed record gives."""
    matcher = difflib.SequenceMatcher(None, list(old.bodies), list(new.bodies), autojunk=False)
    body_map: dict[int, int] = {}  # old body -> new body
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal" or (tag == "replace" and a1 - a0 == b1 - b0):
            body_map.update((a0 + d, b0 + d) for d in range(a1 - a0))
    gone_unit = (i, GONE)

    def unit(u: tuple) -> tuple:
        if u[0] == i and isinstance(u[1], int) and u[1] >= 0:
            return (i, body_map[u[1]]) if u[1] in body_map else gone_unit
        return u

    if len(record.top_units) != len(record.top_files):
        return None
    mine = [tuple(record.top_units[k]) for k, f in enumerate(record.top_files) if f == i]
    if not mine or [u for u in mine if u[1] >= 0] != [(i, b) for b in range(len(old.bodies))]:
        return None  # not every body queued once, in body order (a library file: none queued)
    added = sorted(set(range(len(new.bodies))) - set(body_map.values()))
    entries: list[tuple[int, tuple, int | None]] = []  # (file, unit, old key) of the new top-level queue
    first_place = None
    for k, (f, u) in enumerate(zip(record.top_files, record.top_units)):
        if f != i:
            entries.append((f, tuple(u), k))
            continue
        if first_place is None:
            first_place = len(entries)
        if u[1] < 0:  # a one-line function (no body of its own): a new body before the next kept one goes after it
            entries.append((i, tuple(u), k))
        elif u[1] in body_map:
            target = body_map[u[1]]
            while added and added[0] < target:
                entries.append((i, (i, added.pop(0)), None))
            entries.append((i, (i, target), k))
    if added:  # after the file's last function (or where its first was)
        last = max((n for n, e in enumerate(entries) if e[0] == i), default=(first_place or 0) - 1)
        entries[last + 1 : last + 1] = [(i, (i, b), None) for b in added]
    key_map = {k: n for n, (_, _, k) in enumerate(entries) if k is not None}

    def rk(key: tuple) -> tuple | None:
        if not key or key[0] == "?":
            return key
        if key[0] in ("again", "in"):
            inner = rk(tuple(key[1:-1]))
            return None if inner is None else (key[0], *inner, key[-1])
        if len(key) < 2 or key[1] not in key_map:
            return None
        return (key[0], key_map[key[1]], *key[2:])

    roots = []
    for key, units, providers, diags in record.roots:
        renamed = rk(tuple(key))
        if renamed is None:
            continue  # a removed function's root (or one it queued)
        new_units = [unit(tuple(u)) for u in units]
        new_providers = [rk(tuple(q)) for q in providers]
        if any(q is None for q in new_providers):
            new_units.append(gone_unit)  # it reused what a removed root computed
        roots.append((renamed, new_units, [q for q in new_providers if q is not None], diags))
    writers = [rk(tuple(w)) for w in record.writers]
    if any(w is None for w in writers):
        return None
    inverse = {b: a for a, b in body_map.items()}
    outline = Outline(
        old.skeleton,
        tuple(old.bodies[inverse[b]] if b in inverse else "" for b in range(len(new.bodies))),
        tuple(old.lengths[inverse[b]] if b in inverse else 0 for b in range(len(new.bodies))),
        old.axes,
        old.statements,
        old.header,
    )
    old_spans = record.spans[i]
    renamed_record = dataclasses.replace(
        record,
        outlines=[outline if n == i else o for n, o in enumerate(record.outlines)],
        spans=[
            [tuple(old_spans[inverse[b]]) if b in inverse else (0, -1) for b in range(len(new.bodies))]
            if n == i
            else s
            for n, s in enumerate(record.spans)
        ],
        roots=roots,
        top_files=[f for f, _, _ in entries],
        top_units=[u for _, u, _ in entries],
        writers=writers,
        checked=[c for c in (rk(tuple(c)) for c in record.checked) if c is not None],
    )
    return renamed_record, {gone_unit, *((i, b) for b in range(len(new.bodies)) if b not in inverse)}


def import_key(modules: Iterable[str] | None) -> str:
    """What a file's import statements name, as a hash ("" when unknown)."""
    return "" if modules is None else _hash("\0".join(sorted(modules)))


def _top_part(
    record: ProgramRecord, affected: set[tuple], top: tuple, changed: set[int], readers: set[int], shifted: set[str]
) -> set[int] | None:
    """The files whose top levels a selective run runs first: those of the roots to run again, the changed files,
    and after an edit outside bodies the files that read the edited modules' names (`readers`: they and their
    importers); the top level of any other checked file runs only when a name of it is read (program.py), as
    it would have run in the recorded run (it imports no edited module). The top level's diagnostics are the
    recorded ones after edits inside bodies; after an edit outside them, this run's, so the recorded top level
    must have had none (a top level not run now would lose its own). None (every top level runs) when a top
    level wrote to another module's objects, when the top level's recorded diagnostics may change (positions
    moved in their file) or may be lost, or when the record cannot place a root."""
    from spmdcheck.diagnostics.render import display_path

    if record.top_writers or record.writers or not record.top_order or (readers and top[3]):
        return None  # (with writers, every top level runs: the queue keeps the recorded run's order)
    shown = [display_path(p) for p in shifted]
    if any(d[0] in shifted or any(s in d[2][7] for s in shown) for d in top[3]):
        return None
    part = set(changed) | readers
    for key in affected:
        if not key or key[0] in ("again", "in"):
            return None
        k = _top_ancestor(key)[-1]
        if k >= len(record.top_files) or record.top_files[k] < 0:
            return None
        part.add(record.top_files[k])
    return part


def _top_ancestor(key: tuple) -> tuple:
    node = key
    while parent(node) is not None:
        node = parent(node)  # type: ignore[assignment]
    return node


def merge(old: ProgramRecord, fresh: list[tuple[tuple, list, list, list]], ran: set[tuple]) -> list:
    """The roots of the new run in queue order: those that ran again (with the nested functions they
    queued this time), and the others as recorded."""
    by_key = {r[0]: r for r in old.roots if not descends(r[0], ran)}
    by_key.update({r[0]: r for r in fresh})
    return [by_key[k] for k in sorted(by_key, key=_order)]


def _order(key: tuple) -> tuple:
    if key and key[0] in ("again", "in"):
        return (float("inf"),)  # after every other, in the order they were recorded or ran (a stable sort)
    return (-1,) if key == TOP else key


def merged_diagnostics(roots: list) -> dict[str, list]:
    """Each finding once, from the first root (in queue order) that reported it: path -> plain diags."""
    seen: set[tuple[str, str]] = set()
    out: dict[str, list] = {}
    for _, _, _, diags in roots:
        for path, same, plain in diags:
            if (path, same) in seen:
                continue
            seen.add((path, same))
            out.setdefault(path, []).append(plain)
    return out
