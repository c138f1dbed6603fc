"""Command line: `spmdcheck check [PATHS]`, `explain CODE`, `rule CODE|--all`, `rules`, `server`.

Exit status: 0 nothing found, 1 diagnostics found, 2 usage or configuration error.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from spmdcheck.check_options import add_check_arguments

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="spmdcheck", description="Static SPMD type checker for rank-local PyTorch code.")
    sub = ap.add_subparsers(dest="command")
    check = sub.add_parser("check", help="check files and folders (default: .)")
    add_check_arguments(check)
    # -- editor/inspection surface (issue 8 items 5-6) --
    check.add_argument(
        "--show-types",
        action="store_true",
        help="print every assignment's inferred SPMD type and gradient type instead of the diagnostics",
    )
    rule = sub.add_parser("rule", help="explain a rule by code or name (alias of explain), or list them with --all")
    rule.add_argument("code", nargs="?", default=None)
    rule.add_argument("--all", action="store_true", help="every rule")
    rule.add_argument("--output-format", choices=("text", "json", "markdown"), default="text")
    server = sub.add_parser("server", help="run the language server (stdio; needs the `lsp` extra)")
    server.add_argument("--stdio", action="store_true", help="talk over stdin/stdout (the default and only transport)")
    explain = sub.add_parser("explain", help="print the documentation of a diagnostic code")
    explain.add_argument("code")
    clean = sub.add_parser("clean", help="remove the result cache (.spmdcheck_cache/) of the project")
    clean.add_argument("paths", nargs="*", default=None)
    rules = sub.add_parser("rules", help="list every diagnostic code")
    rules.add_argument("--output-format", choices=("text", "json"), default="text")
    return ap


def run() -> NoReturn:
    """The `spmdcheck` command: `main`, then leave at once. A check leaves a million objects behind (syntax
    trees held in cycles the deferred collector never visited: `api.defer_cycle_collection`), and an
    interpreter that tears them down at exit spends a tenth of a cold run on it (mypy leaves the same way).
    Everything the command writes is written and closed before `main` returns; only the standard streams
    are buffered, and they are flushed here."""
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that closed the pipe, or a closed stream: nothing to lose
            pass
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    ap = _parser()
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code not in (0, None) else EXIT_CLEAN
    if args.command == "explain":
        return _explain(args.code)
    if args.command == "rules":
        return _rules(args.output_format)
    if args.command == "clean":
        return _clean(args.paths or ["."])
    if args.command == "rule":
        return _rule(args)
    if args.command == "server":
        return _server()
    if args.command != "check":
        ap.print_help(sys.stderr)
        return EXIT_USAGE
    return _check(args)


def _explain(code: str) -> int:
    from spmdcheck.diagnostics.codes import lookup

    info = lookup(code)
    if info is None:
        print(f"spmdcheck: unknown code {code!r} (see `spmdcheck rules`)", file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.write(info.page())
    return EXIT_CLEAN


def _rules(fmt: str) -> int:
    from spmdcheck.diagnostics.codes import CODES

    if fmt == "json":
        json.dump(
            [
                {
                    "code": c.code,
                    "name": c.name,
                    "severity": c.severity,
                    "summary": c.summary,
                    "strict_only": c.strict_only,
                }
                for c in CODES.values()
            ],
            sys.stdout,
            indent=2,
        )
        sys.stdout.write("\n")
        return EXIT_CLEAN
    for c in CODES.values():
        flag = " (strict)" if c.strict_only else ""
        print(f"{c.code}  {c.name:<34} {c.severity:<8} {c.summary}{flag}")
    return EXIT_CLEAN


def _clean(paths: list[str]) -> int:
    from spmdcheck.cache import remove
    from spmdcheck.config import ConfigResolver

    first = pathlib.Path(paths[0])
    root = ConfigResolver(None, False, {}).for_path(first if first.exists() else pathlib.Path.cwd()).root
    for removed in remove(pathlib.Path(root)):
        print(f"spmdcheck: removed {removed}", file=sys.stderr)
    return EXIT_CLEAN


def _open_cache(args: argparse.Namespace, root: pathlib.Path, settings):  # noqa: ANN001, ANN202
    """The result store for `settings` in the project `root`; None with --no-cache, a diff, fixes or stdin."""
    if args.no_cache or os.environ.get("SPMDCHECK_NO_CACHE") or args.fix or args.add_noqa or args.diff:
        return None
    from spmdcheck import cache
    from spmdcheck.api import shipped_stubs

    directory = cache.locate(pathlib.Path(root))
    if directory is None:
        return None
    stub_dirs = [shipped_stubs(), *(pathlib.Path(p) for p in settings.stub_path)]
    return cache.ResultCache.open(directory, cache.run_key(settings, stub_dirs))


def _rule(args: argparse.Namespace) -> int:
    from spmdcheck.diagnostics.catalog import render_rules

    if args.all == (args.code is not None):
        print("spmdcheck: give a rule code or name, or --all", file=sys.stderr)
        return EXIT_USAGE
    if args.code is not None and args.output_format == "text":
        return _explain(args.code)
    text = render_rules(None if args.all else args.code, args.output_format)
    if text is None:
        print(f"spmdcheck: unknown code {args.code!r} (see `spmdcheck rule --all`)", file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.write(text)
    return EXIT_CLEAN


def _server() -> int:
    from spmdcheck.server import build

    try:
        server = build()
    except ImportError as exc:
        print(
            f"spmdcheck: the language server needs pygls and lsprotocol ({exc.name} is missing): "
            "pip install 'spmdcheck[lsp]'",
            file=sys.stderr,
        )
        return EXIT_USAGE
    server.start_io()
    return EXIT_CLEAN


def _show_types(by_settings: dict, stdin_text: str | None, args: argparse.Namespace) -> None:
    """`check --show-types`: each settings group analysed as one program, printed in file order."""
    from spmdcheck.api import load_registry
    from spmdcheck.report import use_color
    from spmdcheck.report.types_report import write_types_json, write_types_text
    from spmdcheck.typeinfo import infer_files, infer_source

    typed = []
    for settings, group in by_settings.items():
        registry = load_registry(settings.stub_path)
        if stdin_text is not None:
            typed.append(infer_source(stdin_text, group[0], settings, registry))
        else:
            typed += infer_files(group, settings, registry)
    typed.sort(key=lambda t: t.path)
    if args.output_format == "json":
        write_types_json(typed, sys.stdout)
    else:
        write_types_text(typed, sys.stdout, use_color(args.color, sys.stdout))


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip()) if value else ()


def _config_arguments(values: list[str]) -> tuple[pathlib.Path | None, dict]:
    """`--config` values: at most one existing file, the rest `key = value` overrides (as ruff decides)."""
    from spmdcheck.config import ConfigError, merge, parse_override

    explicit: pathlib.Path | None = None
    overrides: dict = {}
    for value in values:
        if pathlib.Path(value).is_file():
            if explicit is not None:
                raise ConfigError(f"--config: two config files given ({explicit}, {value}); give at most one")
            explicit = pathlib.Path(value)
        elif "=" not in value and value.endswith(".toml"):
            raise ConfigError(f"--config {value}: no such config file")
        else:
            overrides = merge(overrides, parse_override(value))
    return explicit, overrides


def _file_settings(cfg, args: argparse.Namespace, path: str):  # noqa: ANN001, ANN202
    """The settings one file is checked with: its config, then the command line on top."""
    from spmdcheck.api import Settings

    select = _split(args.select) or cfg.select
    extend = cfg.extend_select + _split(args.extend_select)
    return Settings(
        mesh=_split(args.mesh) or cfg.mesh,
        strict=cfg.strict if args.strict is None else True,
        preview=cfg.preview or bool(getattr(args, "preview", False)),
        stub_path=tuple(cfg.stub_path) + tuple(str(pathlib.Path(p).resolve()) for p in args.stub_path),
        select=select + extend if select else (),
        ignore=_split(args.ignore) + cfg.ignore + cfg.ignores_for(pathlib.Path(path)),
    )


def _show_settings(resolver, args: argparse.Namespace, path: str) -> int:  # noqa: ANN001
    """Print what `path` is checked with (TOML-like, one key a line), like `ruff check --show-settings`."""
    from spmdcheck.api import _selected
    from spmdcheck.diagnostics.codes import CODES

    cfg = resolver.for_path(pathlib.Path(path))
    for error in resolver.errors:
        print(f"spmdcheck: SPMD005 config-error: {error}", file=sys.stderr)
    settings = _file_settings(cfg, args, path)
    rows = {
        "file": str(pathlib.Path(path).resolve()),
        "config-file": str(cfg.source) if cfg.source else None,
        "mesh": list(settings.mesh),
        "strict": settings.strict,
        "preview": settings.preview,
        "stub-path": list(settings.stub_path),
        "include": [f"{g.base}/{g.pattern}" for g in cfg.include],
        "exclude": [f"{g.base}/{g.pattern}" for g in cfg.exclude],
        "excluded": cfg.excluded(pathlib.Path(path)) or not cfg.included(pathlib.Path(path)),
        "select": list(settings.select),
        "ignore": list(settings.ignore),
        "enabled-codes": [c for c in CODES if _selected(c, settings)],
        "respect-gitignore": cfg.respect_gitignore,
        "project-context": cfg.project_context and not args.no_project_context,
        "jobs": cfg.jobs,
    }
    for key, value in rows.items():
        print(f"{key} = {json.dumps(value)}")
    return EXIT_USAGE if resolver.errors else EXIT_CLEAN


def _check(args: argparse.Namespace) -> int:
    from spmdcheck.api import defer_cycle_collection, load_registry
    from spmdcheck.config import ConfigError, ConfigResolver, valid_selector
    from spmdcheck.diagnostics.render import make
    from spmdcheck.discovery import discover

    defer_cycle_collection()  # this process ends with the run
    from spmdcheck.rules.cache import use_disk_cache

    use_disk_cache(not args.no_cache)  # --no-cache bypasses the stub registry's cache too
    status = EXIT_CLEAN
    paths = args.paths or ["."]
    for pattern in (*_split(args.select), *_split(args.extend_select), *_split(args.ignore)):
        if not valid_selector(pattern):
            print(f"spmdcheck: unknown rule selector {pattern!r} (see `spmdcheck rules`)", file=sys.stderr)
            return EXIT_USAGE
    for stub_dir in args.stub_path:
        if not os.path.isdir(stub_dir):
            print(f"spmdcheck: --stub-path {stub_dir}: not a directory", file=sys.stderr)
            return EXIT_USAGE
    try:
        explicit, overrides = _config_arguments(args.config)
    except ConfigError as exc:
        print(f"spmdcheck: SPMD005 config-error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    resolver = ConfigResolver(explicit, args.isolated, overrides)
    if args.show_settings:
        return _show_settings(resolver, args, paths[0])
    first = pathlib.Path(paths[0]) if paths[0] != "-" else pathlib.Path.cwd()
    if not first.exists():  # missing, or a symlink loop (which Path.resolve() raises on): its folder's config
        first = pathlib.Path(os.path.abspath(first)).parent
    primary = resolver.for_path(first)
    from spmdcheck.frontend.source import ParseFailure, decode_source
    from spmdcheck.report.printable import printable

    stdin_text = stdin_bytes = None
    unreadable: list[str] = []
    if paths == ["-"]:
        stdin_bytes = sys.stdin.buffer.read()
        stdin_text = decode_source(stdin_bytes)  # as a file is read: BOM, coding cookie
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
        named = {str(pathlib.Path(p)) for p in paths if os.path.isfile(p)}
        # each file obeys the include/exclude of its own (closest) config
        files = [f for f in files if (f in named and not args.force_exclude) or _selected_by_config(resolver, f)]
    for m in missing:
        print(f"spmdcheck: {printable(m)}: no such file or directory", file=sys.stderr)
    for problem in unreadable:  # a symlink loop, an unreadable folder, a FIFO named on the command line
        print(f"spmdcheck: {printable(problem)}", file=sys.stderr)
    if missing or unreadable:
        status = EXIT_USAGE
    by_settings: dict = {}
    for f in files:
        cfg = resolver.for_path(pathlib.Path(f) if stdin_text is None else pathlib.Path(f).parent)
        by_settings.setdefault(_file_settings(cfg, args, f), []).append(f)
    for error in resolver.errors:
        print(f"spmdcheck: SPMD005 config-error: {error}; checking with the default settings", file=sys.stderr)
        status = EXIT_USAGE
    if args.show_types:
        _show_types(by_settings, stdin_text, args)
        return status
    jobs = args.jobs if args.jobs is not None else primary.jobs
    diags = []
    results = []
    reported: set[tuple[str, ...]] = set()
    for settings, group in by_settings.items():
        context: list[str] = []  # other files of the group's packages, analysed with it but not reported
        store = _open_cache(args, primary.root, settings) if stdin_text is None else None
        registry = None  # loaded when something is analysed: a cached run reads only the cache
        if store is not None and store.stub_errors is not None:
            stub_errors = store.stub_errors  # the stub files are part of the cache's key
        else:
            registry = load_registry(settings.stub_path)
            stub_errors = registry.errors
            if store is not None:
                store.set_stub_errors(registry.errors)
        if settings.stub_path not in reported:  # groups with the same stubs share one registry: report it once
            reported.add(settings.stub_path)
            diags += [make(e.split(":", 1)[0], "SPMD005", f"stub error: {e}") for e in stub_errors]
        if isinstance(stdin_text, ParseFailure):
            from spmdcheck.api import FileResult

            group_results = [FileResult(group[0], [make(group[0], "SPMD001", stdin_text.message, stdin_text.line)])]
        elif stdin_text is not None:
            from spmdcheck.api import FileResult, check_source

            group_results = [FileResult(group[0], check_source(stdin_text, group[0], settings, registry))]
            if args.fix and not args.diff:
                group_results = [_fix_stdin(stdin_bytes, group_results[0], settings, registry, args.unsafe_fixes)]
        else:
            from spmdcheck.api import run_check

            if primary.project_context and not args.no_project_context:
                # one settings group: the folders named hold only its files, so the context need not walk them
                walked = frozenset(os.path.realpath(p) for p in paths if len(by_settings) == 1 and os.path.isdir(p))
                context = _project_context(group, settings, resolver, args, primary, walked)
            focus = frozenset(group) if context else None
            group_results = _named(run_check(group + context, settings, registry, jobs, store, focus), group)
            if store is not None:
                store.save()
        if registry is None and (args.diff or args.add_noqa or args.fix):
            registry = load_registry(settings.stub_path)
        if args.diff or stdin_text is not None:
            pass  # --diff writes nothing; stdin has no file (with --fix, the fixed text went to stdout)
        elif args.add_noqa:
            _add_noqa(group_results)
            group_results = _run(group, settings, registry, jobs, context)
        elif args.fix:
            roots = [p if os.path.isdir(p) else os.path.dirname(p) or "." for p in paths]
            group_results, unfixed = _fix(
                group_results, group, settings, registry, args.unsafe_fixes, jobs, roots, context
            )
            if unfixed:  # every file that could not be written was named on stderr
                status = EXIT_USAGE
        results += group_results
    for r in results:
        diags.extend(r.diagnostics)
    diags.sort(key=lambda d: d.sort_key())
    if args.diff:
        settings_of = {f: settings for settings, group in by_settings.items() for f in group}
        return _print_diff(results, settings_of) if status == EXIT_CLEAN else EXIT_USAGE
    return _report(args, diags, len(files), stdin_text if isinstance(stdin_text, str) else None, status)


def _report(args: argparse.Namespace, diags: list, files: int, stdin_text: str | None, status: int) -> int:
    from spmdcheck.report import ReportContext, use_color, write_report
    from spmdcheck.report.sources import SourceLines

    sources = SourceLines({args.stdin_filename or "<stdin>": stdin_text} if stdin_text is not None else None)
    # with `-` and --fix, stdout holds the fixed source (as ruff does), so the report goes to stderr
    out = sys.stderr if args.fix and args.paths == ["-"] and not args.diff else sys.stdout
    if args.write_baseline:
        from spmdcheck.baseline import BaselineError, write_baseline

        try:
            count = write_baseline(pathlib.Path(args.write_baseline), diags, sources)
        except BaselineError as exc:
            print(f"spmdcheck: {exc}", file=sys.stderr)
            return EXIT_USAGE
        print(f"spmdcheck: wrote {count} finding(s) to the baseline {args.write_baseline}", file=sys.stderr)
        return status
    if args.baseline:
        from spmdcheck.baseline import BaselineError, new_findings, read_baseline

        try:
            accepted = read_baseline(pathlib.Path(args.baseline))
        except BaselineError as exc:
            print(f"spmdcheck: {exc}", file=sys.stderr)
            return EXIT_USAGE
        before = len(diags)
        diags = new_findings(diags, accepted, pathlib.Path(args.baseline), sources)
        if before != len(diags):
            print(f"spmdcheck: {before - len(diags)} finding(s) in the baseline not shown", file=sys.stderr)
    color = use_color(args.color, out)
    if args.statistics:
        from spmdcheck.report.statistics import write_statistics

        write_statistics(diags, args.output_format, color, out)
    else:
        context = ReportContext(files, color, sources, incomplete=status == EXIT_USAGE)
        write_report(args.output_format, diags, context, out)
    # a checker failure or a configuration error (config file, header comment, stub) is not a finding
    if status == EXIT_USAGE or any(d.code in ("SPMD000", "SPMD005") for d in diags):
        return EXIT_USAGE
    findings = [d for d in diags if d.severity != "note"]  # notes (reveal_spmd_type) never fail a run
    if findings and not args.exit_zero:  # after --add-noqa: what a noqa cannot silence (syntax errors)
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _print_diff(results, settings_of) -> int:  # noqa: ANN001
    """--diff: print what every fix (unsafe ones included: nothing is written) would change."""
    from spmdcheck.api import check_source, load_registry
    from spmdcheck.fix_review import fix_diff, fixable
    from spmdcheck.report import display_path

    total = 0
    for r in sorted(results, key=lambda r: r.path):
        if not fixable(r.diagnostics, True):
            continue
        settings = settings_of[r.path]
        registry = load_registry(settings.stub_path)

        def check(text: str, path: str = r.path, settings=settings, registry=registry):  # noqa: ANN001, ANN202
            return check_source(text, path, settings, registry)

        diff, count = fix_diff(r.path, r.diagnostics, check, display_path(r.path).replace(os.sep, "/"))
        sys.stdout.write(diff)
        total += count
    print(f"spmdcheck: would apply {total} fix(es)" if total else "spmdcheck: no fixes to apply", file=sys.stderr)
    return EXIT_FINDINGS if total else EXIT_CLEAN


def _add_noqa(results) -> None:  # noqa: ANN001
    from spmdcheck.noqa_writer import add_noqa

    added = 0
    for r in results:
        if not r.diagnostics:
            continue
        changed, error = add_noqa(r.path, r.diagnostics)
        if error:
            print(f"spmdcheck: {r.path}: {error}", file=sys.stderr)
        added += changed
    print(f"spmdcheck: added noqa comments to {added} line(s)", file=sys.stderr)


def _fix(  # noqa: ANN202
    results,  # noqa: ANN001
    files: list[str],
    settings,  # noqa: ANN001
    registry,  # noqa: ANN001
    unsafe: bool,
    jobs: int,
    roots: list[str],
    context: list[str],
):
    """Apply fixes in rounds (spmdcheck/fix_review.py says why): each round applies every file's next batch,
    then checks the changed files again, and at the end every file; only the safe fixes without --unsafe-fixes.
    Each file's write is a transaction (spmdcheck/fixes.py); returns the results and how many files could
    not be fixed."""
    from spmdcheck.api import check_source
    from spmdcheck.fix_review import IMPORT_LINE, MAX_ROUNDS, fixable, next_batch
    from spmdcheck.fixes import FixOutcome, apply_fixes
    from spmdcheck.report.printable import printable

    held_back = sum(len(fixable(r.diagnostics, True)) - len(fixable(r.diagnostics, False)) for r in results)
    if held_back and not unsafe:
        print(
            f"spmdcheck: {held_back} fix(es) available with --fix --unsafe-fixes (they insert collectives, "
            f"which changes what the program computes: review them, e.g. with --diff)",
            file=sys.stderr,
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
        again = {r.path: r for r in _run(changed, settings, registry, jobs, context + unchanged)}
        results = [again.get(r.path, r) for r in results]
    if applied:
        results = _run(files, settings, registry, jobs, context)
    for path, count in sorted(applied.items()):
        print(f"spmdcheck: {printable(path)}: applied {count} fix(es)", file=sys.stderr)
    return results, len(failed)


def _fix_stdin(data: bytes, result, settings, registry, unsafe: bool):  # noqa: ANN001, ANN202
    """`check --fix -`: the fixed source on stdout (the input's bytes when nothing applies), as ruff does;
    in the input's encoding, BOM and line endings."""
    from spmdcheck.api import FileResult, check_source
    from spmdcheck.fix_review import fix_in_memory, fixable
    from spmdcheck.fixes import decode, encode

    source = decode(data)

    def check(text: str) -> list:
        return check_source(text, result.path, settings, registry)

    held_back = len(fixable(result.diagnostics, True)) - len(fixable(result.diagnostics, False))
    if held_back and not unsafe:
        print(f"spmdcheck: {held_back} fix(es) available with --fix --unsafe-fixes", file=sys.stderr)
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
    print(f"spmdcheck: {result.path}: applied {applied} fix(es)", file=sys.stderr)
    return FileResult(result.path, check(fixed))


def _run(files: list[str], settings, registry, jobs: int, context: list[str]):  # noqa: ANN001, ANN202
    """Whole-program analysis (the pre-pass, then each connected part of the import graph), uncached;
    `context` files are analysed with `files`, only `files` are reported."""
    from spmdcheck.api import run_check

    focus = frozenset(files) if context else None
    return _named(run_check(files + context, settings, registry, jobs, focus=focus), files)


def _named(results: list, files: list[str]) -> list:
    wanted = set(files)
    return [r for r in results if r.path in wanted]


# A project context larger than this is not analysed (a file named in a huge folder that is no package):
# the named files are then checked on their own, and a note says so.
MAX_CONTEXT_FILES = 5000


def _selected_by_config(resolver, f: str) -> bool:  # noqa: ANN001
    path = pathlib.Path(f)
    cfg = resolver.for_path(path)
    return cfg.included(path) and not cfg.excluded(path)


def _project_context(  # noqa: ANN001
    group: list[str], settings, resolver, args: argparse.Namespace, primary, walked: frozenset[str] = frozenset()
) -> list[str]:
    """The other files of the packages the group's files belong to (below their import roots), checked
    with the same analysis settings: callers there give the group's functions their types, as when the
    whole folder is checked. Files the configuration excludes are left out; folders in `walked` (real
    paths) were checked whole with the group, and are not listed again."""
    from spmdcheck.discovery import discover
    from spmdcheck.program.graph import import_root

    given = {os.path.abspath(f) for f in group}
    named = {os.path.realpath(f) for f in group}
    roots = sorted({import_root(f) for f in group})
    found, _ = discover(
        roots,
        primary.root,
        primary.discovery_excludes(),
        primary.respect_gitignore and not args.no_respect_gitignore,
        True,
        errors=[],
        limit=MAX_CONTEXT_FILES + len(named),  # past that the context is dropped: no need to list a huge package
        walked=walked,
    )
    if len(found) > MAX_CONTEXT_FILES + len(named):
        print(
            f"spmdcheck: note: the packages of the files given hold more than {MAX_CONTEXT_FILES} other files: "
            "the files are checked without them (--no-project-context)",
            file=sys.stderr,
        )
        return []
    analysis = (settings.mesh, settings.strict, settings.preview, settings.stub_path)
    context = []
    for f in found:
        if os.path.abspath(f) in given or os.path.realpath(f) in named:  # (abspath spares a system call per file)
            continue
        path = pathlib.Path(f)
        cfg = resolver.for_path(path)
        if not cfg.included(path) or cfg.excluded(path):
            continue
        other = _file_settings(cfg, args, f)
        if (other.mesh, other.strict, other.preview, other.stub_path) == analysis:
            context.append(f)
    if len(context) > MAX_CONTEXT_FILES:
        print(
            f"spmdcheck: note: the packages of the files given hold {len(context)} other files (more than "
            f"{MAX_CONTEXT_FILES}): the files are checked without them (--no-project-context)",
            file=sys.stderr,
        )
        return []
    return context


if __name__ == "__main__":
    sys.exit(main())
