"""Benchmark: what the editor features cost.

    python benchmarks/bench_editor.py [--repeat K]

1. The --show-types observer: the shipped fixtures analysed with `check_source`
   and with `infer_source` (the same analysis, observed, plus the positions of
   every binding).
2. The language server: `spmdcheck server` started over stdio, then the time
   from didOpen to publishDiagnostics and from a hover request to its reply,
   on the largest fixture.

Median of K runs. A measurement, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _observer(repeat: int) -> None:
    sys.path.insert(0, str(ROOT))
    from spmdcheck.api import Settings, check_source, load_registry
    from spmdcheck.engine.typeinfo import infer_source

    registry = load_registry(())
    files = [(str(p), p.read_text()) for p in sorted((ROOT / "fixtures").rglob("*.py"))]

    def run(fn) -> float:  # noqa: ANN001
        start = time.perf_counter()
        for path, text in files:
            fn(text, path, Settings(), registry)
        return time.perf_counter() - start

    plain = statistics.median(run(check_source) for _ in range(repeat))
    typed = statistics.median(run(infer_source) for _ in range(repeat))
    print(f"{len(files)} fixtures: check_source {plain:.2f} s, infer_source (--show-types) {typed:.2f} s")


def _send(proc: subprocess.Popen, message: dict) -> None:
    data = json.dumps({"jsonrpc": "2.0", **message}).encode()
    proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)
    proc.stdin.flush()


def _receive(proc: subprocess.Popen) -> dict:
    length = 0
    while True:
        line = proc.stdout.readline().decode().strip()
        if not line:
            break
        if line.lower().startswith("content-length:"):
            length = int(line.split(":")[1])
    return json.loads(proc.stdout.read(length))


def _wait(proc: subprocess.Popen, predicate) -> dict:  # noqa: ANN001
    while True:
        message = _receive(proc)
        if predicate(message):
            return message


def _server(repeat: int) -> None:
    biggest = max((ROOT / "fixtures").rglob("*.py"), key=lambda p: p.stat().st_size)
    text = biggest.read_text()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "spmdcheck", "server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    _send(proc, {"id": 0, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}})
    _wait(proc, lambda m: m.get("id") == 0)
    print(f"server start to initialize reply: {time.perf_counter() - start:.2f} s")
    opens, hovers = [], []
    for version in range(repeat):
        uri = f"file://{biggest}"
        t0 = time.perf_counter()
        if version == 0:
            doc = {"uri": uri, "languageId": "python", "version": 1, "text": text}
            _send(proc, {"method": "textDocument/didOpen", "params": {"textDocument": doc}})
        else:
            change = {"textDocument": {"uri": uri, "version": version + 1}, "contentChanges": [{"text": text}]}
            _send(proc, {"method": "textDocument/didChange", "params": change})
        _wait(proc, lambda m: m.get("method") == "textDocument/publishDiagnostics")
        opens.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        line = next(i for i, s in enumerate(text.splitlines()) if " = " in s and not s.startswith(("#", " " * 8)))
        params = {"textDocument": {"uri": uri}, "position": {"line": line, "character": 4}}
        _send(proc, {"id": 100 + version, "method": "textDocument/hover", "params": params})
        _wait(proc, lambda m, i=100 + version: m.get("id") == i)
        hovers.append(time.perf_counter() - t0)
    _send(proc, {"id": 999, "method": "shutdown", "params": None})
    _wait(proc, lambda m: m.get("id") == 999)
    _send(proc, {"method": "exit", "params": None})
    proc.wait(timeout=30)
    print(
        f"{biggest.relative_to(ROOT)} ({len(text.splitlines())} lines): open/change -> diagnostics "
        f"{statistics.median(opens) * 1000:.0f} ms, hover {statistics.median(hovers) * 1000:.1f} ms "
        f"(median of {repeat})"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    _observer(args.repeat)
    _server(args.repeat)


if __name__ == "__main__":
    main()
