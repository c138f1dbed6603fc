"""What real code writes (torchtitan, Megatron): each idiom is read, and what cannot be read is silent."""

from __future__ import annotations

import textwrap

from spmdcheck.api import Settings, check_source


def codes(src: str, mesh: tuple[str, ...] = (), strict: bool = False) -> list[tuple[int, str]]:
    diags = check_source(textwrap.dedent(src), "t.py", Settings(mesh=mesh, strict=strict))
    return [(d.line, d.code) for d in diags]


def test_raw_collective_into_a_fresh_leaf_buffer_is_not_an_autograd_cut() -> None:
    src = """
        import torch
        import torch.distributed as dist

        def recv(shape, pg):
            received = torch.empty(shape, requires_grad=True)
            dist.broadcast(received, src=0, group=pg)
            return received

        def cut(pg):
            w = torch.randn(4, 4, requires_grad=True)
            y = w * 2
            dist.all_reduce(y, group=pg)
            return y
    """
    assert codes(src) == [(13, "SPMD306")]


def test_parameter_is_a_leaf_too() -> None:
    src = """
        import torch
        import torch.distributed as dist

        def sync(t, pg):
            p = torch.nn.Parameter(t)
            dist.broadcast(p, src=0, group=pg)
            return p
    """
    assert codes(src) == []


def test_computed_shard_dims_are_evaluated_or_unknown() -> None:
    src = """
        import torch
        import spmd_types as spmd

        def f(x, d: int):
            x = spmd.assert_type(x, {"tp": spmd.S(d)})
            z = torch.randn(4, 8)
            z = spmd.assert_type(z, {"tp": spmd.S(z.dim() - 1)})
            return spmd.all_gather(z, "tp", src=spmd.S(0), dst=spmd.R)
    """
    # S(d) with d a parameter is S(?): silent; z.dim() - 1 is 1 at a known rank, so gathering dim 0 is wrong
    assert codes(src, mesh=("tp",)) == [(9, "SPMD305")]


def test_literal_non_int_dim_is_still_malformed() -> None:
    src = """
        import torch
        import spmd_types as spmd
        x = spmd.assert_type(torch.randn(4), {"tp": spmd.S("a")})
    """
    assert codes(src, mesh=("tp",)) == [(4, "SPMD002")]


def test_strenum_axis_names_and_module_aliases() -> None:
    src = """
        from enum import StrEnum
        import torch
        import spmd_types as spmd

        class Axis(StrEnum):
            TP = "tp"

        TP = Axis.TP

        def f(x):
            x = spmd.assert_type(x, {TP: spmd.P})
            return torch.relu(x)
    """
    assert codes(src, mesh=("tp",)) == [(13, "SPMD101")]


def test_torchtitan_mesh_axis_names_come_from_the_shipped_stub() -> None:
    src = """
        import torch
        import spmd_types as spmd
        from torchtitan.distributed.parallel_dims import MeshAxisName

        def f(x):
            x = spmd.assert_type(x, {MeshAxisName.TP: spmd.P})
            return torch.relu(x)
    """
    assert codes(src, mesh=("tp",)) == [(8, "SPMD101")]


def test_unreadable_dict_keys_leave_those_axes_unknown() -> None:
    src = """
        import spmd_types as spmd
        from somewhere import AXIS, helper

        def f(x, group):
            spmd.assert_type(x, {AXIS: spmd.S(0), group: spmd.R, "tp": spmd.V})
            spmd.assert_type(x, {helper(): spmd.I})
            return x
    """
    assert codes(src, mesh=("tp",)) == []


def test_known_non_axis_key_is_malformed() -> None:
    src = """
        import torch
        import spmd_types as spmd
        x = spmd.assert_type(torch.randn(4), {spmd.S: spmd.V})
    """
    assert [c for _, c in codes(src, mesh=("tp",))] == ["SPMD002"]


def test_mutate_type_on_a_partly_known_value_is_silent_unless_strict() -> None:
    src = """
        import torch
        import spmd_types as spmd

        def f(parts):
            packed = torch.cat(parts + [torch.tensor([0])])
            spmd.mutate_type(packed, "dp", src=spmd.R, dst=spmd.V)
            return packed
    """
    assert codes(src) == []


def test_bare_type_without_a_visible_mesh_is_silent_unless_strict() -> None:
    src = """
        import spmd_types as spmd
        from torchtitan.distributed.spmd_types import set_current_spmd_mesh

        def f(x, mesh):
            with set_current_spmd_mesh(mesh):
                spmd.assert_type(x, spmd.R)
            return x
    """
    assert codes(src) == []
    assert [c for _, c in codes(src, strict=True)] == ["SPMD002"]


def test_process_group_parameter_is_one_opaque_axis() -> None:
    src = """
        import torch
        import torch.distributed as dist
        import spmd_types as spmd

        def f(h, w, residual, group: dist.ProcessGroup):
            spmd.assert_type(h, {group: spmd.P})
            spmd.assert_type(residual, {group: spmd.I})
            return residual + spmd.all_reduce(h, group, src=spmd.P, dst=spmd.I)

        def g(h, residual, group: dist.ProcessGroup):
            spmd.assert_type(h, {group: spmd.P})
            spmd.assert_type(residual, {group: spmd.I})
            return residual + h
    """
    # in g both uses of `group` are one axis: the unreduced Partial meets the Invariant residual
    assert [line for line, _ in codes(src, mesh=("tp",))] == [14]


def test_partition_spec_is_a_type() -> None:
    src = """
        import spmd_types as spmd

        def f(x):
            x = spmd.assert_type(x, spmd.V, spmd.PartitionSpec("dp", None, "tp"))
            return spmd.all_gather(x, "tp", src=spmd.S(1), dst=spmd.R)
    """
    assert codes(src, mesh=("dp", "tp")) == [(6, "SPMD305")]


def test_local_map_call_form_checks_arguments_and_types_results() -> None:
    src = """
        import spmd_types as spmd

        def f(a, b):
            a = spmd.assert_type(a, {"tp": spmd.S(1)})
            out = spmd.local_map(
                in_types=({"tp": spmd.S(0)}, {"tp": spmd.S(0)}),
                out_types={"tp": spmd.S(0)},
            )(lambda x, y: x + y)(a, b)
            return spmd.all_gather(out, "tp", src=spmd.S(1), dst=spmd.R)
    """
    assert codes(src, mesh=("tp",)) == [(9, "SPMD403"), (10, "SPMD305")]


def test_setitem_of_an_unknown_value_makes_the_buffer_unknown() -> None:
    src = """
        import torch
        import spmd_types as spmd

        def f(val, start, end):
            buf = torch.zeros(8)
            buf[start:end] = val
            return spmd.all_reduce(buf, "tp", src=spmd.P, dst=spmd.R)
    """
    assert codes(src, mesh=("tp",)) == []
