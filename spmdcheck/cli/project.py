"""Which files a check reads and with what: per-file settings from the config and the command line, the
project context of the files named, and an uncached run of files with their context."""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
from typing import TYPE_CHECKING

from spmdcheck.cli.parser import EXIT_CLEAN, EXIT_USAGE

if TYPE_CHECKING:
    from spmdcheck.config.resolve import Config, ConfigResolver
    from spmdcheck.rules.stubs import Registry
    from spmdcheck.settings import FileResult, Settings


def split_list(value: str | None) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip()) if value else ()


def config_arguments(
    values: list[str], exclude: str | None = None, extend_exclude: str | None = None
) -> tuple[pathlib.Path | None, dict]:
    """`--config` values: at most one existing file, the rest `key = value` overrides (as ruff decides);
    `--exclude` and `--extend-exclude` are overrides of those keys (globs relative to the working folder)."""
    from spmdcheck.config.resolve import ConfigError, merge, normalise_table, parse_override

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
    for key, patterns in (("exclude", exclude), ("extend-exclude", extend_exclude)):
        if patterns is not None:
            table = normalise_table({key: list(split_list(patterns))}, f"--{key}", pathlib.Path.cwd())
            overrides = merge(overrides, table)
    return explicit, overrides


def file_settings(cfg: Config, args: argparse.Namespace, path: str) -> Settings:
    """The settings one file is checked with: its config, then the command line on top."""
    from spmdcheck.settings import Settings

    select = split_list(args.select) or cfg.select
    extend = cfg.extend_select + split_list(args.extend_select)
    return Settings(
        mesh=split_list(args.mesh) or cfg.mesh,
        strict=cfg.strict if args.strict is None else True,
        preview=cfg.preview or bool(getattr(args, "preview", False)),
        stub_path=tuple(cfg.stub_path) + tuple(str(pathlib.Path(p).resolve()) for p in args.stub_path),
        select=select + extend if select else (),
        ignore=split_list(args.ignore) + cfg.ignore + cfg.ignores_for(pathlib.Path(path)),
    )


def show_settings(resolver: ConfigResolver, args: argparse.Namespace, path: str) -> int:
    """Print what `path` is checked with (TOML-like, one key a line), like `ruff check --show-settings`."""
    from spmdcheck.diagnostics.codes import CODES
    from spmdcheck.settings import selected

    cfg = resolver.for_path(pathlib.Path(path))
    for error in resolver.errors:
        print(f"spmdcheck: SPMD005 config-error: {error}", file=sys.stderr)
    settings = file_settings(cfg, args, path)
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
        "enabled-codes": [c for c in CODES if selected(c, settings)],
        "respect-gitignore": cfg.respect_gitignore,
        "project-context": cfg.project_context and not args.no_project_context,
        "jobs": cfg.jobs,
    }
    for key, value in rows.items():
        print(f"{key} = {json.dumps(value)}")
    return EXIT_USAGE if resolver.errors else EXIT_CLEAN


# A project context larger than this is not analysed (a file named in a huge folder that is no package):
# the named files are then checked on their own, and a note says so.
MAX_CONTEXT_FILES = 5000


def selected_by_config(resolver: ConfigResolver, f: str) -> bool:
    path = pathlib.Path(f)
    cfg = resolver.for_path(path)
    return cfg.included(path) and not cfg.excluded(path)


def project_context(
    group: list[str],
    settings: Settings,
    resolver: ConfigResolver,
    args: argparse.Namespace,
    primary: Config,
    walked: frozenset[str] = frozenset(),
) -> list[str]:
    """The other files of the packages the group's files belong to (below their import roots), checked
    with the same analysis settings: callers there give the group's functions their types, as when the
    whole folder is checked. Files the configuration excludes are left out; folders in `walked` (real
    paths) were checked whole with the group, and are not listed again."""
    from spmdcheck.frontend.discovery import discover
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
        other = file_settings(cfg, args, f)
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


def run_uncached(
    files: list[str], settings: Settings, registry: Registry | None, jobs: int, context: list[str]
) -> list[FileResult]:
    """Whole-program analysis (the pre-pass, then each connected part of the import graph), uncached;
    `context` files are analysed with `files`, only `files` are reported."""
    from spmdcheck.engine.run import run_check

    focus = frozenset(files) if context else None
    return named(run_check(files + context, settings, registry, jobs, focus=focus), files)


def named(results: list[FileResult], files: list[str]) -> list[FileResult]:
    """The results of `files` (a run with a project context answers for its files too)."""
    wanted = set(files)
    return [r for r in results if r.path in wanted]
