"""`spmdcheck check`: discover the files, group them by settings, run each group (cached), report."""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TextIO

from spmdcheck.cli.fix import add_noqa_comments, fix_files, fix_stdin, print_diff
from spmdcheck.cli.notes import note, set_quiet
from spmdcheck.cli.parser import EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE
from spmdcheck.cli.progress import progress_for
from spmdcheck.cli.project import (
    config_arguments,
    file_settings,
    named,
    project_context,
    run_uncached,
    selected_by_config,
    show_settings,
    split_list,
)
from spmdcheck.settings import FileResult

if TYPE_CHECKING:
    from spmdcheck.config.resolve import Config, ConfigResolver
    from spmdcheck.diagnostics.render import Diagnostic
    from spmdcheck.engine.result_cache import ResultCache
    from spmdcheck.frontend.source import ParseFailure
    from spmdcheck.rules.stubs import Registry
    from spmdcheck.settings import Settings


def check(args: argparse.Namespace) -> int:
    from spmdcheck.config.resolve import ConfigError, ConfigResolver
    from spmdcheck.engine.collection import defer_cycle_collection
    from spmdcheck.rules.cache import use_disk_cache

    defer_cycle_collection()  # this process ends with the run
    set_quiet(args.quiet)
    use_disk_cache(not args.no_cache)  # --no-cache bypasses the stub registry's cache too
    paths = args.paths or ["."]
    if not _arguments_valid(args):
        return EXIT_USAGE
    try:
        explicit, overrides = config_arguments(args.config, args.exclude, args.extend_exclude)
    except ConfigError as exc:
        print(f"spmdcheck: SPMD005 config-error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    resolver = ConfigResolver(explicit, args.isolated, overrides)
    if args.show_settings:
        return show_settings(resolver, args, paths[0])
    first = pathlib.Path(paths[0]) if paths[0] != "-" else pathlib.Path.cwd()
    if not first.exists():  # missing, or a symlink loop (which Path.resolve() raises on): its folder's config
        first = pathlib.Path(os.path.abspath(first)).parent
    primary = resolver.for_path(first)
    run = _CheckRun(args, paths, resolver, primary)
    files = run.discover()
    by_settings: dict = {}
    for f in files:
        cfg = resolver.for_path(pathlib.Path(f) if run.stdin_text is None else pathlib.Path(f).parent)
        by_settings.setdefault(file_settings(cfg, args, f), []).append(f)
    if resolver.errors:  # as ruff: a broken config stops the run (its files would be checked with other rules)
        for error in resolver.errors:
            print(f"spmdcheck: SPMD005 config-error: {error}", file=sys.stderr)
        return EXIT_USAGE
    if not files and not run.status and not any(os.path.isfile(p) for p in paths):
        # as mypy: folders that hold nothing to check are a mistake (a mistyped CI path), not a pass; a file
        # named and excluded (pre-commit's staged files, with --force-exclude) is checked as nothing, as ruff
        print(f"spmdcheck: error: no Python files found under {', '.join(paths)}", file=sys.stderr)
        return EXIT_USAGE
    if args.show_types:
        try:
            with output_stream(args) as out:
                show_types(by_settings, run.stdin_text, args, out, run.context_for)
        except OutputFileError as exc:
            print(f"spmdcheck: {exc}", file=sys.stderr)
            return EXIT_USAGE
        return run.status
    results = []
    for settings, group in by_settings.items():
        results += run.check_group(settings, group, len(by_settings))
    diags = run.diags
    for r in results:
        diags.extend(r.diagnostics)
    if args.verbose:
        print_notes(results)
    diags.sort(key=lambda d: d.sort_key())
    if args.diff:
        settings_of = {f: settings for settings, group in by_settings.items() for f in group}
        return print_diff(results, settings_of, run.programs, run._jobs()) if run.status == EXIT_CLEAN else EXIT_USAGE
    stdin_text = run.stdin_text if isinstance(run.stdin_text, str) else None
    if args.fix and args.paths == ["-"] and not args.diff:
        # with `-` and --fix, stdout holds the fixed source (as ruff does), so the report goes to stderr
        return report(args, diags, len(files), stdin_text, run.status, sys.stderr)
    try:
        with output_stream(args) as out:
            return report(args, diags, len(files), stdin_text, run.status, out)
    except OutputFileError as exc:
        print(f"spmdcheck: {exc}", file=sys.stderr)
        return EXIT_USAGE


class OutputFileError(Exception):
    """The file of `-o/--output-file` cannot be written (a usage error, not a failure of the checker)."""


@contextlib.contextmanager
def output_stream(args: argparse.Namespace) -> Iterator[TextIO]:
    """Where the report goes: stdout, or the file of `-o/--output-file` (its folders made, as ruff does)."""
    if not args.output_file:
        yield sys.stdout
        return
    target = pathlib.Path(args.output_file)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        out = target.open("w", encoding="utf-8", newline="")
    except OSError as exc:
        raise OutputFileError(f"--output-file {args.output_file}: cannot write it ({exc.strerror or exc})") from exc
    with out:
        yield out


def _arguments_valid(args: argparse.Namespace) -> bool:
    """The rule selectors and stub folders of the command line (a wrong one is a usage error, said on stderr)."""
    from spmdcheck.config.resolve import valid_selector

    for pattern in (*split_list(args.select), *split_list(args.extend_select), *split_list(args.ignore)):
        if not valid_selector(pattern):
            print(f"spmdcheck: unknown rule selector {pattern!r} (see `spmdcheck rules`)", file=sys.stderr)
            return False
    for stub_dir in args.stub_path:
        if not os.path.isdir(stub_dir):
            print(f"spmdcheck: --stub-path {stub_dir}: not a directory", file=sys.stderr)
            return False
    return True


class _CheckRun:
    """One `spmdcheck check`: its files (or stdin), then each settings group checked (cached), fixed as asked."""

    def __init__(self, args: argparse.Namespace, paths: list[str], resolver: ConfigResolver, primary: Config) -> None:
        self.args, self.paths, self.resolver, self.primary = args, paths, resolver, primary
        self.status = EXIT_CLEAN
        self.stdin_text: str | ParseFailure | None = None
        self.stdin_bytes: bytes | None = None
        self.diags: list[Diagnostic] = []  # stub errors (the groups' results are added by `check`)
        self.reported: set[tuple[str, ...]] = set()  # the stub paths whose errors were reported
        self.programs: dict[str, list[str]] = {}  # each file checked -> the files checked with it (--diff)

    def discover(self) -> list[str]:
        """The files to check (stdin's name for `-`); missing or unreadable paths are said on stderr."""
        from spmdcheck.frontend.discovery import discover
        from spmdcheck.frontend.source import decode_source
        from spmdcheck.report.printable import printable

        args, paths, primary = self.args, self.paths, self.primary
        unreadable: list[str] = []
        if paths == ["-"]:
            self.stdin_bytes = sys.stdin.buffer.read()
            self.stdin_text = decode_source(self.stdin_bytes)  # as a file is read: BOM, coding cookie
            files, missing = [args.stdin_filename or "<stdin>"], []
        else:
            files, missing = discover(
                paths,
                primary.root,
                primary.discovery_excludes(),
                primary.respect_gitignore and not args.no_respect_gitignore,
                args.force_exclude,
                errors=unreadable,
            )
            named_files = {str(pathlib.Path(p)) for p in paths if os.path.isfile(p)}
            # each file obeys the include/exclude of its own (closest) config
            files = [
                f
                for f in files
                if (f in named_files and not args.force_exclude) or selected_by_config(self.resolver, f)
            ]
        for m in missing:
            print(f"spmdcheck: {printable(m)}: no such file or directory", file=sys.stderr)
        for problem in unreadable:  # a symlink loop, an unreadable folder, a FIFO named on the command line
            print(f"spmdcheck: {printable(problem)}", file=sys.stderr)
        if missing or unreadable:
            self.status = EXIT_USAGE
        return files

    def check_group(self, settings: Settings, group: list[str], groups: int) -> list[FileResult]:
        """The results of one settings group's files (of `groups`), after the fixes asked for."""
        from spmdcheck.rules.registry import load_registry

        args, stdin_text = self.args, self.stdin_text
        context: list[str] = []  # other files of the group's packages, analysed with it but not reported
        store = open_cache(args, self.primary.root, settings) if stdin_text is None else None
        registry = self._stubs(settings, store)
        if stdin_text is not None and not isinstance(stdin_text, str):  # a ParseFailure: undecodable bytes
            from spmdcheck.diagnostics.render import diagnostic_of
            from spmdcheck.diagnostics.violations.inputs import SyntaxErrorFound

            undecodable = SyntaxErrorFound("undecodable", stdin_text.message)
            group_results = [FileResult(group[0], [diagnostic_of(group[0], undecodable, stdin_text.line)])]
        elif stdin_text is not None:
            from spmdcheck.engine.buffers import check_in_program

            context = self.context_for(group, settings)  # as for a file
            found, _ = check_in_program(group[0], stdin_text, settings, registry, context)
            group_results = [FileResult(group[0], found)]
            if args.fix and not args.diff:
                assert self.stdin_bytes is not None, "read with the text"
                fixed = fix_stdin(self.stdin_bytes, group_results[0], settings, registry, args.unsafe_fixes, context)
                group_results = [fixed]
        else:
            from spmdcheck.engine.run import run_check

            # one settings group: the folders named hold only its files, so the context need not walk them
            walked = frozenset(os.path.realpath(p) for p in self.paths if groups == 1 and os.path.isdir(p))
            context = self.context_for(group, settings, walked)
            focus = frozenset(group) if context else None
            jobs = self._jobs()
            with progress_for(self.args, len(group) + len(context)) as progress:  # erased before anything else
                checked = run_check(group + context, settings, registry, jobs, store, focus, progress=progress)
            group_results = named(checked, group)
            if store is not None:
                store.save()
        program = group + context
        self.programs.update((f, program) for f in group)
        if registry is None and (args.diff or args.add_noqa or args.fix):
            registry = load_registry(settings.stub_path)
        if args.diff or stdin_text is not None:
            pass  # --diff writes nothing; stdin has no file (with --fix, the fixed text went to stdout)
        elif args.add_noqa:
            add_noqa_comments(group_results)
            group_results = run_uncached(group, settings, registry, self._jobs(), context)
        elif args.fix:
            roots = [p if os.path.isdir(p) else os.path.dirname(p) or "." for p in self.paths]
            group_results, unfixed = fix_files(
                group_results, group, settings, registry, args.unsafe_fixes, self._jobs(), roots, context
            )
            if unfixed:  # every file that could not be written was named on stderr
                self.status = EXIT_USAGE
        return group_results

    def context_for(self, group: list[str], settings: Settings, walked: frozenset[str] = frozenset()) -> list[str]:
        """The other files of the group's packages, analysed with it but not reported (`project_context`);
        none with --no-project-context, or for stdin without --stdin-filename (it has no folder)."""
        args = self.args
        if not self.primary.project_context or args.no_project_context:
            return []
        if self.stdin_text is not None and not args.stdin_filename:
            return []
        return project_context(group, settings, self.resolver, args, self.primary, walked)

    def _jobs(self) -> int:
        return self.args.jobs if self.args.jobs is not None else self.primary.jobs

    def _stubs(self, settings: Settings, store: ResultCache | None) -> Registry | None:
        """The registry (None: not loaded, a cached run reads only the cache); its stub errors reported once
        for groups with the same stubs."""
        from spmdcheck.diagnostics.render import diagnostic_of
        from spmdcheck.diagnostics.violations.inputs import ConfigError
        from spmdcheck.rules.registry import load_registry

        registry = None
        if store is not None and store.stub_errors is not None:
            stub_errors = store.stub_errors  # the stub files are part of the cache's key
        else:
            registry = load_registry(settings.stub_path)
            stub_errors = registry.errors
            if store is not None:
                store.set_stub_errors(registry.errors)
        if settings.stub_path not in self.reported:
            self.reported.add(settings.stub_path)
            self.diags += [diagnostic_of(e.split(":", 1)[0], ConfigError("stub", e)) for e in stub_errors]
        return registry


def print_notes(results: list[FileResult]) -> None:
    """`--verbose`: what each file's check left out, silently otherwise (analysis/budget.py), on stderr."""
    from spmdcheck.diagnostics.render import display_path

    for r in results:
        for budget_note in r.notes:
            print(f"spmdcheck: note: {display_path(r.path)}: {budget_note}", file=sys.stderr)


def open_cache(args: argparse.Namespace, root: pathlib.Path, settings: Settings) -> ResultCache | None:
    """The result store for `settings` in the project `root`; None with --no-cache, a diff, fixes or stdin."""
    if args.no_cache or os.environ.get("SPMDCHECK_NO_CACHE") or args.fix or args.add_noqa or args.diff:
        return None
    from spmdcheck.engine import result_cache as cache
    from spmdcheck.rules.registry import shipped_stubs

    directory = cache.locate(pathlib.Path(root))
    if directory is None:
        return None
    stub_dirs = [shipped_stubs(), *(pathlib.Path(p) for p in settings.stub_path)]
    return cache.ResultCache.open(directory, cache.run_key(settings, stub_dirs))


def show_types(
    by_settings: dict,
    stdin_text: str | ParseFailure | None,
    args: argparse.Namespace,
    out: TextIO,
    context_for: Callable[[list[str], Settings], list[str]],
) -> None:
    """`check --show-types`: each settings group analysed as one program with the rest of its packages'
    files (`context_for`, as a check analyses them; stdin's text as its --stdin-filename), printed in file
    order. Files of one module name (`a.py` and `sub/a.py`, neither in a package) are analysed in separate
    programs, as a check analyses them: one program holds one module of each name."""
    from spmdcheck.engine.buffers import typed_in_program
    from spmdcheck.engine.typeinfo import TypedFile
    from spmdcheck.report import use_color
    from spmdcheck.report.types_report import write_types_json, write_types_text
    from spmdcheck.rules.registry import load_registry

    typed = []
    for settings, group in by_settings.items():
        registry = load_registry(settings.stub_path)
        context = context_for(group, settings) if stdin_text is None or isinstance(stdin_text, str) else []
        if isinstance(stdin_text, str):
            typed += typed_in_program(group, settings, registry, context, {group[0]: stdin_text})
        elif stdin_text is not None:  # undecodable input: nothing to type (a check reports why)
            typed.append(TypedFile(group[0]))
        else:
            for program in programs_by_module_name(group):
                typed += typed_in_program(program, settings, registry, context)
    typed.sort(key=lambda t: t.path)
    if args.output_format == "json":
        write_types_json(typed, out)
    else:
        write_types_text(typed, out, use_color(args.color, out))


def programs_by_module_name(files: list[str]) -> list[list[str]]:
    """`files` split so that no two files of one list have the same module name (the first file of each
    name in the first list, the next in the second, ...), in their given order."""
    from spmdcheck.program.graph import module_name_for

    programs: list[list[str]] = []
    seen: dict[str, int] = {}  # module name -> how many lists hold one of that name already
    for f in files:
        name = module_name_for(f, os.path.exists).name
        index = seen.get(name, 0)
        seen[name] = index + 1
        if index == len(programs):
            programs.append([])
        programs[index].append(f)
    return programs


def report(
    args: argparse.Namespace, diags: list, files: int, stdin_text: str | None, status: int, out: TextIO
) -> int:
    from spmdcheck.report import ReportContext, use_color, write_report
    from spmdcheck.report.sources import SourceLines

    sources = SourceLines({args.stdin_filename or "<stdin>": stdin_text} if stdin_text is not None else None)
    if args.write_baseline:
        from spmdcheck.report.baseline import BaselineError, write_baseline

        try:
            count = write_baseline(pathlib.Path(args.write_baseline), diags, sources)
        except BaselineError as exc:
            print(f"spmdcheck: {exc}", file=sys.stderr)
            return EXIT_USAGE
        note(f"wrote {count} finding(s) to the baseline {args.write_baseline}")
        return status
    if args.baseline:
        from spmdcheck.report.baseline import BaselineError, new_findings, read_baseline

        try:
            accepted = read_baseline(pathlib.Path(args.baseline))
        except BaselineError as exc:
            print(f"spmdcheck: {exc}", file=sys.stderr)
            return EXIT_USAGE
        before = len(diags)
        diags = new_findings(diags, accepted, pathlib.Path(args.baseline), sources)
        if before != len(diags):
            note(f"{before - len(diags)} finding(s) in the baseline not shown")
    color = use_color(args.color, out)
    if args.statistics:
        from spmdcheck.report.statistics import write_statistics

        write_statistics(diags, args.output_format, color, out, args.unsafe_fixes)
    else:
        context = ReportContext(
            files, color, sources, incomplete=status == EXIT_USAGE, quiet=args.quiet, unsafe_fixes=args.unsafe_fixes
        )
        write_report(args.output_format, diags, context, out)
    # a checker failure or a configuration error (config file, header comment, stub) is not a finding
    if status == EXIT_USAGE or any(d.code in ("SPMD000", "SPMD005") for d in diags):
        return EXIT_USAGE
    findings = [d for d in diags if d.severity != "note"]  # notes (reveal_spmd_type) never fail a run
    if findings and not args.exit_zero:  # after --add-noqa: what a noqa cannot silence (syntax errors)
        return EXIT_FINDINGS
    return EXIT_CLEAN
