"""How far one value travels: a source text handed to `typeinfo.infer_source`, followed through the checker.

Every frame inside spmdcheck/ that holds the text as an argument (the text itself, an object carrying it as
`.text` or `.source.text`, or a dict of those) is a step of its path. A *move* is a change of file along that
path, going down into a call or climbing back up when the call returns; a *climb* is a move made by a
return. Fewer moves: the work on one file's text happens in fewer places (issue 18: a per-file source object
built once). Run it on two checkouts to compare:

    python benchmarks/value_walk.py [CHECKOUT] [--path]
"""

from __future__ import annotations

import importlib
import os
import sys
import threading

TEXT = "import torch\nfrom spmdcheck.annotations import Local\n\n\ndef f(x: Local[torch.Tensor]):\n    return x + 1\n"


def _holds(value: object, text: str) -> bool:
    if value is text:
        return True
    try:
        return getattr(value, "text", None) is text or getattr(getattr(value, "source", None), "text", None) is text
    except Exception:  # noqa: BLE001 - a lazy object whose attributes fail: it holds nothing
        return False


def walk(checkout: str) -> tuple[list[tuple[str, str, str]], int, int]:
    """(the path: (call or back, file, function), moves, climbs) of TEXT through the checker in `checkout`."""
    sys.path.insert(0, checkout)
    try:
        infer_source = importlib.import_module("spmdcheck.engine.typeinfo").infer_source
    except ImportError:  # before the driver became a folder
        infer_source = importlib.import_module("spmdcheck.typeinfo").infer_source
    package = os.path.join(checkout, "spmdcheck") + os.sep
    text = "".join([TEXT])  # an object of its own, followed by identity
    holding: dict[int, str] = {}
    stack: list[str] = []
    path: list[tuple[str, str, str]] = []
    counts = [0, 0]  # moves, climbs

    def profile(frame, event, arg) -> None:  # noqa: ANN001
        filename = frame.f_code.co_filename
        if not filename.startswith(package):
            return
        if event == "call":
            code = frame.f_code
            for name in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]:
                value = frame.f_locals.get(name)
                held = isinstance(value, dict) and any(_holds(v, text) for v in list(value.values())[:50])
                if _holds(value, text) or held:
                    where = os.path.relpath(filename, checkout)
                    if stack and stack[-1] != where:
                        counts[0] += 1
                    holding[id(frame)] = where
                    stack.append(where)
                    path.append(("call", where, code.co_name))
                    return
        elif event == "return" and id(frame) in holding:
            where = holding.pop(id(frame))
            stack.pop()
            if stack and stack[-1] != where:
                counts[0] += 1
                counts[1] += 1
                path.append(("back", stack[-1], ""))

    threading.setprofile(profile)  # the analysis runs on a thread with a deep stack (frontend/guard.py)
    sys.setprofile(profile)
    try:
        infer_source(text, "m.py")
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return path, counts[0], counts[1]


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    checkout = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), os.pardir))
    path, moves, climbs = walk(checkout)
    if "--path" in sys.argv:
        for kind, where, function in path:
            print(f"{kind:<5} {where} {function}")
    frames = sum(1 for kind, _, _ in path if kind == "call")
    print(f"{checkout}: {frames} frames hold the text; {moves} moves between files, {climbs} of them climbing back up")


if __name__ == "__main__":
    main()
