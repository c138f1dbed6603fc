"""The command line's arguments (`spmdcheck --help`), and its exit statuses."""

from __future__ import annotations

import argparse

from spmdcheck import __version__
from spmdcheck.report import ALIASES, FORMATS

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2  # nothing found; diagnostics found; usage or configuration error


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="spmdcheck", description="Static SPMD type checker for rank-local PyTorch code.")
    ap.add_argument("-V", "--version", action="version", version=f"spmdcheck {__version__}")
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


def subcommand_parser(ap: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser | None:
    """The parser of the command `name` (`check`, `rule`, ...), to report its own usage errors."""
    for action in ap._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices.get(name)
    return None


def add_check_arguments(check: argparse.ArgumentParser) -> None:
    check.add_argument("paths", nargs="*", default=None)

    rules = check.add_argument_group("rule selection")
    rules.add_argument(
        "--strict",
        action="store_true",
        default=None,
        help="an operand missing a mesh axis is an error (spmd_types strict mode)",
    )
    rules.add_argument(
        "--preview",
        action="store_true",
        default=False,
        help="also run preview rules (SPMD502: rank-specific tensor computation, for compiled programs)",
    )
    rules.add_argument("--select", default=None, help="comma-separated codes, prefixes or names to report")
    rules.add_argument("--extend-select", default=None, help="codes, prefixes or names to add to the selection")
    rules.add_argument("--ignore", default=None, help="comma-separated codes, prefixes or names to skip")
    rules.add_argument("--mesh", default=None, help="comma-separated mesh axis names (overrides the config)")

    config = check.add_argument_group("configuration")
    config.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="PATH | KEY=VALUE",
        help="a config file to use for every checked file, or a `key = value` override in TOML syntax "
        "(repeatable; overrides win over every config file)",
    )
    config.add_argument("--isolated", action="store_true", help="ignore every config file")
    config.add_argument(
        "--show-settings", action="store_true", help="print the resolved settings for the first path, then exit"
    )
    config.add_argument("--stub-path", action="append", default=[], help="extra stub directory (repeatable)")
    config.add_argument("--jobs", "-j", type=int, default=None, help="worker processes (default: cores)")
    config.add_argument("--no-respect-gitignore", action="store_true")
    config.add_argument(
        "--no-project-context",
        action="store_true",
        help="analyse only the files given, without the other files of their packages (callers in other "
        "files then give them no types)",
    )
    config.add_argument(
        "--no-cache",
        action="store_true",
        help="neither read nor write any cache: the result cache (.spmdcheck_cache/) nor the stub registry's",
    )
    config.add_argument(
        "--exclude",
        metavar="PATTERNS",
        default=None,
        help="comma-separated paths or globs to leave out, replacing the config's `exclude` (as ruff's)",
    )
    config.add_argument(
        "--extend-exclude",
        metavar="PATTERNS",
        default=None,
        help="comma-separated paths or globs to leave out, added to the config's `exclude`",
    )
    config.add_argument(
        "--force-exclude", action="store_true", help="apply excludes to files named on the command line"
    )

    _add_output_arguments(check.add_argument_group("output"))
    _add_fix_arguments(check.add_argument_group("fixes and adoption"))


def _add_output_arguments(output: argparse._ArgumentGroup) -> None:
    output.add_argument(
        "--output-format",
        choices=(*FORMATS, *ALIASES),
        default="full",
        help="full (default; `text` is an alias), concise, json, json-lines, sarif, github, gitlab, junit",
    )
    output.add_argument(
        "-o", "--output-file", metavar="FILE", default=None, help="write the report to FILE instead of stdout"
    )
    output.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print the findings only: no summary line, no progress, no notes on stderr (errors still are)",
    )
    output.add_argument("--statistics", action="store_true", help="print how many findings of each code, only")
    output.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="also say on stderr what was left unchecked: a file over the size or time budget (docs/robustness.md)",
    )
    output.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    output.add_argument("--exit-zero", action="store_true", help="exit 0 even when diagnostics are found")
    output.add_argument("--stdin-filename", default=None, help="with the path `-`: the name to report for stdin")



def _add_fix_arguments(fixing: argparse._ArgumentGroup) -> None:
    fixing.add_argument(
        "--fix", action="store_true", help="apply safe fixes (removing unused suppressions); see --unsafe-fixes"
    )
    fixing.add_argument(
        "--unsafe-fixes",
        action="store_true",
        help="with --fix: also insert the suggested collectives; alone: count them as fixable in the report "
        "(--diff always shows them)",
    )
    fixing.add_argument(
        "--diff", action="store_true", help="print every fix as a unified diff, write nothing (exit 1 if any)"
    )
    fixing.add_argument(
        "--add-noqa", action="store_true", help="append `# noqa: CODE` to the line of every current finding"
    )
    fixing.add_argument(
        "--baseline", metavar="FILE", default=None, help="report only findings that are not in this baseline"
    )
    fixing.add_argument(
        "--write-baseline", metavar="FILE", default=None, help="write every current finding to a baseline file"
    )
