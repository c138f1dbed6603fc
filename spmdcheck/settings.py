"""What a run is asked to do (Settings), what it answers per file (FileResult), and which codes it shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spmdcheck.diagnostics.codes import CODES

if TYPE_CHECKING:
    from spmdcheck.diagnostics.render import Diagnostic

@dataclass(frozen=True)
class Settings:
    mesh: tuple[str, ...] = ()
    strict: bool = False
    stub_path: tuple[str, ...] = ()
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    preview: bool = False  # preview rules (off by default) run too


@dataclass
class FileResult:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    skipped: bool = False
    # what the run left unchecked in it, silently (a budget: analysis/budget.py), shown with --verbose
    notes: list[str] = field(default_factory=list)


def selected(code: str, settings: Settings) -> bool:
    def matches(pattern: str) -> bool:
        p = pattern.strip()
        if p.upper() == "ALL":
            return True
        return code.startswith(p.upper()) or CODES[code].name == p.lower()

    if settings.select and not any(matches(p) for p in settings.select):
        return False
    return not any(matches(p) for p in settings.ignore)


def previewed(code: str, settings: Settings) -> bool:
    """A preview rule runs with `preview`, or when selected by its exact code or name (not a prefix or ALL)."""
    info = CODES[code]
    return (
        not info.preview
        or settings.preview
        or any(p.strip().upper() == code or p.strip().lower() == info.name for p in settings.select)
    )
