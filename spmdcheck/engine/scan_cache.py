"""The pre-pass with the result cache: scans and the taint reused across runs."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from spmdcheck.engine.plan import FilePlan, scan_files, seed_words_for, taint
from spmdcheck.engine.result_cache import Vocabulary
from spmdcheck.program import prepass
from spmdcheck.settings import Settings

if TYPE_CHECKING:
    from spmdcheck.engine.result_cache import ResultCache
    from spmdcheck.rules.stubs import Registry

def cached_prepass(
    files: list[str],
    settings: Settings,
    registry: Registry | None,
    mapper: Callable,
    store: ResultCache,
    hashes: dict[str, str],
) -> tuple[list[prepass.FileScan | None], dict[str, FilePlan]]:
    """The pre-pass with the result cache: a file scanned before (same content) is not read again,
    and when no file's scan changed (every scan hash as in the last run: an edit of comments only),
    the last run's taint is reused without reading the scans' units."""
    from spmdcheck.engine import result_cache as caching

    before = {f: store.index.get(f) for f in files}  # the last scans (their units, for `_words_only`)
    summaries: dict[str, tuple[str, object]] = {}
    for f, h in hashes.items():
        entry = store.scan_summary(f, h)
        if entry is not None:
            summaries[f] = entry
    seeds_cache: list[prepass.SeedWords] = []

    def seeds() -> prepass.SeedWords:
        if not seeds_cache:
            known = prepass.SeedWords.from_plain(store.seeds)
            if known is None:
                known = seed_words_for(settings, registry)
                store.set_seeds(known.to_plain())
            seeds_cache.append(known)
        return seeds_cache[0]

    def fresh_scans(paths: list[str]) -> dict[str, prepass.FileScan | None]:
        found = dict(zip(paths, scan_files(paths, settings, registry, mapper, seeds() if paths else None)))
        for f, scan in found.items():
            if scan is not None and f in hashes:
                small, units = prepass.scan_to_plain(scan)
                scan_hash = prepass.scan_hash(small, units)
                store.store_scan(f, hashes[f], scan_hash, small, units)
                summaries[f] = (scan_hash, small)
        return found

    fresh = fresh_scans([f for f in files if f not in summaries])
    scan_hashes = {f: summaries[f][0] for f in files if f in summaries}
    taint_key = caching.tree_key(scan_hashes)
    key, known = store.taint
    if key == taint_key:
        try:
            plans = {f: _plan_of(known[f]) for f in scan_hashes}
            respanned = _respan(plans, known, fresh)
            scans = [
                fresh.get(f) or (prepass.scan_from_plain(f, summaries[f][1]) if f in summaries else None) for f in files
            ]
            if all(s is not None for f, s in zip(files, scans) if f in summaries):
                if respanned:
                    store.set_taint(key, respanned)
                return scans, plans
        except (KeyError, TypeError, ValueError, IndexError):
            pass
    reused = _words_only(store, files, fresh, before, summaries, seeds)
    if reused is not None:
        return reused
    scans = []
    missing: list[str] = []
    for f in files:
        scan = fresh.get(f)
        if scan is None and f in summaries:
            units = store.scan_units(f, hashes[f])
            scan = prepass.scan_from_plain(f, summaries[f][1], units) if units is not None else None
            if scan is None:
                missing.append(f)
        scans.append(scan)
    if missing:  # units lost or damaged: scan those files again
        again = fresh_scans(missing)
        scans = [again[f] if f in again else s for f, s in zip(files, scans)]
    plans = taint(scans)
    matters = {s.path: [i for i, u in enumerate(s.units) if u.matters] for s in scans if s is not None}
    new_key = caching.tree_key({f: summaries[f][0] for f in files if f in summaries})
    store.set_taint(
        new_key,
        {f: [relevant, [list(b) for b in blank], matters.get(f, [])] for f, (relevant, blank) in plans.items()},
    )
    store.set_vocabulary(new_key, _vocabulary(scans))
    return scans, plans


def _vocabulary(scans: list[prepass.FileScan | None]) -> Vocabulary:
    """What the units of a spread taint name (result_cache.Vocabulary)."""
    words: set[str] = set()
    matter_binds: set[str] = set()
    matter_words: set[str] = set()
    for scan in scans:
        for unit in scan.units if scan is not None else ():
            words.update(unit.binds, unit.attrs)
            if unit.method is not None:
                words.add(unit.method)
            if unit.matters:
                matter_binds |= unit.binds
                matter_words |= unit.words
    return Vocabulary(frozenset(words), frozenset(matter_binds), frozenset(matter_words))


def _words_only(
    store: ResultCache,
    files: list[str],
    fresh: dict[str, prepass.FileScan | None],
    before: dict[str, object],
    summaries: dict[str, tuple[str, object]],
    seeds: Callable[[], prepass.SeedWords],
) -> tuple[list[prepass.FileScan | None], dict[str, FilePlan]] | None:
    """The last taint again, when no unit's taint can change: the files scanned anew import what they did and
    differ from their last scans only in identifiers that are no seed and that no unit anywhere binds, calls as a
    method or reads as `self.<attr>` (the taint meets words only there: prepass.spread), and in *inert*
    statements added or removed (`_inert`). None otherwise."""
    from spmdcheck.engine import result_cache as caching

    key, known = store.taint
    if not key or set(known) != {f for f in files if f in summaries}:
        return None
    changed = [f for f in files if f in fresh and fresh[f] is not None]
    if not changed or len(changed) > 8:
        return None
    vocabulary = store.vocabulary()
    if vocabulary is None:
        return None
    meaningful = vocabulary.words | seeds().types | seeds().layouts
    outside = vocabulary.matter_binds | seeds().types | seeds().layouts  # what an inert statement may not read
    taint = dict(known)
    words, matter_words = set(vocabulary.words), set(vocabulary.matter_words)
    for f in changed:
        entry = before.get(f)
        if not isinstance(entry, tuple) or f not in known:
            return None
        small, new_units = prepass.scan_to_plain(fresh[f])  # type: ignore[arg-type]
        if not isinstance(entry[2], list) or entry[2][:4] != _json_shaped(small[:4]):
            return None  # its module, imports or re-exports changed: what each unit can see did
        old_units = store.scan_units(f, entry[0])
        if not isinstance(old_units, list) or not all(isinstance(u, list) and len(u) == 11 for u in old_units):
            return None
        mattered = {int(i) for i in known[f][2]}
        pairs = _aligned(old_units, new_units)
        if pairs is None:
            return None
        for old, new in pairs:
            if old is None:  # a statement added: inert unless it reads what matters or what matters names it
                unit = new_units[new]
                if not _inert(unit) or not outside.isdisjoint(unit[_WORDS]):
                    return None
                if not matter_words.isdisjoint(unit[_BINDS]):
                    return None
                words.update(unit[_BINDS])  # what it binds is named from now on (a later edit that reads it)
            elif new is None:  # a statement removed: no unit read what it bound unless it mattered
                if old in mattered or not _inert(old_units[old]):
                    return None
            elif not meaningful.isdisjoint(set(old_units[old][_WORDS]) ^ set(new_units[new][_WORDS])):
                return None
        now = {new for old, new in pairs if old in mattered and new is not None}
        matter_words.update(w for i in now for w in new_units[i][_WORDS])  # (the words it names now: see `_inert`)
        taint[f] = [known[f][0], known[f][1], sorted(now)]
    try:
        plans = {f: _plan_of(taint[f]) for f in taint}
        respanned = _respan(plans, taint, fresh) or taint
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    scans = [fresh.get(f) or (prepass.scan_from_plain(f, summaries[f][1]) if f in summaries else None) for f in files]
    if not all(s is not None for f, s in zip(files, scans) if f in summaries):
        return None
    new_key = caching.tree_key({f: summaries[f][0] for f in files if f in summaries})
    store.set_taint(new_key, respanned)
    store.set_vocabulary(new_key, Vocabulary(frozenset(words), vocabulary.matter_binds, frozenset(matter_words)))
    return scans, plans


def _json_shaped(value: object) -> object:
    """`value` as the cache gives it back (tuples as lists), to compare with what it stored."""
    return json.loads(json.dumps(value))


# where a plain unit (prepass.scan_to_plain) keeps its fields
_BINDS, _WORDS, _BODIES, _SOURCE, _MEMBERS = 0, 1, 2, 3, 6
# an inert unit's fields from `_SOURCE` on: source, method, attrs, members, writes, layout, decorators, import
_INERT = [False, None, [], [], [], False, [], False]


def _inert(unit: list) -> bool:
    """A module-level statement that runs no function body, makes no type, is no method, import or class, and
    writes into nothing: while it does not matter, the spread (prepass.spread) gives it nothing and takes
    nothing from it. It matters only if it reads what a unit that matters binds (or a seed), or if a unit that
    matters names what it binds."""
    return not unit[_BODIES] and unit[_SOURCE:] == _INERT


def _aligned(old: list[list], new: list[list]) -> list[tuple[int | None, int | None]] | None:
    """The old and new units of a file paired in order: (old, new) indices, None on the side where a unit was
    added or removed. None when a unit changed other than in its words and the bodies' places."""

    def shape(unit: list) -> str:  # what must stay equal: all but the words, the bodies and the members' indices
        return json.dumps([unit[_BINDS], unit[_SOURCE:_MEMBERS], len(unit[_MEMBERS]), unit[_MEMBERS + 1 :]])

    matcher = difflib.SequenceMatcher(None, [shape(u) for u in old], [shape(u) for u in new], autojunk=False)
    pairs: list[tuple[int | None, int | None]] = []
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            pairs += zip(range(a0, a1), range(b0, b1))
        else:
            pairs += [(a, None) for a in range(a0, a1)] + [(None, b) for b in range(b0, b1)]
    index = {a: b for a, b in pairs if a is not None and b is not None}
    for a, b in index.items():  # a class's methods are the same units
        if [index.get(m) for m in old[a][_MEMBERS]] != new[b][_MEMBERS]:
            return None
    return pairs


def _respan(
    plans: dict[str, FilePlan],
    known: dict[str, list],
    fresh: dict[str, prepass.FileScan | None],
) -> dict[str, list] | None:
    """The spans to blank in the files scanned anew (an edit that kept their taint may move their bodies),
    from the units that mattered, in `plans`; the taint to store for them (None: no file was scanned)."""
    stored = None
    for f, scan in fresh.items():
        if scan is not None and f in plans:
            blank = prepass.blank_spans(scan, map(int, known[f][2]))
            plans[f] = FilePlan(plans[f].relevant, blank)
            stored = stored or dict(known)
            stored[f] = [plans[f].relevant, [list(b) for b in blank], known[f][2]]
    return stored


def _plan_of(stored: list) -> FilePlan:
    """A file's plan as the cache stores it: [relevant, blank spans, the units that mattered]."""
    return FilePlan(bool(stored[0]), tuple((int(a), int(b)) for a, b in stored[1]))
