"""Mesh layouts: mesh sizes per world, per-rank blocks of a global tensor by its
SPMD type, and the reverse (reassembling per-rank values into a global one).

Conventions (docs/ground_truth.md):

* ranks are laid out row-major over the mesh axes in declaration order, as
  ``init_device_mesh`` does (the first axis is the outermost);
* a tensor typed on several axes is split outer axis first: ``{dp: S(0),
  tp: S(0)}`` splits dim 0 into dp blocks, then each block into tp blocks;
* per axis: S(d) takes the rank's block along d, R and I the whole value, P a
  random per-rank piece (the pieces sum to the value), V a per-rank random
  tensor of the value's shape (no global meaning).
"""
from __future__ import annotations

import hashlib
import itertools
import math
from dataclasses import dataclass, field

import torch

from .spec import AxisType, TypeMap

RTOL = 1e-4
ATOL = 1e-5


def mesh_sizes(axes: tuple[str, ...], world: int) -> tuple[int, ...]:
    """The size of each axis for a world: one axis takes the world; otherwise the
    innermost axes are 2 wide (``(dp, tp)`` is (2, 2) on 4 ranks and (1, 2) on 2)."""
    n = len(axes)
    if world == 1:
        return (1,) * n
    if n == 1:
        return (world,)
    twos = int(math.log2(world))
    if 2 ** twos != world:
        raise ValueError("world size must be a power of two")
    sizes = [1] * n
    for i in range(min(twos, n)):
        sizes[n - 1 - i] = 2
    rest = world // math.prod(sizes)
    sizes[n - min(twos, n)] *= rest
    return tuple(sizes)


def coords_of(rank: int, sizes: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for s in reversed(sizes):
        out.append(rank % s)
        rank //= s
    return tuple(reversed(out))


def rank_of(coords: tuple[int, ...], sizes: tuple[int, ...]) -> int:
    r = 0
    for c, s in zip(coords, sizes):
        r = r * s + c
    return r


def seed_for(*parts: object) -> int:
    h = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:6], "little")


def seeded_randn(shape: tuple[int, ...], *seed_parts: object, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed_for(*seed_parts))
    return torch.randn(tuple(shape), generator=g, dtype=dtype)


class LayoutError(ValueError):
    pass


def split_global(value: torch.Tensor, types: TypeMap, axes: tuple[str, ...], sizes: tuple[int, ...],
                 *seed: object) -> list[torch.Tensor]:
    """Per-rank local values of a global ``value`` of the given per-axis types."""
    world = math.prod(sizes)
    blocks: dict[tuple[int, ...], torch.Tensor] = {(): value}
    for axis, n in zip(axes, sizes):
        t = types.get(axis, AxisType("R"))
        nxt: dict[tuple[int, ...], torch.Tensor] = {}
        for prefix, v in blocks.items():
            if t.kind == "S":
                d = t.dim if t.dim >= 0 else t.dim + v.dim()
                if not 0 <= d < v.dim():
                    raise LayoutError(f"S({t.dim}) on a {v.dim()}-d tensor")
                if v.shape[d] % n:
                    raise LayoutError(f"dim {d} of size {v.shape[d]} does not split into {n} blocks on {axis}")
                pieces = list(v.chunk(n, dim=d))
            elif t.kind in ("R", "I"):
                pieces = [v] * n
            elif t.kind == "P":
                if n == 1:
                    pieces = [v]
                else:
                    rnd = [seeded_randn(tuple(v.shape), *seed, axis, prefix, k, dtype=v.dtype) for k in range(n - 1)]
                    pieces = [*rnd, v - sum(rnd)]
            elif t.kind == "V":
                pieces = [v] if n == 1 else [
                    seeded_randn(tuple(v.shape), *seed, "V", axis, prefix, k, dtype=v.dtype) for k in range(n)]
            else:  # pragma: no cover
                raise LayoutError(f"unknown kind {t.kind}")
            for k, piece in enumerate(pieces):
                nxt[(*prefix, k)] = piece.contiguous()
        blocks = nxt
    return [blocks[coords_of(r, sizes)].clone() for r in range(world)]


@dataclass
class Assembly:
    """A reassembled global value, or why there is none."""

    value: torch.Tensor | None
    problems: list[str] = field(default_factory=list)  # broken invariants / impossible layouts
    meaningless: bool = False  # some axis is V: no global meaning


LOWP_TOL = 3e-2  # bfloat16/float16 programs: about 8 mantissa bits, sums reordered across ranks


def close(a: torch.Tensor, b: torch.Tensor, lowp: bool = False) -> bool:
    """float32 tolerances (rtol 1e-4, atol 1e-5), the atol scaled by the reference's magnitude (a sum of
    large terms reordered across ranks loses absolute, not relative, precision)."""
    if a.shape != b.shape:
        return False
    if a.numel() == 0:
        return True
    a64, b64 = a.detach().double(), b.detach().double()
    scale = max(1.0, float(b64.abs().max()))
    rtol, atol = (LOWP_TOL, LOWP_TOL) if lowp else (RTOL, ATOL)
    return torch.allclose(a64, b64, rtol=rtol, atol=atol * scale, equal_nan=True)


def max_err(a: torch.Tensor, b: torch.Tensor) -> str:
    if a.shape != b.shape:
        return f"shape {tuple(a.shape)} vs {tuple(b.shape)}"
    if a.numel() == 0:
        return "empty"
    return f"max abs diff {float((a.double() - b.double()).abs().max()):.3g}"


def assemble(per_rank: list[torch.Tensor], types: TypeMap, axes: tuple[str, ...], sizes: tuple[int, ...],
             what: str) -> Assembly:
    """Reassemble per-rank values typed ``types`` into the global value, innermost axis first.

    S(d): concatenate along d; P: sum; R, I: every rank of the axis must hold the
    same value (an invariant), one is kept; V: no global meaning, but the other
    axes' invariants are still checked.
    """
    problems: list[str] = []
    meaningless = False
    level: dict[tuple[int, ...], torch.Tensor] = {coords_of(r, sizes): t for r, t in enumerate(per_rank)}
    for i in reversed(range(len(axes))):
        axis = axes[i]
        t = types.get(axis, AxisType("R"))
        groups: dict[tuple[int, ...], list[torch.Tensor]] = {}
        for coords in sorted(level):
            groups.setdefault(coords[:i], []).append(level[coords])  # coords[i] is the last
        nxt: dict[tuple[int, ...], torch.Tensor] = {}
        for key, members in groups.items():
            if t.kind in ("R", "I"):
                first = members[0]
                for k, m in enumerate(members[1:], start=1):
                    if not close(first, m):
                        problems.append(f"{what}: {t} on {axis} but differs between ranks ({max_err(first, m)}"
                                        f" at {axis}={k})")
                        break
                nxt[key] = first
            elif t.kind == "P":
                if len({tuple(m.shape) for m in members}) > 1:
                    problems.append(f"{what}: P on {axis} but the ranks' shapes differ")
                    return Assembly(None, problems)
                nxt[key] = torch.stack([m.double() for m in members]).sum(0).to(members[0].dtype)
            elif t.kind == "S":
                first = members[0]
                d = t.dim if t.dim >= 0 else t.dim + first.dim()
                try:
                    nxt[key] = torch.cat(members, dim=d)
                except (RuntimeError, IndexError) as exc:
                    problems.append(f"{what}: cannot concatenate along S({t.dim}) on {axis}: {exc}")
                    return Assembly(None, problems)
            else:  # V
                meaningless = True
                nxt[key] = members[0]
        level = nxt
    return Assembly(None if meaningless else level[()], problems, meaningless)


def has_global_meaning(types: TypeMap) -> bool:
    return all(t.kind != "V" for t in types.values())


def all_coords(sizes: tuple[int, ...]) -> list[tuple[int, ...]]:
    return list(itertools.product(*(range(s) for s in sizes)))


def rank_cotangent(shape: tuple[int, ...], seed: int, index: int, rank: int) -> torch.Tensor:
    """The cotangent a rank draws for output ``index`` when the parent sends none:
    per-rank random (V-like), reproducible by the parent from the same numbers."""
    return seeded_randn(tuple(shape), "cotangent", seed, index, rank)
