"""Running the real command line in a throwaway project, and telling a real run from an exit status alone."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

BUGGY = textwrap.dedent("""\
    import torch
    import torch.nn.functional as F
    import spmd_types as spmd
    from spmd_types import I, P, R, V

    y = spmd.assert_type(torch.randn(4, 8, requires_grad=True), {"tp": P})
    z = F.gelu(y)
""")


# The layers module of the small packages the cache tests edit: a mesh group and a reduction over it.
REDUCING_LAYERS = textwrap.dedent("""\
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (2,), mesh_dim_names=("tp",))
    GROUP = mesh.get_group("tp")


    def reduce_loss(loss):
        dist.all_reduce(loss, group=GROUP)
        return loss
""")


# the closing line of the text reports (spmdcheck/report/__init__.py: summary_line)
SUMMARY = re.compile(
    r"^(All checks passed \(\d+ file\(s\) checked\)\."
    r"|Found \d+ errors? and \d+ warnings? in \d+ file\(s\) \(checked \d+ file\(s\)\)\."
    r"|No findings in the \d+ file\(s\) checked, but the run was incomplete)",
    re.MULTILINE,
)
# `check` modes whose output is not a report (or is written elsewhere): nothing to recognise a run by
NOT_A_REPORT = {"--diff", "--add-noqa", "--show-settings", "--show-types", "--statistics", "--write-baseline",
                "--help", "-h", "--version", "-q", "--quiet", "-o", "--output-file"}


def _option(args: list[str], name: str, default: str) -> str:
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def assert_ran(args: list[str], proc: subprocess.CompletedProcess) -> None:
    """A `check` that exited 0 (clean) or 1 (findings) really checked: its report is there, whole.

    An exit status alone is also what an import error swallowed by a wrapper, an argument parsed as
    something else, or an early return would give. The text reports must close with the summary line,
    the JSON report must parse and count the files, SARIF and JUnit must parse; the line formats
    (json-lines, github, gitlab) print nothing on a clean run, so there every line must parse."""
    args = [str(a) for a in args]
    if not args or args[0] != "check" or proc.returncode not in (0, 1) or NOT_A_REPORT & set(args):
        return
    out = proc.stdout if isinstance(proc.stdout, str) else (proc.stdout or b"").decode("utf-8", "replace")
    if "--fix" in args and "-" in args:  # stdout holds the fixed source; the report goes to stderr
        out = proc.stderr if isinstance(proc.stderr, str) else (proc.stderr or b"").decode("utf-8", "replace")
    out = re.sub(r"\x1b\[[0-9;]*m", "", out)  # --color always
    fmt = _option(args, "--output-format", "full")
    where = f"`spmdcheck {' '.join(args)}` exited {proc.returncode} without a whole {fmt} report:\n{out[-2000:]}"
    if fmt in ("full", "text", "concise"):
        assert SUMMARY.search(out), where
    elif fmt == "json":
        summary = json.loads(out)["summary"]
        assert isinstance(summary["files"], int), where
    elif fmt in ("sarif", "gitlab"):
        json.loads(out)
    elif fmt == "junit":
        ET.fromstring(out)
    elif fmt == "json-lines":
        for line in out.splitlines():
            json.loads(line)
    elif fmt == "github":
        assert all(line.startswith("::") for line in out.splitlines() if line), where


def run(args, cwd, env=None, timeout=300, **kw) -> subprocess.CompletedProcess:
    # a test that runs on a CI runner must not see the runner's checkout as the root of its CI paths
    full_env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_WORKSPACE", "CI_PROJECT_DIR")}
    full_env.update(env or {})
    for key, value in (env or {}).items():
        if value is None:
            full_env.pop(key, None)
    proc = subprocess.run(
        [sys.executable, "-m", "spmdcheck", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        **kw,
    )
    assert_ran(list(args), proc)
    return proc
