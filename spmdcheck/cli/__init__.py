"""Command line: `spmdcheck check [PATHS]`, `explain CODE`, `rule CODE|--all`, `rules`, `clean`, `server`.

Exit status: 0 nothing found, 1 diagnostics found, 2 usage or configuration error. `run` is the console
script (`spmdcheck = "spmdcheck.cli:run"`); `main` takes the arguments, for tests and embedding.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from spmdcheck.cli.parser import EXIT_CLEAN, EXIT_USAGE, build_parser


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
    """Run the command line on `argv` (default: sys.argv); returns the exit status. A command's module is
    imported when it is chosen: `--help` reads only the parser."""
    ap = build_parser()
    try:
        args = ap.parse_args(argv)
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
