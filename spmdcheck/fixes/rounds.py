"""Applying fixes in rounds, and `--diff` (every fix as a unified diff, nothing written).

A finding is often the consequence of an earlier one in the same file (an
unreduced sum makes the next line's operand look Varying). Applying every
suggestion at once would also "fix" those echoes, with conversions that are
wrong once the first fix is in. So unsafe fixes go one at a time, earliest
first, with a re-check after each, as ruff re-lints between fix passes; the
safe ones (removing unused suppressions) go together.
"""

from __future__ import annotations

from collections.abc import Callable

from spmdcheck.diagnostics.render import Diagnostic

MAX_ROUNDS = 25  # per file; a fix that keeps producing new findings stops here
IMPORT_LINE = "import spmd_types"


def fixable(diags: list[Diagnostic], unsafe: bool) -> list[Diagnostic]:
    """Diagnostics whose first placeable suggestion may be applied (safe ones only without `unsafe`)."""
    out = []
    for d in diags:
        s = next((s for s in d.suggestions if s.span is not None), None)
        if s is not None and (unsafe or s.safe):
            out.append(d)
    return out


def next_batch(diags: list[Diagnostic], unsafe: bool) -> list[Diagnostic]:
    """What one round applies: every safe fix, else the earliest unsafe one."""
    todo = sorted(fixable(diags, unsafe), key=Diagnostic.sort_key)
    safe = [d for d in todo if next(s for s in d.suggestions if s.span is not None).safe]
    return safe or todo[:1]


def fix_in_memory(
    text: str,
    check: Callable[[str], list[Diagnostic]],
    unsafe: bool,
    first: list[Diagnostic] | None = None,
    newline: str = "\n",
) -> tuple[str, int]:
    """The text after every round of fixes, and how many fixes were applied. `first`: the diagnostics of
    `text` already known (from the whole-program run), used for the first round instead of `check`;
    `newline`: the text's own line ending, for inserted lines."""
    from spmdcheck.fixes.apply import fix_text
    from spmdcheck.frontend.source import ParseFailure, parse

    applied = 0
    for _ in range(MAX_ROUNDS):
        batch = next_batch(first if first is not None else check(text), unsafe)
        first = None
        if not batch:
            break
        new, count = fix_text(text, batch, IMPORT_LINE, newline)
        if isinstance(parse(new), ParseFailure):  # the guarded parse: never libcst on input that crashes it
            break  # --fix would refuse this too
        if not count or new == text:
            break
        text, applied = new, applied + count
    return text, applied
