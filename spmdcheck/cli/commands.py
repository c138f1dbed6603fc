"""The small commands: `explain CODE`, `rule CODE|--all`, `rules`, `clean`, `server`."""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from spmdcheck.cli.parser import EXIT_CLEAN, EXIT_USAGE


def explain(code: str) -> int:
    from spmdcheck.diagnostics.codes import lookup

    info = lookup(code)
    if info is None:
        print(f"spmdcheck: unknown code {code!r} (see `spmdcheck rules`)", file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.write(info.page())
    return EXIT_CLEAN


def rules(fmt: str) -> int:
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


def clean(paths: list[str]) -> int:
    from spmdcheck.config.resolve import ConfigResolver
    from spmdcheck.engine.result_cache import remove

    first = pathlib.Path(paths[0])
    root = ConfigResolver(None, False, {}).for_path(first if first.exists() else pathlib.Path.cwd()).root
    for removed in remove(pathlib.Path(root)):
        print(f"spmdcheck: removed {removed}", file=sys.stderr)
    return EXIT_CLEAN


def rule(args: argparse.Namespace) -> int:
    from spmdcheck.diagnostics.catalog import render_rules

    if args.all == (args.code is not None):
        print("spmdcheck: give a rule code or name, or --all", file=sys.stderr)
        return EXIT_USAGE
    if args.code is not None and args.output_format == "text":
        return explain(args.code)
    text = render_rules(None if args.all else args.code, args.output_format)
    if text is None:
        print(f"spmdcheck: unknown code {args.code!r} (see `spmdcheck rule --all`)", file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.write(text)
    return EXIT_CLEAN


def server() -> int:
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
