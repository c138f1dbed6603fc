"""The real-code corpus: released packages fetched with `pip download` (no install, no deps) into a cache.

Used by tests/test_real_code.py and benchmarks/realcode_share.py. The cache is
$SPMDCHECK_CORPUS_DIR or ~/.cache/spmdcheck-corpus; an unpacked package is reused.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass


@dataclass(frozen=True)
class Corpus:
    name: str  # the folder name in the cache
    requirement: str  # what `pip download` fetches
    package: str  # the checked tree, relative to the unpacked archive
    mesh: tuple[str, ...]  # the axes a user's config would name


# torchtitan's axes are the values of its `MeshAxisName` StrEnum (distributed/parallel_dims.py).
CORPORA = (
    Corpus(
        "torchtitan",
        "torchtitan==0.3.0",
        "torchtitan",
        ("dp", "dp_replicate", "dp_shard", "fsdp", "tp", "cp", "pp", "ep", "efsdp"),
    ),
    # the axes a Megatron user names; the stub's expert axes (etp, edp) are deliberately left out: a group
    # the stub names on an axis the mesh does not list is unknown, never an error in the user's code
    Corpus("megatron", "megatron-core==0.16.1", "megatron", ("dp", "cp", "tp", "pp", "ep")),
    Corpus("fairscale", "fairscale==0.4.13", "fairscale-0.4.13/fairscale", ("dp", "tp", "pp")),
)


class CorpusUnavailable(RuntimeError):
    pass


def cache_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("SPMDCHECK_CORPUS_DIR") or pathlib.Path.home() / ".cache" / "spmdcheck-corpus")


def ensure(corpus: Corpus) -> pathlib.Path:
    """The unpacked package tree of `corpus`, downloading it first if the cache lacks it."""
    root = cache_dir()
    tree = root / corpus.name / corpus.package
    if tree.is_dir() and any(tree.rglob("*.py")):
        return tree
    archives = root / "archives" / corpus.name
    archives.mkdir(parents=True, exist_ok=True)
    found = _archives(archives)
    if not found:
        cmd = [sys.executable, "-m", "pip", "download", corpus.requirement, "--no-deps", "-d", str(archives), "-q"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        found = _archives(archives)
        if proc.returncode != 0 or not found:
            raise CorpusUnavailable(
                f"cannot download {corpus.requirement} for the real-code corpus test "
                f"(`{' '.join(cmd)}` exited {proc.returncode}): {proc.stderr.strip()[-1500:]}"
            )
    target = root / corpus.name
    for archive in found:
        if archive.name.endswith(".whl"):
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(target)
        else:
            with tarfile.open(archive) as tf:
                tf.extractall(target, filter="data")
    if not tree.is_dir():
        raise CorpusUnavailable(f"{corpus.requirement}: the archive has no {corpus.package}/ folder")
    return tree


def _archives(folder: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in folder.iterdir() if p.name.endswith((".whl", ".tar.gz", ".zip")))
