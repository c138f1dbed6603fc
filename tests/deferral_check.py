"""Every root of a program run again with module imports deferred (a selective run whose top-level part is
only the files that queue roots: analysis/program.py) must give what the whole program's run gives."""

from __future__ import annotations

import pathlib

from spmdcheck.engine import incremental
from spmdcheck.engine.analyse import check_program_recorded
from spmdcheck.engine.plan import plan_programs
from spmdcheck.rules.registry import load_registry
from spmdcheck.settings import Settings


def deferred_runs_that_differ(root: pathlib.Path, settings: Settings) -> tuple[int, list[str]]:
    """(programs compared, the paths whose diagnostics differ)."""
    files = sorted(str(p) for p in root.rglob("*.py"))
    _, programs = plan_programs(files, settings)
    registry = load_registry(settings.stub_path)
    compared, differ = 0, []
    for program in programs:
        whole, plain = check_program_recorded(program, settings, registry, None)
        record = incremental.ProgramRecord.from_plain(plain) if plain is not None else None
        if record is None:
            continue  # a writer (or a failed parse) keeps no record: always analysed whole
        keys = {r[0] for r in record.roots}
        part = {f for f in record.top_files if f >= 0}
        top_roots = {k for k in keys if k and k[0] == 0}
        plan = incremental.Selective(top_roots, keys, {}, record, set(), part)
        again, _ = check_program_recorded(program, settings, registry, plan)
        compared += 1
        before = {r.path: [d.to_json() for d in r.diagnostics] for r in whole}
        after = {r.path: [d.to_json() for d in r.diagnostics] for r in again}
        differ += [path for path in before if before[path] != after.get(path)]
    return compared, differ
