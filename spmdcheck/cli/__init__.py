"""Command line: `spmdcheck check [PATHS]`, `explain CODE`, `rule CODE|--all`, `rules`, `clean`, `server`.

Exit status: 0 nothing found, 1 diagnostics found, 2 usage or configuration error, or the checker failed
(SPMD000, said on stderr: never a traceback). `run` is the console script (`spmdcheck = "spmdcheck.cli:run"`);
`main` takes the arguments, for tests and embedding.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from spmdcheck.cli.parser import EXIT_CLEAN, EXIT_USAGE, build_parser, subcommand_parser


def run() -> NoReturn:
    """The `spmdcheck` command: `main`, then leave at once. A check leaves a million objects behind (syntax
    trees held in cycles the deferred collector never visited: `engine.collection.defer_cycle_collection`), and an
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
    """Run the command line on `argv` (default: sys.argv); returns the exit status.

    A reader that closes the pipe early (`spmdcheck check --diff | head`) ends the run quietly with status 0,
    as ruff does; any other failure of the checker itself is SPMD000 on stderr with status 2."""
    try:
        return _dispatch(argv)
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_CLEAN
    except KeyboardInterrupt:
        return 130  # the shell's status for SIGINT, without Python's traceback
    except Exception as exc:  # noqa: BLE001 - the last line of defence: a failure is a status, not a traceback
        _report_internal_error(exc)
        return EXIT_USAGE


def _silence_stdout() -> None:
    """Point stdout at /dev/null: what is still buffered for the closed pipe is dropped, not retried at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _report_internal_error(exc: BaseException) -> None:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""
    detail = " ".join(str(exc).split())[:300]
    try:
        print(
            f"spmdcheck: SPMD000 internal-error: {type(exc).__name__}: {detail}{where}; please report it "
            "(set SPMDCHECK_TRACEBACK=1 for the traceback)",
            file=sys.stderr,
        )
        if os.environ.get("SPMDCHECK_TRACEBACK"):
            traceback.print_exception(exc, file=sys.stderr)
    except OSError:  # stderr itself is gone: the status says it
        pass


def _parse(ap: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments; an option the command does not know is reported with the usage of that command
    (`spmdcheck check --bogus` prints `check`'s usage, as ruff and git do), not the top-level one."""
    args, unknown = ap.parse_known_args(argv)
    if unknown:
        command = subcommand_parser(ap, args.command) if args.command else None
        (command or ap).error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def _dispatch(argv: Sequence[str] | None) -> int:
    """A command's module is imported when it is chosen: `--help` reads only the parser."""
    ap = build_parser()
    try:
        args = _parse(ap, argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code not in (0, None) else EXIT_CLEAN
    if args.command == "check":
        from spmdcheck.cli.check import check

        return check(args)
    from spmdcheck.cli import commands

    if args.command == "explain":
        return commands.explain(args.code)
    if args.command == "rules":
        return commands.rules(args.output_format)
    if args.command == "clean":
        return commands.clean(args.paths or ["."])
    if args.command == "rule":
        return commands.rule(args)
    if args.command == "server":
        return commands.server()
    ap.print_help(sys.stderr)
    return EXIT_USAGE
