"""Bugs seeded into real torchtitan 0.3.0 code: which does spmdcheck find?

    python benchmarks/seeded_bugs.py

Each seed is one textual edit (a deleted collective or conversion, a wrong
dim, a wrong group, a wrong type) applied to a copy of one file from the
real-code corpus cache (tests/realcode/corpus.py downloads it). The edited
file is checked on its own, with torchtitan's mesh axes configured (checking
the whole package takes about 20 s, so only seeds marked `package` do); a seed is *found* when an
error or warning appears that the unmodified file does not have (for a `package` seed: in any file
of the package, since a wrong contract is caught by the assert it contradicts). The seeds
are edits, not copies: this repository holds no torchtitan code.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "realcode"))


@dataclass(frozen=True)
class Seed:
    name: str
    kind: str  # deleted-collective, deleted-conversion, wrong-dim, wrong-group, wrong-type
    path: str  # inside the torchtitan package
    old: str
    new: str
    # checked with the whole package (the edit's types come from helpers in other files); else the file alone
    package: bool = False


SEEDS = (
    Seed(
        "redistribute vocab logits from the wrong dim",
        "wrong-dim",
        "components/loss.py",
        "            src=spmd.S(-1),\n            dst=spmd.I,",
        "            src=spmd.S(0),\n            dst=spmd.I,",
    ),
    Seed(
        "redistribute vocab logits over the dp group",
        "wrong-group",
        "components/loss.py",
        '            mesh.get_group("tp"),\n            src=spmd.S(-1),',
        '            mesh.get_group("dp"),\n            src=spmd.S(-1),',
    ),
    Seed(
        "vision RoPE row index: R->I conversion deleted",
        "deleted-conversion",
        "models/qwen3_5/vision_encoder.py",
        '            row_idx = spmd.mutate_type(row_idx, "tp", src=spmd.R, dst=spmd.I)\n',
        "",
    ),
    Seed(
        "vision RoPE buffer: mutate_type from the wrong type",
        "wrong-type",
        "models/qwen3_5/vision_encoder.py",
        'rope_embeds = spmd.mutate_type(rope_embeds, "tp", src=spmd.R, dst=spmd.I)',
        'rope_embeds = spmd.mutate_type(rope_embeds, "tp", src=spmd.V, dst=spmd.I)',
    ),
    Seed(
        "shard helper: shards a Partial instead of an Invariant",
        "wrong-type",
        "distributed/spmd_types.py",
        "                src=spmd.I,\n                dst=spmd.S(dim),",
        "                src=spmd.P,\n                dst=spmd.S(dim),",
    ),
    Seed(
        "token-count all_to_all deleted",
        "deleted-collective",
        "models/common/token_dispatcher.py",
        "        return spmd.all_to_all(\n            num_local_tokens_per_expert_E.view(ep_size, -1),\n"
        "            pg,\n            src=spmd.V,\n            dst=spmd.V,\n        )",
        "        return num_local_tokens_per_expert_E.view(ep_size, -1)",
    ),
    Seed(
        "fused all-gather GEMM: output declared sharded on the sequence",
        "wrong-dim",
        "distributed/linear.py",
        "        output_type = {**spmd.get_local_type(x_shard_m), group: spmd.S(1)}\n"
        "        spmd.assert_type(result, output_type)\n        return result",
        "        output_type = {**spmd.get_local_type(x_shard_m), group: spmd.S(0)}\n"
        "        spmd.assert_type(result, output_type)\n        return result",
    ),
    Seed(
        "fused MLA q: rope cache declared Partial",
        "wrong-type",
        "overrides/fused_mla.py",
        "        spmd.assert_type(q, q_type)\n        spmd.assert_type(rope_cache_real, spmd.R)",
        "        spmd.assert_type(q, q_type)\n        spmd.assert_type(rope_cache_real, spmd.P)",
    ),
    Seed(
        "helion RoPE local_map: positions declared tp-sharded",
        "wrong-dim",
        "overrides/helion_rope.py",
        '                {"dp": spmd.R, "cp": spmd.R, "tp": spmd.R},  # rope_cache_MD\n'
        '                {"dp": spmd.S(0), "cp": spmd.S(1), "tp": spmd.R},  # positions_BL',
        '                {"dp": spmd.R, "cp": spmd.R, "tp": spmd.R},  # rope_cache_MD\n'
        '                {"dp": spmd.S(0), "cp": spmd.S(1), "tp": spmd.S(2)},  # positions_BL',
    ),
    Seed(
        "loss-parallel CE: labels declared Varying",
        "wrong-type",
        "components/loss.py",
        "        spmd.assert_type(labels, {tp_group: spmd.I})",
        "        spmd.assert_type(labels, {tp_group: spmd.V})",
    ),
    Seed(
        "rowwise ShardingConfig: output redistribution deleted (the Partial is never reduced)",
        "deleted-conversion",
        "models/common/decoder_sharding.py",
        "        out_src_shardings=dense_activation_placement(tp=spmd.P),\n        out_dst_shardings=out_dst,\n",
        "        out_src_shardings=dense_activation_placement(tp=spmd.P),\n",
    ),
    Seed(
        "MoE shared-expert rowwise ShardingConfig: output redistribution deleted",
        "deleted-conversion",
        "models/common/moe_sharding.py",
        "        out_src_shardings=dense_activation_placement(tp=spmd.P),\n        out_dst_shardings=output_layout,\n",
        "        out_src_shardings=dense_activation_placement(tp=spmd.P),\n",
        package=True,
    ),
    Seed(
        "vision colwise ShardingConfig: output declared sharded on dim 0 instead of the last (heads) dim",
        "wrong-dim",
        "models/common/vision_encoder_sharding.py",
        "        out_src_shardings=SpmdLayout({DP: spmd.V, TP: spmd.S(-1)}),\n    )\n\n\ndef vision_scaled",
        "        out_src_shardings=SpmdLayout({DP: spmd.V, TP: spmd.S(0)}),\n    )\n\n\ndef vision_scaled",
        package=True,
    ),
    Seed(
        "dense FFN ShardingConfig: the input's source layout deleted (in_dst without in_src)",
        "deleted-conversion",
        "models/common/decoder_sharding.py",
        '            in_src_shardings={"x": attn_x_layout},\n',
        "",
    ),
)


def _findings(paths: list[pathlib.Path], mesh: tuple[str, ...], cwd: pathlib.Path) -> set[tuple[str, str, str]]:
    cmd = [sys.executable, "-m", "spmdcheck", "check", *map(str, paths), "--output-format", "json"]
    cmd += ["--no-respect-gitignore", "--mesh", ",".join(mesh)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=600)
    report = json.loads(proc.stdout)
    return {(pathlib.Path(d["path"]).name, d["code"], d["message"]) for d in report["diagnostics"]}


def run_seed(seed: Seed, tree: pathlib.Path, mesh: tuple[str, ...]) -> tuple[bool, list[str]]:
    original = (tree / seed.path).read_text(encoding="utf-8")
    if original.count(seed.old) != 1:
        raise SystemExit(f"seed {seed.name!r}: the edit does not apply exactly once to {seed.path}")
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp) / "torchtitan"
        shutil.copytree(tree, work)
        target = work / seed.path
        checked = [work] if seed.package else [target]
        before = _findings(checked, mesh, pathlib.Path(tmp))
        target.write_text(original.replace(seed.old, seed.new), encoding="utf-8")
        after = _findings(checked, mesh, pathlib.Path(tmp))
    # a package seed counts a new finding in any file: a wrong contract is caught by the assert it contradicts
    new = sorted(
        f"{name}: {code} {message}" for name, code, message in after - before if seed.package or name == target.name
    )
    return bool(new), new


def main() -> None:
    import corpus

    titan = corpus.CORPORA[0]
    tree = corpus.ensure(titan)
    found = 0
    for seed in SEEDS:
        ok, new = run_seed(seed, tree, titan.mesh)
        found += ok
        print(f"{'FOUND ' if ok else 'missed'} [{seed.kind}] {seed.path}: {seed.name}")
        for line in new:
            print(f"         {line[:160]}")
    print(f"{found} of {len(SEEDS)} seeded bugs found")


if __name__ == "__main__":
    main()
