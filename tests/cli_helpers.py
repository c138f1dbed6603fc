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
