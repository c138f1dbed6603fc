"""Hostile result caches (issue 19): a cache folder planted or damaged in random ways must change nothing.

A case takes the cache a real run left in a small project and damages one to three of its entries
(the stores, the units and records folders and their files, CACHEDIR.TAG, .gitignore, the owner seal):
a symlink to a file or folder outside (with files of its own), a dangling symlink, a FIFO, a link to
/dev/zero, a folder, an empty file, random bytes, well-formed JSON without a seal, or a seal that is not
this account's. The next run must then print exactly what a run without the cache prints, with the same
exit status, no traceback, within a time limit, and leave every file outside the cache folder as it was.

`python -m tests.fuzz.hostile_cache --examples N --seed S` runs N cases; tests/test_cache_trust.py runs a
few (`SPMDCHECK_FUZZ_EXAMPLES=10` ten times as many).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import random
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

PROGRAM = """\
import torch
import torch.nn.functional as F
import spmd_types as spmd
from spmd_types import I, P, R, V

y = spmd.assert_type(torch.randn(4, 8, requires_grad=True), {"tp": P})
z = F.gelu(y)
"""

DAMAGES = (
    "symlink-to-outside-file",
    "symlink-to-outside-folder",
    "dangling-symlink",
    "fifo",
    "dev-zero",
    "folder",
    "empty",
    "random-bytes",
    "unsealed-json",
    "foreign-seal",
)


@dataclass
class Verdict:
    case: str
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def _limit_memory() -> None:
    """3 GB of address space: a checker that reads /dev/zero fails fast instead of taking the machine."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


def _run(project: pathlib.Path, env: dict, *extra: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spmdcheck", "check", "--output-format", "json", "bad.py", *extra],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=_limit_memory if sys.platform == "linux" else None,
    )


def _snapshot(folder: pathlib.Path) -> dict[str, str]:
    """Every entry under `folder` (not following symlinks): its kind and content digest."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = pathlib.Path(dirpath) / name
            if path.is_symlink():
                out[str(path)] = "link:" + os.readlink(path)
            elif path.is_file():
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                out[str(path)] = "folder"
    return out


def _targets(cache: pathlib.Path) -> tuple[list[pathlib.Path], list[pathlib.Path]]:
    """The entries a run reads or writes first (the stores, the units and records folders, the tag files),
    and every entry (those, the owner seal, and a few files of each subfolder)."""
    names = sorted(cache.iterdir())
    first = [p for p in names if p.name != ".owner" and not p.name.startswith(".tmp")]
    for folder in [p for p in names if p.is_dir() and not p.is_symlink()]:
        names += sorted(folder.iterdir())[:3]
    return first, names


def damage(path: pathlib.Path, how: str, outside: pathlib.Path, rng: random.Random) -> None:
    """Replace the cache entry `path` as `how` says (one of DAMAGES)."""
    sealed = path.is_file() and path.read_bytes().startswith(b"spmdcheck-hmac-sha256 ")
    document = None
    if path.is_file() and path.suffix == ".json":
        data = path.read_bytes()
        try:
            document = json.loads(data.split(b"\n", 1)[1] if sealed else data)
        except ValueError:
            document = None
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    if how == "symlink-to-outside-file":
        target = outside / f"file-{rng.randrange(10**6)}"
        target.write_text("precious\n")
        path.symlink_to(target)
    elif how == "symlink-to-outside-folder":
        target = outside / f"folder-{rng.randrange(10**6)}"
        target.mkdir()
        for i in range(rng.randrange(1, 70)):
            (target / f"precious{i}.json").write_text("{}")
        path.symlink_to(target, target_is_directory=True)
    elif how == "dangling-symlink":
        path.symlink_to(outside / f"absent-{rng.randrange(10**6)}")  # a write through it would create it
    elif how == "fifo":
        os.mkfifo(path)
    elif how == "dev-zero":
        path.symlink_to("/dev/zero")
    elif how == "folder":
        path.mkdir()
        (path / "inner.json").write_text("{}")
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "random-bytes":
        path.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400))))
    else:
        doc = document if isinstance(document, dict) else {"version": 8}
        if "results" in doc and isinstance(doc["results"], dict):  # the forgery the gate must not believe
            doc["results"] = {p: [False, []] for p in doc["results"]}
            doc["programs"] = {k: {p: [] for p in v} for k, v in doc.get("programs", {}).items()}
        payload = json.dumps(doc).encode()
        if how == "foreign-seal":
            payload = b"spmdcheck-hmac-sha256 " + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload
        path.write_bytes(payload)


def run_case(seed: int, workdir: pathlib.Path, env: dict, honest: subprocess.CompletedProcess) -> Verdict:
    rng = random.Random(seed)
    project = workdir / f"case{seed}"
    outside = workdir / f"outside{seed}"
    project.mkdir()
    outside.mkdir()
    (project / "bad.py").write_text(PROGRAM)
    (project / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"]\n')
    first = _run(project, env)
    problems = [] if first.stdout == honest.stdout else ["the first run differs from a run without the cache"]
    cache = project / ".spmdcheck_cache"
    steps = []
    first, every = _targets(cache)
    chosen = [rng.choice(first)]
    chosen += [p for p in rng.sample(every, k=rng.randrange(0, 3)) if p not in chosen]
    damages = {path: rng.choice(DAMAGES) for path in chosen}
    forged = any(h in ("unsealed-json", "foreign-seal") and p.name.startswith("results-") for p, h in damages.items())
    subfolder = any(p.parent == cache and p.name.startswith(("units-", "records-")) for p in damages)
    if subfolder or (not forged and rng.random() < 0.5):  # the next run writes scans, units and records
        (project / "bad.py").write_text(PROGRAM + "\nw = z\n")  # (a forged store is read with no edit)
        honest = _run(project, env, "--no-cache")
    for path, how in damages.items():
        if not os.path.lexists(path):  # inside a folder damaged before it
            continue
        steps.append(f"{path.relative_to(cache)}: {how}")
        damage(path, how, outside, rng)
    before_outside = _snapshot(outside)
    before_project = {k: v for k, v in _snapshot(project).items() if "/.spmdcheck_cache" not in k}
    try:
        proc = _run(project, env, timeout=90)
    except subprocess.TimeoutExpired:
        return Verdict(f"seed {seed}: " + "; ".join(steps), [*problems, "the run did not finish in 90 s"])
    if "Traceback" in proc.stderr:
        problems.append("a traceback: " + proc.stderr[-400:])
    if (proc.returncode, proc.stdout) != (honest.returncode, honest.stdout):
        problems.append(f"exit {proc.returncode} and output differ from a run without the cache")
    if _snapshot(outside) != before_outside:
        problems.append("files outside the cache folder changed")
    after_project = {k: v for k, v in _snapshot(project).items() if "/.spmdcheck_cache" not in k}
    if after_project != before_project:
        problems.append("files of the project changed")
    return Verdict(f"seed {seed}: " + "; ".join(steps), problems)


def fuzz(examples: int, seed: int, workdir: pathlib.Path | None = None) -> list[Verdict]:
    """Run `examples` cases seeded `seed`, `seed + 1`, ...; each case's verdict."""
    own = workdir is None
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="spmdcheck-hostile-")) if workdir is None else workdir
    try:
        home = workdir / "xdg"
        env = {**os.environ, "XDG_CACHE_HOME": str(home), "SPMDCHECK_CACHE_DIR": str(home / "spmdcheck")}
        env.pop("SPMDCHECK_NO_CACHE", None)
        reference = workdir / "reference"
        reference.mkdir()
        (reference / "bad.py").write_text(PROGRAM)
        (reference / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"]\n')
        honest = _run(reference, env, "--no-cache")
        return [run_case(s, workdir, env, honest) for s in range(seed, seed + examples)]
    finally:
        if own:
            shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz.hostile_cache")
    ap.add_argument("--examples", type=int, default=20)
    ap.add_argument("--seed", type=int, default=19)
    args = ap.parse_args(argv)
    verdicts = fuzz(args.examples, args.seed)
    for v in verdicts:
        print(("ok   " if v.ok else "FAIL ") + v.case)
        for problem in v.problems:
            print("     " + problem)
    return 0 if all(v.ok for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
