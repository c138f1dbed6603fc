"""Probes of issue 19: the caches are keyed on content and trust nothing they did not write themselves.

Every test runs the real command line on a small project, with the user cache dir (which holds the
per-user key and the stub registry's cache) in a folder of its own. Each one failed before the change it
guards (docs/robustness.md, "The caches trust only themselves").
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import stat
import subprocess
import sys

import pytest
from cli_helpers import BUGGY, run

SEAL = b"spmdcheck-hmac-sha256 "


@pytest.fixture
def home(tmp_path_factory):
    """A user cache dir of the test's own: its key, its registry cache, its fallback result caches."""
    return tmp_path_factory.mktemp("xdg")


def _env(home: pathlib.Path) -> dict:
    return {"XDG_CACHE_HOME": str(home), "SPMDCHECK_CACHE_DIR": str(home / "spmdcheck"), "SPMDCHECK_NO_CACHE": None}


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"]\n')
    (tmp_path / "bad.py").write_text(BUGGY)
    return tmp_path


def _check(project, home, *extra, timeout=120, **kw) -> subprocess.CompletedProcess:
    return run(["check", "--output-format", "json", "bad.py", *extra], project, _env(home), timeout=timeout, **kw)


def _findings(proc) -> list[tuple]:
    return [(d["line"], d["code"], d["severity"]) for d in json.loads(proc.stdout)["diagnostics"]]


def _only(pattern: str, folder: pathlib.Path) -> pathlib.Path:
    (path,) = folder.glob(pattern)
    return path


def _document(path: pathlib.Path) -> dict:
    """A store file's JSON, after its seal line when it has one."""
    data = path.read_bytes()
    return json.loads(data.split(b"\n", 1)[1] if data.startswith(SEAL) else data)


def _write_as_the_checker_would(path: pathlib.Path, doc: dict, home: pathlib.Path) -> None:
    """`doc` in the form the checker under test writes: sealed with the user's key if its files are
    sealed (a malformed document it could have written itself), else plain JSON."""
    payload = json.dumps(doc).encode()
    if path.read_bytes().startswith(SEAL):
        key = (home / "spmdcheck" / "hmac-key").read_bytes()
        import hashlib
        import hmac

        name = path.name if path.parent.name == ".spmdcheck_cache" else f"{path.parent.name}/{path.name}"
        mac = hmac.new(key, name.encode() + b"\0" + payload, hashlib.sha256).hexdigest().encode()
        payload = SEAL + mac + b"\n" + payload
    path.write_bytes(payload)


# ----------------------------------------------------------------- why 1: stub rules keyed on their text
USER_STUB = (
    "from spmdcheck.annotations import linear\nfrom torch import Tensor\n\n"
    "@linear\ndef scale_free(x: Tensor) -> Tensor: ...\n"
)


def test_a_same_size_stub_edit_keeping_the_mtime_is_seen(project, home):
    stub = project / "typings" / "mylib" / "__init__.pyi"
    stub.parent.mkdir(parents=True)
    stub.write_text(USER_STUB)
    (project / "pyproject.toml").write_text('[tool.spmdcheck]\nmesh = ["tp"]\nstub_path = ["typings"]\n')
    use = BUGGY.replace("z = F.gelu(y)", "import mylib\nz = mylib.scale_free(y)\nw = F.gelu(z)")
    (project / "bad.py").write_text(use)
    before = _check(project, home)
    assert (9, "SPMD101", "error") in _findings(before)  # P survived the linear user op, then hit gelu
    st = stub.stat()
    stub.write_text(USER_STUB.replace("scale_free", "scale_fre_"))  # same size: `rsync -a`, `cp -p`, COPY
    os.utime(stub, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert stub.stat().st_size == st.st_size and stub.stat().st_mtime_ns == st.st_mtime_ns
    after = _check(project, home)
    truth = _check(project, home.parent / (home.name + "-fresh"), "--no-cache")  # another key, no cache at all
    assert (9, "SPMD101", "error") not in _findings(truth)
    assert after.stdout == truth.stdout


def test_no_cache_bypasses_the_stub_registry_cache(project, home):
    _check(project, home, "--no-cache")
    assert not list((home / "spmdcheck").glob("registry-*.json"))
    assert not (project / ".spmdcheck_cache").exists()


# ----------------------------------------------------------------- why 2: a planted cache is not trusted
def _planted_store(project, home) -> tuple[subprocess.CompletedProcess, pathlib.Path]:
    """A first run, and its results store (what an attacker would imitate: names are public hashes)."""
    honest = _check(project, home)
    assert honest.returncode == 1 and _findings(honest)
    return honest, _only("results-*.json", project / ".spmdcheck_cache")


def test_a_forged_results_file_cannot_make_the_gate_pass(project, home):
    honest, store = _planted_store(project, home)
    doc = _document(store)
    doc["results"] = {path: [False, []] for path in doc["results"]}
    store.write_text(json.dumps(doc))  # well formed, unsealed: what a pull request can add
    proc = _check(project, home)
    assert proc.returncode == 1 and proc.stdout == honest.stdout


def test_a_forged_results_file_cannot_invent_findings(project, home):
    honest, store = _planted_store(project, home)
    doc = _document(store)
    invented = [10**30, 1, 10**30, 1, "SPMD999", "made-up", "bogus", "invented", []]
    doc["results"] = {path: [False, [invented]] for path in doc["results"]}
    store.write_text(json.dumps(doc))
    proc = _check(project, home)
    assert proc.stdout == honest.stdout and "SPMD999" not in proc.stdout


@pytest.mark.parametrize(
    "bad",
    [
        [10**30, 1, 10**30, 1, "SPMD101", None, "error", "line out of range", []],
        [7, 1, 7, 1, "SPMD999", "made-up", "error", "a code that does not exist", []],
        [7, 1, 7, 1, "SPMD101", None, "bogus", "a severity that does not exist", []],
        [7, 1, 7, 1, "SPMD101", "not-its-name", "error", "a name that is not the code's", []],
        [-1, 1, 7, 1, "SPMD101", None, "error", "a negative line", []],
    ],
)
def test_every_field_read_is_validated_even_in_an_authentic_entry(project, home, bad):
    """A document sealed with the right key (as a bug of the checker itself could write it) is still
    validated field by field: the findings are those of a run without the cache."""
    honest, store = _planted_store(project, home)
    name = json.loads(honest.stdout)["diagnostics"][0]["name"]
    bad = [name if v is None else v for v in bad]
    doc = _document(store)
    doc["results"] = {path: [False, [bad]] for path in doc["results"]}
    _write_as_the_checker_would(store, doc, home)
    proc = _check(project, home)
    assert proc.stdout == honest.stdout


def _victim(tmp_path, count: int) -> pathlib.Path:
    victim = tmp_path.parent / (tmp_path.name + "-victim")
    victim.mkdir()
    for i in range(count):
        (victim / f"precious{i}.txt").write_text(str(i))
        os.utime(victim / f"precious{i}.txt", (1_000_000 + i, 1_000_000 + i))
    return victim


def _edit(project) -> None:
    (project / "bad.py").write_text(BUGGY + "\nw = z\n")  # new content: new scans, units and records


def test_a_units_symlink_cannot_make_a_run_delete_elsewhere(project, home, tmp_path):
    _planted_store(project, home)
    units = _only("units-*", project / ".spmdcheck_cache")
    victim = _victim(tmp_path, 3)
    shutil.rmtree(units)
    units.symlink_to(victim, target_is_directory=True)
    _edit(project)
    proc = _check(project, home)
    assert proc.returncode == 1
    assert sorted(p.name for p in victim.iterdir()) == ["precious0.txt", "precious1.txt", "precious2.txt"]


def test_a_records_symlink_cannot_make_a_run_write_or_prune_elsewhere(project, home, tmp_path):
    _planted_store(project, home)
    records = _only("records-*", project / ".spmdcheck_cache")
    victim = _victim(tmp_path, 70)
    before = sorted(p.name for p in victim.iterdir())
    shutil.rmtree(records)
    records.symlink_to(victim, target_is_directory=True)
    _edit(project)
    proc = _check(project, home)
    assert proc.returncode == 1
    assert sorted(p.name for p in victim.iterdir()) == before


@pytest.mark.parametrize("name", ["CACHEDIR.TAG", ".gitignore"])
def test_dangling_symlinks_in_a_planted_cache_create_nothing_outside(project, home, tmp_path, name):
    outside = tmp_path.parent / (tmp_path.name + "-outside") / name
    outside.parent.mkdir()
    folder = project / ".spmdcheck_cache"
    folder.mkdir()
    (folder / name).symlink_to(outside)
    proc = _check(project, home)
    assert proc.returncode == 1 and _findings(proc)
    assert not outside.exists()
    assert not (folder / name).is_symlink() and (folder / name).is_file()  # replaced by the real file


def test_a_fifo_in_place_of_the_store_does_not_hang_the_run(project, home):
    honest, store = _planted_store(project, home)
    store.unlink()
    os.mkfifo(store)
    proc = _check(project, home, timeout=60)  # before: blocked forever in open()
    assert proc.stdout == honest.stdout


def _limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


@pytest.mark.skipif(sys.platform != "linux", reason="/dev/zero and RLIMIT_AS")
def test_a_link_to_dev_zero_does_not_grow_memory(project, home):
    honest, store = _planted_store(project, home)
    store.unlink()
    store.symlink_to("/dev/zero")
    proc = _check(project, home, timeout=120, preexec_fn=_limit_memory)  # before: 23 GB in 60 s, unlimited
    assert "Traceback" not in proc.stderr and proc.stdout == honest.stdout


def _git(project, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    return subprocess.run(["git", *args], cwd=project, env=env, capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_cache_folder_tracked_by_git_is_not_used(project, home):
    honest = _check(project, home, "--no-cache")
    folder = project / ".spmdcheck_cache"
    folder.mkdir()
    (folder / "results-0123456789abcdef01234567.json").write_text('{"version": 8}')  # what a PR can add
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "a pull request adds a cache")
    proc = _check(project, home)
    warnings = [line for line in proc.stderr.splitlines() if "tracked by git" in line]
    assert len(warnings) == 1 and ".spmdcheck_cache" in warnings[0]
    assert proc.stdout == honest.stdout
    assert _git(project, "status", "--porcelain", "--ignored", "--", ".spmdcheck_cache") == ""  # not written
    assert list((home / "spmdcheck" / "projects").glob("*/results-*.json"))  # the user cache dir instead


def test_the_key_is_private_and_a_key_others_can_read_is_refused(project, home):
    _check(project, home)
    key = home / "spmdcheck" / "hmac-key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.stat().st_size == 32
    shutil.rmtree(project / ".spmdcheck_cache")
    key.chmod(0o644)  # as a checkout writes it: a key that came with a repository
    proc = _check(project, home)
    assert proc.returncode == 1 and not list((project / ".spmdcheck_cache").glob("results-*.json"))


# ----------------------------------------------------------------- why 3: a 0-byte CACHEDIR.TAG is repaired
def test_an_empty_cachedir_tag_is_repaired(project, home):
    _check(project, home)
    tag = project / ".spmdcheck_cache" / "CACHEDIR.TAG"
    tag.write_bytes(b"")  # what a full disk leaves
    _check(project, home)
    assert tag.read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")


# ----------------------------------------------------------------- why 5: --write-baseline failures
@pytest.mark.parametrize("where", ["a-directory", "a-file/baseline.json"])
def test_write_baseline_to_a_bad_path_is_a_one_line_error(project, home, where):
    (project / "a-directory").mkdir()
    (project / "a-file").write_text("")
    proc = _check(project, home, "--write-baseline", where)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert [line for line in proc.stderr.splitlines() if "cannot write the baseline" in line]
    assert not [p for p in project.rglob("*.tmp")]


# ----------------------------------------------------------------- the fuzzer's hostile caches
@pytest.mark.skipif(sys.platform != "linux", reason="FIFOs, /dev/zero, RLIMIT_AS")
def test_randomly_damaged_caches_change_nothing(tmp_path):
    from fuzz.hostile_cache import fuzz

    examples = 6 * int(os.environ.get("SPMDCHECK_FUZZ_EXAMPLES", "1"))
    failures = [v for v in fuzz(examples, seed=19, workdir=tmp_path) if not v.ok]
    assert not failures, "\n".join(f"{v.case}: {v.problems}" for v in failures)
