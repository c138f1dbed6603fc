"""`check --fix`, `--diff` and `--add-noqa` on the command line (the fixes themselves: spmdcheck/fixes/)."""

from __future__ import annotations

import os
import pathlib
import sys
from typing import TYPE_CHECKING

from spmdcheck.cli.notes import note
from spmdcheck.cli.parser import EXIT_CLEAN, EXIT_FINDINGS
from spmdcheck.cli.project import run_uncached
from spmdcheck.settings import FileResult

if TYPE_CHECKING:
    from spmdcheck.rules.stubs import Registry
    from spmdcheck.settings import Settings


def print_diff(
    results: list[FileResult], settings_of: dict[str, Settings], programs: dict[str, list[str]], jobs: int = 1
) -> int:
    """--diff: what `--fix --unsafe-fixes` would write, as a unified diff; nothing is written. The same rounds
    run on a private copy of the files each fixable file is checked with (`programs`: its group's and their
    project context), so a fix whose effect reaches another file (a finding there in a later round) shows as
    --fix makes it (as ruff's --diff shows the fixed files)."""
    from spmdcheck.fixes.rounds import fixable
    from spmdcheck.rules.registry import load_registry

    total = 0
    groups: dict[tuple[str, ...], list[FileResult]] = {}
    for r in results:
        program = programs.get(r.path, [r.path])
        groups.setdefault(tuple(program), []).append(r)
    for program, group_results in sorted(groups.items()):
        if not any(fixable(r.diagnostics, True) for r in group_results):
            continue
        settings = settings_of[group_results[0].path]
        registry = load_registry(settings.stub_path)
        reported = [r.path for r in group_results]
        diffs, count = _program_diff(reported, [f for f in program if f not in set(reported)], settings, registry, jobs)
        for diff in diffs:
            sys.stdout.write(diff)
        total += count
    note(f"would apply {total} fix(es)" if total else "no fixes to apply")
    return EXIT_FINDINGS if total else EXIT_CLEAN


def _program_diff(
    files: list[str], context: list[str], settings: Settings, registry: Registry, jobs: int
) -> tuple[list[str], int]:
    """The diffs `fix_files` makes to `files` (checked with `context`), run on a copy: the files, their context
    and the `__init__.py` of their packages, under a temporary folder laid out as the originals are from their
    common import root (so every module keeps its name)."""
    import difflib
    import shutil
    import tempfile

    from spmdcheck.fixes.apply import decode
    from spmdcheck.frontend.lines import physical_lines
    from spmdcheck.program.graph import import_root
    from spmdcheck.report import display_path

    originals = [os.path.abspath(f) for f in files + context]
    packages = set()
    for path in originals:
        folder, root = os.path.dirname(path), import_root(path)
        while folder != root and len(folder) > len(root):
            packages.add(os.path.join(folder, "__init__.py"))
            folder = os.path.dirname(folder)
    base = os.path.commonpath([import_root(p) for p in originals])
    scratch = tempfile.mkdtemp(prefix="spmdcheck-diff-")
    try:
        copy_of = {}
        for path in sorted(set(originals) | packages):
            target = os.path.join(scratch, os.path.relpath(path, base))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            try:
                shutil.copyfile(path, target)
            except OSError:
                continue  # unreadable: the run skips it too
            copy_of[path] = target
        copied = [copy_of[os.path.abspath(f)] for f in files if os.path.abspath(f) in copy_of]
        copied_context = [copy_of[os.path.abspath(f)] for f in context if os.path.abspath(f) in copy_of]
        first = run_uncached(copied, settings, registry, jobs, copied_context)
        counts: dict[str, int] = {}
        fix_files(first, copied, settings, registry, True, jobs, [scratch], copied_context, counts=counts, quiet=True)
        diffs, total = [], 0
        for f in sorted(files):
            target = copy_of.get(os.path.abspath(f))
            if target is None or not counts.get(target):
                continue
            try:
                # as the checker reads them: coding cookie, BOM, line endings
                before = decode(pathlib.Path(f).read_bytes()).text
                after = decode(pathlib.Path(target).read_bytes()).text
            except (OSError, SyntaxError, UnicodeDecodeError, LookupError):
                continue
            if before == after:
                continue
            shown = display_path(f).replace(os.sep, "/")
            old, new = (f"a/{shown}", f"b/{shown}") if not shown.startswith("/") else (shown, shown)
            lines = difflib.unified_diff(
                physical_lines(before, keepends=True), physical_lines(after, keepends=True), fromfile=old, tofile=new
            )
            ending = "\n\\ No newline at end of file\n"
            diffs.append("".join(x if x.endswith(("\n", "\r")) else x + ending for x in lines))
            total += counts[target]
        return diffs, total
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


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
    counts: dict[str, int] | None = None,
    quiet: bool = False,
):
    """Apply fixes in rounds (spmdcheck/fixes/rounds.py says why): each round applies every file's next batch,
    then checks again, with their whole programs, the files that import or are imported by a changed one
    (directly or not: a fix can change what a helper in another file receives), as the command line checks
    them; at the end every file; only the safe fixes without --unsafe-fixes. Each file's write is a
    transaction (spmdcheck/fixes/apply.py); returns the results and how many files could not be fixed.
    `counts` receives each changed file's number of fixes; `quiet`: no notes (--diff runs this on a copy)."""
    from spmdcheck.engine.check import check_source
    from spmdcheck.fixes.apply import FixOutcome, apply_fixes
    from spmdcheck.fixes.rounds import IMPORT_LINE, MAX_ROUNDS, fixable, next_batch
    from spmdcheck.report.printable import printable

    held_back = sum(len(fixable(r.diagnostics, True)) - len(fixable(r.diagnostics, False)) for r in results)
    if held_back and not unsafe and not quiet:
        note(
            f"{held_back} fix(es) available with --fix --unsafe-fixes (they insert collectives, "
            f"which changes what the program computes: review them, e.g. with --diff)"
        )
    applied: dict[str, int] = {}
    failed: set[str] = set()
    programs: ConnectedFiles | None = None
    for _ in range(MAX_ROUNDS):
        changed = []
        for r in results:
            batch = next_batch(r.diagnostics, unsafe) if r.path not in failed else []
            if not batch:
                continue
            try:
                # one batch: what it leads to is found by the program's check below, not by the file's alone
                outcome = apply_fixes(
                    r.path,
                    batch,
                    IMPORT_LINE,
                    recheck=lambda text, path=r.path: check_source(text, path, settings, registry),
                    roots=roots,
                    rounds=1,
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
        # the next round needs the findings of every file whose program holds a changed file: those
        # programs are analysed whole (their other files' findings are as a whole run finds them)
        if programs is None:
            programs = ConnectedFiles(files + context)
        affected = programs.around(changed)
        recheck = [f for f in files if f in affected]
        unaffected = [f for f in files if f not in affected]  # still the rechecked files' context
        again = run_uncached(recheck, settings, registry, jobs, context + unaffected)
        by_path = {r.path: r for r in again}
        results = [by_path.get(r.path, r) for r in results]
    if applied:
        results = run_uncached(files, settings, registry, jobs, context)
    if counts is not None:
        counts.update(applied)
    for path, count in sorted(applied.items()) if not quiet else ():
        note(f"{printable(path)}: applied {count} fix(es)")
    return results, len(failed)


class ConnectedFiles:
    """The files of `paths` connected to given ones by imports, in either direction, directly or not: the
    files a whole run analyses in one program with them (`engine.plan.plan_programs`). Read once: fixes add
    imports of installed modules (spmd_types, Megatron's mappings), not of the files checked."""

    def __init__(self, paths: list[str]) -> None:
        from spmdcheck.program.graph import build_graph

        sources: dict[str, bytes] = {}
        for path in paths:
            try:
                with open(path, "rb") as fh:
                    sources[path] = fh.read()
            except OSError:
                continue  # not analysed by the run either
        graph = build_graph(sources)
        self.paths = list(paths)
        neighbours: dict[str, set[str]] = {name: set() for name in graph.modules}  # imports, either way
        for importer, targets in graph.edges.items():
            for target in targets:
                neighbours[importer].add(target)
                neighbours[target].add(importer)
        part_of: dict[str, int] = {}  # module name -> its connected part
        parts = 0
        for start in graph.modules:
            if start in part_of:
                continue
            todo, part_of[start], parts = [start], parts, parts + 1
            while todo:
                for other in neighbours[todo.pop()]:
                    if other not in part_of:
                        part_of[other] = part_of[start]
                        todo.append(other)
        self.part = {module.path: part_of[name] for name, module in graph.modules.items()}  # path -> its part

    def around(self, changed: list[str]) -> set[str]:
        """The paths connected to a changed one (every path when one is not in the graph: a second file of
        one module name, say, analysed apart)."""
        parts = {self.part.get(path) for path in changed}
        if None in parts:
            return set(self.paths)
        return {path for path, part in self.part.items() if part in parts}


def fix_stdin(
    data: bytes,
    result: FileResult,
    settings: Settings,
    registry: Registry | None,
    unsafe: bool,
    context: list[str],
) -> FileResult:
    """`check --fix -`: the fixed source on stdout (the input's bytes when nothing applies), as ruff does;
    in the input's encoding, BOM and line endings. Every round checks the text with the rest of its program
    (`context`: --stdin-filename's packages), as the first did."""
    from spmdcheck.engine.buffers import DiskTexts, check_in_program
    from spmdcheck.fixes.apply import decode, encode
    from spmdcheck.fixes.rounds import fix_in_memory, fixable
    from spmdcheck.settings import FileResult

    source = decode(data)
    disk = DiskTexts()

    def check(text: str) -> list:
        return check_in_program(result.path, text, settings, registry, context, disk=disk)[0]

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
