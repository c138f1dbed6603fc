"""The real-code corpus: released packages fetched with `pip download` (no install, no deps) into a cache.

Used by tests/test_real_code.py and benchmarks/realcode_share.py. The cache is
$SPMDCHECK_CORPUS_DIR or ~/.cache/spmdcheck-corpus; an unpacked package is reused.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
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
    """The unpacked package tree of `corpus`, downloading it first if the cache lacks it.

    Safe when several processes (pytest-xdist workers, a benchmark beside the tests) ask at once: one
    downloads and unpacks under a lock, and the archives and the tree appear by renames, whole or not at all,
    so no process ever reads a half-written archive or a half-unpacked tree (a killed run leaves none either).
    """
    root = cache_dir()
    tree = root / corpus.name / corpus.package
    if _unpacked(tree):
        return tree
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f".{corpus.name}.lock"):
        if _unpacked(tree):  # another process unpacked it while this one waited
            return tree
        found = _download(corpus, root / "archives" / corpus.name)
        _unpack(found, root, corpus.name)
    if not tree.is_dir():
        raise CorpusUnavailable(f"{corpus.requirement}: the archive has no {corpus.package}/ folder")
    return tree


def _unpacked(tree: pathlib.Path) -> bool:
    return tree.is_dir() and any(tree.rglob("*.py"))


@contextlib.contextmanager
def _locked(path: pathlib.Path) -> Iterator[None]:
    """An exclusive lock on `path` while the block runs (POSIX; elsewhere the renames alone keep it safe)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _download(corpus: Corpus, archives: pathlib.Path) -> list[pathlib.Path]:
    """The release archives of `corpus`, fetched into a private folder and renamed into `archives` when whole."""
    archives.mkdir(parents=True, exist_ok=True)
    found = _archives(archives)
    if found:
        return found
    staging = pathlib.Path(tempfile.mkdtemp(prefix=".download-", dir=archives))
    try:
        cmd = [sys.executable, "-m", "pip", "download", corpus.requirement, "--no-deps", "-d", str(staging), "-q"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        fetched = _archives(staging)
        if proc.returncode != 0 or not fetched:
            raise CorpusUnavailable(
                f"cannot download {corpus.requirement} for the real-code corpus test "
                f"(`{' '.join(cmd)}` exited {proc.returncode}): {proc.stderr.strip()[-1500:]}"
            )
        for archive in fetched:
            os.replace(archive, archives / archive.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return _archives(archives)


def _unpack(found: list[pathlib.Path], root: pathlib.Path, name: str) -> None:
    """Unpack the archives beside `root / name`, then rename the whole tree into place (replacing a partial one)."""
    staging = pathlib.Path(tempfile.mkdtemp(prefix=f".unpack-{name}-", dir=root))
    try:
        for archive in found:
            if archive.name.endswith(".whl"):
                with zipfile.ZipFile(archive) as zf:
                    zf.extractall(staging)
            else:
                with tarfile.open(archive) as tf:
                    tf.extractall(staging, filter="data")
        staging.chmod(0o755)  # mkdtemp's 0700 is for the unpacking, not for the cached tree
        target = root / name
        if target.exists():  # an incomplete tree from before (its package folder missing): set aside, then drop
            stale = pathlib.Path(tempfile.mkdtemp(prefix=f".stale-{name}-", dir=root))
            os.replace(target, stale / name)
        os.replace(staging, target)
    finally:
        for leftover in root.glob(f".*-{name}-*"):
            shutil.rmtree(leftover, ignore_errors=True)


def _archives(folder: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in folder.iterdir() if p.name.endswith((".whl", ".tar.gz", ".zip")))
