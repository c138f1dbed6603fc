"""Benchmark: whole-program analysis of a synthetic package versus single-file analysis and libcst.

    python benchmarks/bench_program.py [--files 200] [--repeat 5]

Writes a package of N modules into a temporary folder: each defines a tensor-parallel layer class
(weights typed in `__init__`, a `forward`), helpers, and imports two or three earlier modules with
relative imports whose layers and helpers it calls. Prints the median CPU time, in this process, of
    libcst     parsing every file,
    single     checking every file on its own (`check_source`: calls into other files are unknown),
    program    checking the files as one program (`check_sources`),
and the ratios program/single and program/libcst. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import pathlib
import random
import statistics
import tempfile
import time

MODULE = """# spmdcheck: mesh = ["tp"]
import torch
import torch.nn.functional as F
from torch import nn

import spmd_types as spmd
from spmd_types import I, P, R, S
{imports}


def scale_{i}(x, factor=2.0):
    return x * factor


def reduce_{i}(y, reduce_results=True):
    if reduce_results:
        return spmd.all_reduce(y, "tp", src=P, dst=I)
    return y


class Layer{i}(nn.Module):
    def __init__(self, hidden, ffn, seq_dim=0):
        super().__init__()
        self.seq_dim = seq_dim
        self.up = spmd.assert_type(nn.Parameter(torch.empty(ffn, hidden)), {{"tp": S(0)}})
        self.down = spmd.assert_type(nn.Parameter(torch.empty(hidden, ffn)), {{"tp": S(1)}})

    def forward(self, x):
        spmd.assert_type(x, {{"tp": I}})
        h = F.gelu(F.linear(spmd.convert(x, "tp", src=I, dst=R), self.up))
        y = spmd.reinterpret(F.linear(h, self.down), "tp", src=spmd.V, dst=P)
        out = reduce_{i}(y)
{calls}
        return scale_{i}(out)
"""


def make_package(root: pathlib.Path, files: int, seed: int = 0) -> dict[str, str]:
    rng = random.Random(seed)
    package = root / "synthpkg"
    package.mkdir()
    sources = {str(package / "__init__.py"): ""}
    for i in range(files):
        deps = sorted(rng.sample(range(i), min(i, rng.randint(2, 3)))) if i else []
        imports = "\n".join(f"from .m{j} import Layer{j}, scale_{j}" for j in deps)
        calls = "\n".join(f"        out = scale_{j}(Layer{j}(8, 16)(out))" for j in deps)
        text = MODULE.format(i=i, imports=imports, calls=calls)
        path = package / f"m{i}.py"
        sources[str(path)] = text
    for path, text in sources.items():
        pathlib.Path(path).write_text(text)
    return sources


def cpu(fn, repeat: int) -> float:  # noqa: ANN001
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    import libcst

    from spmdcheck.api import Settings, check_source, check_sources, load_registry

    registry = load_registry(())
    settings = Settings()
    with tempfile.TemporaryDirectory() as tmp:
        sources = make_package(pathlib.Path(tmp), args.files)
        parse = cpu(lambda: [libcst.parse_module(t) for t in sources.values()], args.repeat)
        single = cpu(lambda: [check_source(t, p, settings, registry) for p, t in sources.items()], args.repeat)
        program = cpu(lambda: check_sources(sources, settings, registry), args.repeat)
        found = sum(len(d) for d in check_sources(sources, settings, registry).values())
    print(
        f"{args.files} modules, {sum(t.count(chr(10)) for t in sources.values())} lines; "
        f"CPU seconds, median of {args.repeat}"
    )
    print(f"  libcst parse   {parse:7.2f}")
    print(f"  single-file    {single:7.2f}   ({single / parse:.2f}x libcst)")
    print(f"  whole-program  {program:7.2f}   ({program / parse:.2f}x libcst, {program / single:.2f}x single-file)")
    print(f"  diagnostics in the whole program: {found}")


if __name__ == "__main__":
    main()
