"""`--statistics`: how many findings of each code, instead of the findings themselves."""

from __future__ import annotations

import json
from collections import Counter
from typing import TextIO

from spmdcheck.diagnostics.codes import CODES
from spmdcheck.diagnostics.render import Diagnostic
from spmdcheck.report import fix_of


def rows(diags: list[Diagnostic], unsafe: bool = False) -> list[dict]:
    """Each code's count, and how many of them `--fix` fixes (unsafe fixes only with `--unsafe-fixes`, as ruff)."""
    counts = Counter(d.code for d in diags)
    fixable = Counter(d.code for d in diags if fix_of(d, unsafe))
    # most frequent first; ties by code, so the order is deterministic
    return [
        {"code": code, "name": CODES[code].name, "count": n, "fixable": fixable[code]}
        for code, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]


def write_statistics(diags: list[Diagnostic], fmt: str, color: bool, out: TextIO, unsafe: bool = False) -> None:
    table = rows(diags, unsafe)
    if fmt in ("json", "json-lines"):
        json.dump(table, out, indent=2)
        out.write("\n")
        return
    if color:
        from rich.console import Console
        from rich.table import Table

        rich_table = Table("count", "code", "name", "fixable", title="spmdcheck findings by code")
        for r in table:
            rich_table.add_row(str(r["count"]), r["code"], r["name"], str(r["fixable"]) if r["fixable"] else "")
        Console(file=out, force_terminal=True).print(rich_table)
        return
    width = max((len(str(r["count"])) for r in table), default=1)
    for r in table:
        fix = f"  [{r['fixable']} fixable]" if r["fixable"] else ""
        out.write(f"{r['count']:>{width}}  {r['code']}  {r['name']}{fix}\n")
