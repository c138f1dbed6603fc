"""The command line's run: the pre-pass, then each program on the pool, answered from the result cache where it can."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from spmdcheck.program.prepass_switch import enabled as prepass_enabled
from spmdcheck.settings import FileResult, Settings

# The planner, the pool and the pre-pass's cache are imported by the run that needs them: a run answered by
# the result cache (an unchanged tree: the commonest warm run) reads hashes and the cache, and ends.
if TYPE_CHECKING:
    from spmdcheck.engine.incremental import Selective
    from spmdcheck.engine.plan import LoadedFile
    from spmdcheck.engine.result_cache import ResultCache
    from spmdcheck.rules.stubs import Registry


def run_check(
    files: list[str],
    settings: Settings,
    registry: Registry | None,
    jobs: int,
    result_cache: ResultCache | None = None,
    focus: frozenset[str] | None = None,
    progress: Callable[[str, int], None] | None = None,
) -> list[FileResult]:
    """The command line's run: the pre-pass, then each program (a connected part of the import graph)
    on a pool of `jobs` processes; with a `cache.ResultCache`, unchanged programs are not analysed
    again and an unchanged tree is answered from the cache alone. With a `focus` (see
    `plan_programs`), only the programs that can reach a focus file are analysed. `progress(event, files)`
    hears `planned`, `parsed` (read and scanned) and `analysed` (more files done: cached, skipped, analysed)."""
    from spmdcheck.engine import result_cache as caching

    store = result_cache
    hashes: dict[str, str] = {}
    tree = ""
    if store is not None:
        hashes, tree, answered = _whole_tree_answer(files, store, focus)
        if answered is not None:
            return answered
    from spmdcheck.engine.plan import plan_programs
    from spmdcheck.engine.pool import LazyPool
    from spmdcheck.engine.scan_cache import cached_prepass
    from spmdcheck.program import prepass

    if progress is not None:
        progress("planned", len(files))
    jobs = max(1, min(jobs or (os.cpu_count() or 1), len(files)))
    with LazyPool(jobs if len(files) >= 8 else 1, settings, registry) as pool:
        scans = plans = None
        if prepass.enabled() and store is not None:
            scans, plans = cached_prepass(files, settings, registry, pool.map, store, hashes)
        done, programs = plan_programs(files, settings, registry, pool.map, scans, plans, focus)
        todo: list[list[LoadedFile]] = []
        keys: dict[int, str] = {}
        programs_seen: dict[str, dict] = {}
        exact_keys: dict[int, str] = {}
        for program in programs:
            if store is not None and all(f.path in hashes for f in program):
                # Keyed on what the analysis reads (edits of comments and inert bodies keep the key), else,
                # for a program whose results quote more than that (a syntax error), on the exact contents.
                analysed = caching.program_key(
                    (f.path, f.module, f.relevant, f.blank, analysed_digest(f, hashes[f.path], store)
                     or hashes[f.path])
                    for f in program
                )
                exact = caching.program_key((f.path, f.module, f.relevant, f.blank, hashes[f.path]) for f in program)
                for key in (analysed, exact):
                    cached = store.programs.get(key)
                    if cached is not None and all(f.path in cached for f in program):
                        done += [FileResult(f.path, caching.from_plain(f.path, cached[f.path])) for f in program]
                        programs_seen[key] = cached
                        break
                else:
                    keys[id(program)], exact_keys[id(program)] = analysed, exact
                    for f in program:
                        f.content = hashes[f.path]
                    todo.append(program)
                continue
            todo.append(program)
        if progress is not None:
            progress("parsed", len(files))
            progress("analysed", len(done))  # the skipped files, and the programs the cache answered
        # Big programs first, so one large program does not end the run alone on one core.
        todo.sort(key=lambda p: -sum(len(f.blanked or f.text) for f in p))
        plans: dict[int, Selective | None] = {}
        shapes: dict[int, str] = {}
        if store is not None:
            for program in todo:
                if id(program) in keys:
                    shapes[id(program)], plans[id(program)] = _selective_plan(program, store, hashes)
        done_files = (lambda n: progress("analysed", n)) if progress is not None else None
        for program, results, record in pool.run_programs(todo, plans if store is not None else None, done_files):
            done += results
            if record is not None and id(program) in shapes:
                store.store_record(shapes[id(program)], record)
            key = keys.get(id(program))
            codes = {d.code for r in results for d in r.diagnostics}
            if key is not None and "SPMD000" not in codes and not any(r.notes for r in results):
                key = exact_keys[id(program)] if "SPMD001" in codes else key
                programs_seen[key] = {r.path: caching.to_plain(r.diagnostics) for r in results}
        if store is not None:
            store.prune_records(shape_key(p) for p in programs)
    order = {p: i for i, p in enumerate(files)}
    done.sort(key=lambda r: order.get(r.path, len(order)))
    if store is not None:
        # a result the checker could not finish (a crash, a budget: its notes) is never stored
        complete = len(hashes) == len(files) and not any(
            r.notes or any(d.code == "SPMD000" for d in r.diagnostics) for r in done
        )
        store.finish(
            tree if complete else "",
            {r.path: (r.skipped, caching.to_plain(r.diagnostics)) for r in done} if complete else {},
            programs_seen,
        )
    return done


def _whole_tree_answer(
    files: list[str], store: ResultCache, focus: frozenset[str] | None
) -> tuple[dict[str, str], str, list[FileResult] | None]:
    """The files' content hashes, the tree's key, and the results when the cache holds this very tree."""
    from spmdcheck.engine import result_cache as caching

    hashes: dict[str, str] = {}
    for f in files:
        try:
            hashes[f] = caching.content_hash(pathlib.Path(f).read_bytes())
        except OSError:
            pass
    tree = caching.tree_key(hashes) + ("" if prepass_enabled() else "-whole")
    if focus is not None:  # a focused run leaves the other files unchecked: it answers only itself
        tree += "-focus-" + caching.tree_key(dict.fromkeys(focus, ""))
    if tree == store.tree and len(hashes) == len(files) and all(f in store.results for f in files):
        stored = store.results
        return hashes, tree, [FileResult(f, caching.from_plain(f, stored[f][1]), skipped=stored[f][0]) for f in files]
    return hashes, tree, None


def shape_key(program: list[LoadedFile]) -> str:
    """What names a program across edits of its files' contents: its files, their modules and relevance."""
    from spmdcheck.engine import result_cache as caching

    return caching.program_key((f.path, f.module, f.relevant, None, "") for f in program)


def _selective_plan(
    program: list[LoadedFile], store: ResultCache, hashes: dict[str, str]
) -> tuple[str, Selective | None]:
    """The program's shape (its files) and, when its last record allows, the plan of a selective run."""
    from spmdcheck.engine import incremental
    from spmdcheck.engine.plan import program_graph
    from spmdcheck.engine.record import file_outlines
    from spmdcheck.program import prepass

    shape = shape_key(program)
    plain = store.record(shape)
    record = incremental.ProgramRecord.from_plain(plain) if plain is not None else None
    if record is None:
        return shape, None
    # a file unchanged since the record has its body spans there (they follow from its contents alone)
    recorded = {p: (key.split(":", 1)[0], spans) for p, key, spans in zip(record.paths, record.keys, record.spans)}
    for f in program:
        if f.spans is None and f.path in hashes:  # the taint was reused: the file's units were not read
            content, spans = recorded.get(f.path, ("", []))
            if content == hashes[f.path]:
                f.spans = tuple(tuple(span) for span in spans)  # type: ignore[misc]
                continue
            summary = store.scan_summary(f.path, hashes[f.path])
            units = store.scan_units(f.path, hashes[f.path]) if summary is not None else None
            scan = prepass.scan_from_plain(f.path, summary[1], units) if units is not None else None
            f.spans = scan.spans() if scan is not None else None
    if any(f.spans is None for f in program):
        return shape, None
    outlines = file_outlines(program, record)
    planned = [f.planned_text for f in program]  # each made only if the selective run parses it
    index = {f.path: i for i, f in enumerate(program)}
    graph = program_graph(program)
    by_name = {m.name: index[m.path] for m in graph.modules.values() if m.path in index}
    importers: dict[int, set[int]] = {}
    for name, targets in graph.edges.items():
        for target in targets:
            # importing a.b.c runs (and binds) the packages a and a.b too: their names reach the importer
            parts = target.split(".")
            for k in range(1, len(parts) + 1):
                package = ".".join(parts[:k])
                if name in by_name and package in by_name:
                    importers.setdefault(by_name[package], set()).add(by_name[name])
    spans = [list(f.spans or ()) for f in program]
    imports = [incremental.import_key(f.imports) for f in program]
    paths = [f.path for f in program]
    return shape, incremental.plan_selective(record, paths, outlines, planned, spans, importers, imports)


def analysed_digest(f: LoadedFile, content: str = "", store: ResultCache | None = None) -> str | None:
    """`prepass.analysed_digest` of a planned file; None without the pre-pass's comment cuts. With a result
    cache and the file's content hash, the digest of the last run is reused when the same bodies were blank."""
    from spmdcheck.program import prepass

    if f.cuts is None:
        return None
    key = f"{content}:{f.blank}" if content and store is not None else ""
    if key and store is not None and store.digests.get(f.path, ("", ""))[0] == key:
        return store.digests[f.path][1]
    digest = prepass.analysed_digest(f.text, f.blanked, f.cuts, f.blank, f.source.mesh_names)
    if key and store is not None:
        store.note_digest(f.path, key, digest)
    return digest
