"""Command line: `spmdcheck check [PATHS]`, `spmdcheck explain CODE`, `spmdcheck rules`.

Exit status: 0 nothing found, 1 diagnostics found, 2 usage or configuration error.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
from collections.abc import Sequence

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="spmdcheck", description="Static SPMD type checker for rank-local PyTorch code.")
    sub = ap.add_subparsers(dest="command")
    check = sub.add_parser("check", help="check files and folders (default: .)")
    check.add_argument("paths", nargs="*", default=None)
    check.add_argument("--output-format", choices=("text", "json"), default="text")
    check.add_argument(
        "--strict",
        action="store_true",
        default=None,
        help="an operand missing a mesh axis is an error (spmd_types strict mode)",
    )
    check.add_argument("--select", default=None, help="comma-separated codes, prefixes or names to report")
    check.add_argument("--ignore", default=None, help="comma-separated codes, prefixes or names to skip")
    check.add_argument("--mesh", default=None, help="comma-separated mesh axis names (overrides the config)")
    check.add_argument("--config", default=None, help="path to a pyproject.toml or spmdcheck.toml")
    check.add_argument("--stub-path", action="append", default=[], help="extra stub directory (repeatable)")
    check.add_argument("--jobs", "-j", type=int, default=None, help="worker processes (default: cores)")
    check.add_argument("--no-respect-gitignore", action="store_true")
    check.add_argument("--force-exclude", action="store_true", help="apply excludes to files named on the command line")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when diagnostics are found")
    check.add_argument("--fix", action="store_true", help="apply fixes (all of spmdcheck's fixes are unsafe)")
    check.add_argument(
        "--unsafe-fixes", action="store_true", help="with --fix: insert the suggested collectives into the files"
    )
    check.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    check.add_argument("--stdin-filename", default=None, help="with the path `-`: the name to report for stdin")
    explain = sub.add_parser("explain", help="print the documentation of a diagnostic code")
    explain.add_argument("code")
    rules = sub.add_parser("rules", help="list every diagnostic code")
    rules.add_argument("--output-format", choices=("text", "json"), default="text")
    return ap


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


def _split(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip()) if value else ()


def _check(args: argparse.Namespace) -> int:
    from spmdcheck.api import Settings, load_registry
    from spmdcheck.config import Config, ConfigError, find_config, load_config
    from spmdcheck.diagnostics.codes import lookup
    from spmdcheck.diagnostics.render import make
    from spmdcheck.discovery import discover

    status = EXIT_CLEAN
    paths = args.paths or ["."]
    try:
        cfg_path = (
            pathlib.Path(args.config)
            if args.config
            else find_config(
                # realpath: pathlib's resolve() raises on a symlink loop
                pathlib.Path(os.path.realpath(paths[0]))
                if os.path.isdir(paths[0])
                else pathlib.Path(os.path.realpath(paths[0])).parent
            )
        )
        if args.config and not cfg_path.is_file():
            raise ConfigError(f"{cfg_path}: no such config file")
        cfg = load_config(cfg_path)
    except ConfigError as exc:
        print(f"spmdcheck: SPMD005 config-error: {exc}; checking with the default settings", file=sys.stderr)
        cfg = Config()
        status = EXIT_USAGE
    for pattern in (*_split(args.select), *_split(args.ignore)):
        if pattern.upper() != "ALL" and lookup(pattern) is None and not pattern.upper().startswith("SPMD"):
            print(f"spmdcheck: unknown rule selector {pattern!r}", file=sys.stderr)
            return EXIT_USAGE
    settings = Settings(
        mesh=_split(args.mesh) or cfg.mesh,
        strict=cfg.strict if args.strict is None else True,
        stub_path=tuple(cfg.stub_path) + tuple(str(pathlib.Path(p).resolve()) for p in args.stub_path),
        select=_split(args.select) or cfg.select,
        ignore=_split(args.ignore) + cfg.ignore,
    )
    from spmdcheck.frontend.source import decode_source
    from spmdcheck.report.text_report import printable

    stdin_text = None
    unreadable: list[str] = []
    if paths == ["-"]:
        stdin_bytes = sys.stdin.buffer.read()
        stdin_text = decode_source(stdin_bytes)
        files, missing = [args.stdin_filename or "<stdin>"], []
    else:
        files, missing = discover(
            paths,
            cfg.root,
            cfg.exclude,
            cfg.respect_gitignore and not args.no_respect_gitignore,
            args.force_exclude,
            errors=unreadable,
        )
    for m in missing:
        print(f"spmdcheck: {printable(m)}: no such file or directory", file=sys.stderr)
    for problem in unreadable:
        print(f"spmdcheck: {printable(problem)}", file=sys.stderr)
    if missing or unreadable:
        status = EXIT_USAGE
    registry = load_registry(settings.stub_path)
    diags = [make(e.split(":", 1)[0], "SPMD005", f"stub error: {e}") for e in registry.errors]
    if isinstance(stdin_text, str):
        from spmdcheck.api import FileResult, check_source

        results = [FileResult(files[0], check_source(stdin_text, files[0], settings, registry))]
        if args.fix:
            results = [_fix_stdin(stdin_bytes, results[0], settings, registry, args.unsafe_fixes)]
    elif stdin_text is not None:
        from spmdcheck.api import FileResult

        results = [FileResult(files[0], [make(files[0], "SPMD001", stdin_text.message)])]
    else:
        results = _run(files, settings, registry, args.jobs if args.jobs is not None else cfg.jobs)
    if args.fix and stdin_text is None:
        roots = [p if os.path.isdir(p) else os.path.dirname(p) or "." for p in paths]
        jobs = args.jobs if args.jobs is not None else cfg.jobs
        results, unfixed = _fix(results, settings, registry, args.unsafe_fixes, jobs, roots)
        if unfixed:
            status = EXIT_USAGE
    for r in results:
        diags.extend(r.diagnostics)
    diags.sort(key=lambda d: d.sort_key())
    # with `-` and --fix, stdout holds the fixed source (as ruff does), so the report goes to stderr
    report_to = sys.stderr if args.fix and stdin_text is not None else sys.stdout
    if args.output_format == "json":
        from spmdcheck.report.json_report import write_json

        write_json(diags, len(files), report_to)
    else:
        from spmdcheck.report.text_report import write_text

        color = {"always": True, "never": False}.get(args.color)
        if color is None and (os.environ.get("NO_COLOR") or not report_to.isatty()):
            color = False
        write_text(diags, len(files), report_to, color, incomplete=status == EXIT_USAGE)
    # a checker bug (SPMD000) or a file or setting that could not be read (SPMD005) is not a clean run
    if status == EXIT_USAGE or any(d.code in ("SPMD000", "SPMD005") for d in diags):
        return EXIT_USAGE
    if diags and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _fix_stdin(data: bytes, result, settings, registry, unsafe: bool):  # noqa: ANN001, ANN202
    """`check --fix -`: the fixed source on stdout (the unchanged bytes when nothing applies), as ruff does."""
    from spmdcheck.api import FileResult, check_source
    from spmdcheck.fixes import decode, encode, fix_source

    fixable = sum(1 for d in result.diagnostics if any(s.span for s in d.suggestions))
    if not unsafe or not fixable:
        if fixable:
            print(f"spmdcheck: {fixable} fix(es) available with --fix --unsafe-fixes", file=sys.stderr)
        sys.stdout.buffer.write(data)
        return result
    source = decode(data)

    def recheck(text: str) -> list:
        return check_source(text, result.path, settings, registry)

    fixed, applied, error = fix_source(source.text, result.diagnostics, recheck, newline=source.newline)
    try:
        out = encode(source, fixed) if applied else data
    except UnicodeEncodeError:
        out, applied, error = data, 0, "the fix cannot be written in the input's encoding"
    if error:
        print(f"spmdcheck: {result.path}: {error}", file=sys.stderr)
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
    if not applied:
        return result
    print(f"spmdcheck: {result.path}: applied {applied} fix(es)", file=sys.stderr)
    return FileResult(result.path, recheck(fixed))


def _fix(results, settings, registry, unsafe: bool, jobs: int, roots: list[str]):  # noqa: ANN001, ANN202
    """Apply the suggestions file by file (each a transaction), then check the fixed files again.

    Returns the results and how many files could not be fixed (each reported on stderr)."""
    from spmdcheck.api import check_source
    from spmdcheck.fixes import apply_fixes
    from spmdcheck.report.text_report import printable

    fixable = sum(1 for r in results for d in r.diagnostics if any(s.span for s in d.suggestions))
    if not unsafe:
        if fixable:
            print(
                f"spmdcheck: {fixable} fix(es) available with --fix --unsafe-fixes (they insert collectives, "
                f"which changes what the program computes: review them)",
                file=sys.stderr,
            )
        return results, 0
    changed, failed = [], 0
    for r in results:
        if not any(s.span for d in r.diagnostics for s in d.suggestions):
            continue
        try:
            outcome = apply_fixes(
                r.path,
                r.diagnostics,
                recheck=lambda text, path=r.path: check_source(text, path, settings, registry),
                roots=roots,
            )
            error = outcome.error
        except Exception as exc:  # noqa: BLE001 - one file's failure must not stop the others
            outcome = None
            error = f"internal error while fixing ({type(exc).__name__}: {str(exc)[:200]}): left unchanged"
        if error:
            failed += 1
            print(f"spmdcheck: {printable(r.path)}: {error}", file=sys.stderr)
        elif outcome is not None and outcome.applied:
            changed.append(r.path)
            print(f"spmdcheck: {printable(r.path)}: applied {outcome.applied} fix(es)", file=sys.stderr)
    if not changed:
        return results, failed
    again = {r.path: r for r in _run(changed, settings, registry, jobs)}
    return [again.get(r.path, r) for r in results], failed


def _run(files: list[str], settings, registry, jobs: int):  # noqa: ANN001, ANN202
    """Whole-program analysis: each connected part of the import graph is one program, run in a pool."""
    from spmdcheck.api import check_program, plan_programs

    done, programs = plan_programs(files, settings)
    jobs = max(1, min(jobs or (os.cpu_count() or 1), os.cpu_count() or 1, len(programs)))
    if jobs <= 1 or len(files) < 8:
        for program in programs:
            done += check_program(program, settings, registry)
    else:
        from spmdcheck.workers import run_isolated

        global _WORKER
        _WORKER = (settings, registry)
        # Big programs first, so one large program does not end the run alone on one core.
        programs.sort(key=lambda p: -sum(len(f.text) for f in p))
        for results in run_isolated(programs, _work, _failed, jobs, _budget):
            done += results
    order = {p: i for i, p in enumerate(files)}
    return sorted(done, key=lambda r: order.get(r.path, len(order)))


_WORKER = None


def _work(program):  # noqa: ANN001, ANN202
    settings, registry = _WORKER  # type: ignore[misc]
    from spmdcheck.api import check_program

    return check_program(program, settings, registry)


def _failed(program, why: str):  # noqa: ANN001, ANN202
    """A program whose worker crashed or overran: SPMD000 on each of its files, and the run goes on."""
    from spmdcheck.api import FileResult
    from spmdcheck.diagnostics.render import make

    return [FileResult(f.path, [make(f.path, "SPMD000", f"{why}; the file was not checked")]) for f in program]


def _budget(program) -> float:  # noqa: ANN001
    """Seconds a worker may spend on one program before it is stopped (generous: a guard against hangs)."""
    return 120.0 + 5.0 * len(program)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
