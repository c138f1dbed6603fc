"""The pre-pass with the result cache: scans and the taint reused across runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from spmdcheck.engine.plan import FilePlan, scan_files, seed_words_for, taint
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
    vocabulary: set[str] = set()
    for scan in scans:
        for unit in scan.units if scan is not None else ():
            vocabulary.update(unit.binds, unit.attrs)
            if unit.method is not None:
                vocabulary.add(unit.method)
    store.set_vocabulary(new_key, sorted(vocabulary))
    return scans, plans


def _words_only(
    store: ResultCache,
    files: list[str],
    fresh: dict[str, prepass.FileScan | None],
    before: dict[str, object],
    summaries: dict[str, tuple[str, object]],
    seeds: Callable[[], prepass.SeedWords],
) -> tuple[list[prepass.FileScan | None], dict[str, FilePlan]] | None:
    """The last taint again, when the files scanned anew differ from their last scans only in identifiers
    that are no seed and that no unit anywhere binds, calls as a method or reads as `self.<attr>`: the
    taint meets words only there (prepass.spread), so no unit's taint can change. None otherwise."""
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
    meaningful = vocabulary | seeds().types | seeds().layouts
    for f in changed:
        entry = before.get(f)
        if not isinstance(entry, tuple) or f not in known:
            return None
        old_units = store.scan_units(f, entry[0])
        _, new_units = prepass.scan_to_plain(fresh[f])  # type: ignore[arg-type]
        if not isinstance(old_units, list) or len(old_units) != len(new_units):
            return None
        for old, new in zip(old_units, new_units):
            if not isinstance(old, list) or len(old) != len(new) or old[:1] + old[3:] != new[:1] + new[3:]:
                return None
            if not meaningful.isdisjoint(set(old[1]) ^ set(new[1])):
                return None
    try:
        plans = {f: _plan_of(known[f]) for f in known}
        respanned = _respan(plans, known, fresh) or dict(known)
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    scans = [fresh.get(f) or (prepass.scan_from_plain(f, summaries[f][1]) if f in summaries else None) for f in files]
    if not all(s is not None for f, s in zip(files, scans) if f in summaries):
        return None
    new_key = caching.tree_key({f: summaries[f][0] for f in files if f in summaries})
    store.set_taint(new_key, respanned)
    store.set_vocabulary(new_key, sorted(vocabulary))
    return scans, plans


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
