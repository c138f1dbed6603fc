"""Run the terminal sessions written in a markdown document, in order, in a scratch folder.

Conventions in the docs:

* a fenced block whose info string is ``python file=NAME`` (or ``toml file=NAME``)
  writes NAME (a later block with the same NAME replaces it, as the reader
  would edit the file);
* a ``console`` block holds commands (lines starting with ``$ ``), each
  followed by exactly the output it prints (stdout and stderr, as a terminal
  shows them; no colour);
* ``bash`` blocks are not run (installation commands).

`python tests/doc_sessions.py docs/getting-started.md` rewrites the outputs
from real runs; the test suite checks that the committed outputs are what
the commands print.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
from dataclasses import dataclass

FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```$", re.DOTALL | re.MULTILINE)
FILE = re.compile(r"^\w+\s+file=(\S+)$")


@dataclass
class Command:
    command: str
    expected: str
    block_start: int  # offset of the console block body in the document


def _output_of(command: str, cwd: pathlib.Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE")}
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "200"
    proc = subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    return _normalise(proc.stdout)


def _normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def _parse_console(body: str) -> list[tuple[str, str]]:
    sessions: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            sessions.append((line[2:], []))
        elif sessions:
            sessions[-1][1].append(line)
    return [(cmd, _normalise("\n".join(out))) for cmd, out in sessions]


def run_document(doc: pathlib.Path, workdir: pathlib.Path) -> list[tuple[str, str, str]]:
    """(command, expected output, actual output) for every command of the document, run in order."""
    text = doc.read_text(encoding="utf-8")
    results = []
    for m in FENCE.finditer(text):
        info, body = m.group(1).strip(), m.group(2)
        file_match = FILE.match(info)
        if file_match:
            target = workdir / file_match.group(1)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body, encoding="utf-8")
        elif info == "console":
            for command, expected in _parse_console(body):
                results.append((command, expected, _output_of(command, workdir)))
    return results


def update_document(doc: pathlib.Path, workdir: pathlib.Path) -> None:
    """Rewrite every console block with the outputs its commands print now."""
    text = doc.read_text(encoding="utf-8")
    out, last = [], 0
    for m in FENCE.finditer(text):
        info, body = m.group(1).strip(), m.group(2)
        file_match = FILE.match(info)
        if file_match:
            target = workdir / file_match.group(1)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body, encoding="utf-8")
            continue
        if info != "console":
            continue
        lines = []
        for command, _ in _parse_console(body):
            lines.append(f"$ {command}")
            actual = _output_of(command, workdir)
            if actual:
                lines.append(actual)
        out.append(text[last : m.start(2)])
        out.append("\n".join(lines) + "\n")
        last = m.end(2)
    out.append(text[last:])
    doc.write_text("".join(out), encoding="utf-8")


if __name__ == "__main__":
    import tempfile

    for name in sys.argv[1:]:
        with tempfile.TemporaryDirectory() as tmp:
            update_document(pathlib.Path(name), pathlib.Path(tmp))
