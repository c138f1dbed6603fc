"""Running the real command line in a throwaway project."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

BUGGY = textwrap.dedent("""\
    import torch
    import torch.nn.functional as F
    import spmd_types as spmd
    from spmd_types import I, P, R, V

    y = spmd.assert_type(torch.randn(4, 8, requires_grad=True), {"tp": P})
    z = F.gelu(y)
""")


def run(args, cwd, env=None, timeout=300, **kw) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    for key, value in (env or {}).items():
        if value is None:
            full_env.pop(key, None)
    return subprocess.run(
        [sys.executable, "-m", "spmdcheck", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        **kw,
    )
