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
    check.add_argument("--no-cache", action="store_true", help="neither read nor write the result cache")
    explain = sub.add_parser("explain", help="print the documentation of a diagnostic code")
    explain.add_argument("code")
    clean = sub.add_parser("clean", help="remove the result cache (.spmdcheck_cache/) of the project")
    clean.add_argument("paths", nargs="*", default=None)
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
    if args.command == "clean":
        return _clean(args.paths or ["."])
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


def _project_root(paths: list[str], config: str | None = None) -> pathlib.Path:
    """The folder of the config file in use, else the current directory (where the cache lives)."""
    from spmdcheck.config import find_config

    first = pathlib.Path(paths[0]) if paths and paths[0] != "-" else pathlib.Path(".")
    found = (
        pathlib.Path(config)
        if config
        else find_config(first.resolve() if first.is_dir() else first.resolve().parent)
    )
    return found.resolve().parent if found is not None else pathlib.Path.cwd()


def _clean(paths: list[str]) -> int:
    from spmdcheck.cache import remove

    for removed in remove(_project_root(paths)):
        print(f"spmdcheck: removed {removed}", file=sys.stderr)
    return EXIT_CLEAN


def _open_cache(args: argparse.Namespace, root: pathlib.Path, settings):  # noqa: ANN001, ANN202
    if args.no_cache or os.environ.get("SPMDCHECK_NO_CACHE"):
        return None
    from spmdcheck import cache
    from spmdcheck.api import shipped_stubs

    directory = cache.locate(root)
    if directory is None:
        return None
    stub_dirs = [shipped_stubs(), *(pathlib.Path(p) for p in settings.stub_path)]
    return cache.ResultCache.open(directory, cache.run_key(settings, stub_dirs))


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
                pathlib.Path(paths[0]).resolve() if os.path.isdir(paths[0]) else pathlib.Path(paths[0]).resolve().parent
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
    stdin_text = None
    if paths == ["-"]:
        stdin_text = sys.stdin.read()
        files, missing = [args.stdin_filename or "<stdin>"], []
    else:
        files, missing = discover(
            paths, cfg.root, cfg.exclude, cfg.respect_gitignore and not args.no_respect_gitignore, args.force_exclude
        )
    for m in missing:
        print(f"spmdcheck: {m}: no such file or directory", file=sys.stderr)
        status = EXIT_USAGE
    store = _open_cache(args, cfg.root, settings) if stdin_text is None and not args.fix else None
    registry = None
    if store is not None and store.stub_errors is not None:
        stub_errors = store.stub_errors  # the stub files are part of the cache's key
    else:
        registry = load_registry(settings.stub_path)
        stub_errors = registry.errors
        if store is not None:
            store.set_stub_errors(registry.errors)
    diags = [make(e.split(":", 1)[0], "SPMD005", f"stub error: {e}") for e in stub_errors]
    if stdin_text is not None:
        from spmdcheck.api import FileResult, check_source

        results = [FileResult(files[0], check_source(stdin_text, files[0], settings, registry))]
    else:
        from spmdcheck.api import run_check

        results = run_check(files, settings, registry, args.jobs if args.jobs is not None else cfg.jobs, store)
        if store is not None:
            store.save()
    if args.fix and stdin_text is None:
        registry = registry if registry is not None else load_registry(settings.stub_path)
        results = _fix(results, settings, registry, args.unsafe_fixes, args.jobs if args.jobs is not None else cfg.jobs)
    for r in results:
        diags.extend(r.diagnostics)
    diags.sort(key=lambda d: d.sort_key())
    if args.output_format == "json":
        from spmdcheck.report.json_report import write_json

        write_json(diags, len(files), sys.stdout)
    else:
        from spmdcheck.report.text_report import write_text

        color = {"always": True, "never": False}.get(args.color)
        if color is None and (os.environ.get("NO_COLOR") or not sys.stdout.isatty()):
            color = False
        write_text(diags, len(files), sys.stdout, color)
    if status == EXIT_USAGE or any(d.code == "SPMD000" for d in diags):
        return EXIT_USAGE
    if diags and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _fix(results, settings, registry, unsafe: bool, jobs: int):  # noqa: ANN001, ANN202
    """Apply the first suggestion of each diagnostic, then check the fixed files again."""
    from spmdcheck.fixes import apply_fixes

    fixable = sum(1 for r in results for d in r.diagnostics if any(s.span for s in d.suggestions))
    if not unsafe:
        if fixable:
            print(
                f"spmdcheck: {fixable} fix(es) available with --fix --unsafe-fixes (they insert collectives, "
                f"which changes what the program computes: review them)",
                file=sys.stderr,
            )
        return results
    changed = []
    for r in results:
        if not any(s.span for d in r.diagnostics for s in d.suggestions):
            continue
        outcome = apply_fixes(r.path, r.diagnostics, "import spmd_types")
        if outcome.error:
            print(f"spmdcheck: {r.path}: {outcome.error}", file=sys.stderr)
        elif outcome.applied:
            changed.append(r.path)
            print(f"spmdcheck: {r.path}: applied {outcome.applied} fix(es)", file=sys.stderr)
    if not changed:
        return results
    again = {r.path: r for r in _run(changed, settings, registry, jobs)}
    return [again.get(r.path, r) for r in results]


def _run(files: list[str], settings, registry, jobs: int):  # noqa: ANN001, ANN202
    from spmdcheck.api import run_check

    return run_check(files, settings, registry, jobs)


if __name__ == "__main__":
    sys.exit(main())
