"""Relative links in the README and docs/ point at files that exist (anchors into docs/rules.md too)."""

from __future__ import annotations

import re

from conftest import ROOT

LINK = re.compile(r"\]\(([^)\s]+)\)")


def pages():
    yield ROOT / "README.md"
    yield from sorted((ROOT / "docs").glob("*.md"))
    yield ROOT / "spmdcheck" / "diagnostics" / "pages" / "README.md"


def test_relative_links_resolve():
    broken = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue  # an URL
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif anchor and resolved.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", resolved.read_text(encoding="utf-8"), re.MULTILINE)
                slugs = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}
                if anchor not in slugs:
                    broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
