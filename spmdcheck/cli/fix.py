"""`check --fix`, `--diff` and `--add-noqa` on the command line (the fixes themselves: spmdcheck/fixes/)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from spmdcheck.cli.notes import note
from spmdcheck.cli.parser import EXIT_CLEAN, EXIT_FINDINGS
from spmdcheck.cli.project import run_uncached
from spmdcheck.settings import FileResult

if TYPE_CHECKING:
    from spmdcheck.diagnostics.render import Diagnostic
    from spmdcheck.rules.stubs import Registry
    from spmdcheck.settings import Settings


def print_diff(results: list[FileResult], settings_of: dict[str, Settings]) -> int:
    """--diff: print what every fix (unsafe ones included: nothing is written) would change."""
    from spmdcheck.engine.check import check_source
    from spmdcheck.fixes.rounds import fix_diff, fixable
    from spmdcheck.report import display_path
    from spmdcheck.rules.registry import load_registry

    total = 0
    for r in sorted(results, key=lambda r: r.path):
        if not fixable(r.diagnostics, True):
            continue
        settings = settings_of[r.path]
        registry = load_registry(settings.stub_path)

        def check(
            text: str, path: str = r.path, settings: Settings = settings, registry: Registry = registry
        ) -> list[Diagnostic]:
            return check_source(text, path, settings, registry)

        diff, count = fix_diff(r.path, r.diagnostics, check, display_path(r.path).replace(os.sep, "/"))
        sys.stdout.write(diff)
        total += count
    note(f"would apply {total} fix(es)" if total else "no fixes to apply")
    return EXIT_FINDINGS if total else EXIT_CLEAN


def add_noqa_comments(results: list[FileResult]) -> None:
    from spmdcheck.fixes.noqa import add_noqa

    added = 0
    for r in results:
        if not r.diagnostics:
            continue
        changed, error = add_noqa(r.path, r.diagnostics)
        if error:
            print(f"spmdcheck: {r.path}: {error}", file=sys.stderr)
        added += changed
    note(f"added noqa comments to {added} line(s)")


def fix_files(
    results: list[FileResult],
    files: list[str],
    settings: Settings,
    registry: Registry | None,
    unsafe: bool,
    jobs: int,
    roots: list[str],
    context: list[str],
):
    """Apply fixes in rounds (spmdcheck/fixes/rounds.py says why): each round applies every file's next batch,
    then checks the changed files again, and at the end every file; only the safe fixes without --unsafe-fixes.
    Each file's write is a transaction (spmdcheck/fixes/apply.py); returns the results and how many files could
    not be fixed."""
    from spmdcheck.engine.check import check_source
    from spmdcheck.fixes.apply import FixOutcome, apply_fixes
    from spmdcheck.fixes.rounds import IMPORT_LINE, MAX_ROUNDS, fixable, next_batch
    from spmdcheck.report.printable import printable

    held_back = sum(len(fixable(r.diagnostics, True)) - len(fixable(r.diagnostics, False)) for r in results)
    if held_back and not unsafe:
        note(
            f"{held_back} fix(es) available with --fix --unsafe-fixes (they insert collectives, "
            f"which changes what the program computes: review them, e.g. with --diff)"
        )
    applied: dict[str, int] = {}
    failed: set[str] = set()
    for _ in range(MAX_ROUNDS):
        changed = []
        for r in results:
            batch = next_batch(r.diagnostics, unsafe) if r.path not in failed else []
            if not batch:
                continue
            try:
                outcome = apply_fixes(
                    r.path,
                    batch,
                    IMPORT_LINE,
                    recheck=lambda text, path=r.path: check_source(text, path, settings, registry),
                    roots=roots,
                )
            except Exception as exc:  # noqa: BLE001 - one file's failure must not stop the others
                outcome = FixOutcome(r.path, 0, f"internal error while fixing ({type(exc).__name__}): left unchanged")
            if outcome.error:
                print(f"spmdcheck: {printable(r.path)}: {outcome.error}", file=sys.stderr)
                failed.add(r.path)
            elif outcome.applied:
                applied[r.path] = applied.get(r.path, 0) + outcome.applied
                changed.append(r.path)
        if not changed:
            break
        # the next round needs only the changed files' findings; the report below checks everything again
        unchanged = [f for f in files if f not in changed]  # still the changed files' context
        again = {r.path: r for r in run_uncached(changed, settings, registry, jobs, context + unchanged)}
        results = [again.get(r.path, r) for r in results]
    if applied:
        results = run_uncached(files, settings, registry, jobs, context)
    for path, count in sorted(applied.items()):
        note(f"{printable(path)}: applied {count} fix(es)")
    return results, len(failed)


def fix_stdin(
    data: bytes, result: FileResult, settings: Settings, registry: Registry | None, unsafe: bool
) -> FileResult:
    """`check --fix -`: the fixed source on stdout (the input's bytes when nothing applies), as ruff does;
    in the input's encoding, BOM and line endings."""
    from spmdcheck.engine.check import check_source
    from spmdcheck.fixes.apply import decode, encode
    from spmdcheck.fixes.rounds import fix_in_memory, fixable
    from spmdcheck.settings import FileResult

    source = decode(data)

    def check(text: str) -> list:
        return check_source(text, result.path, settings, registry)

    held_back = len(fixable(result.diagnostics, True)) - len(fixable(result.diagnostics, False))
    if held_back and not unsafe:
        note(f"{held_back} fix(es) available with --fix --unsafe-fixes")
    fixed, applied = (
        fix_in_memory(source.text, check, unsafe, newline=source.newline)
        if fixable(result.diagnostics, unsafe)
        else (source.text, 0)
    )
    try:
        out = encode(source, fixed) if applied else data
    except UnicodeEncodeError:
        print(f"spmdcheck: {result.path}: the fix cannot be written in {source.encoding}", file=sys.stderr)
        out, applied = data, 0
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
    if not applied:
        return result
    note(f"{result.path}: applied {applied} fix(es)")
    return FileResult(result.path, check(fixed))
