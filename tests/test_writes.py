"""What a writer wrote, described the same way in every run (analysis/writes.py)."""

from __future__ import annotations

import libcst as cst

from spmdcheck.analysis import writes
from spmdcheck.analysis.values import (
    UNKNOWN,
    ClassValue,
    DictValue,
    InstanceValue,
    LayoutValue,
    Literal,
    Seq,
    TypeValue,
)
from spmdcheck.lattice import AxisType, Kind


class _Ctx:
    path = "pkg/model.py"


class _Scope:
    ctx = _Ctx()


def _class(name: str, outer: ClassValue | None = None) -> ClassValue:
    node = cst.parse_module(f"class {name}:\n    pass\n").body[0]
    return ClassValue(name, node, _Scope(), (), {}, {}, outer)


def _layout(kind: Kind, shard: int | None = None) -> LayoutValue:
    key = cst.parse_expression('"tp"')
    return LayoutValue((DictValue(((Literal("tp"), TypeValue(AxisType(kind, shard)), key),)),), node=key)


def test_classes_are_named_by_file_and_qualified_name() -> None:
    block = _class("Block")
    assert writes.class_name(_class("Config", outer=block)) == "pkg/model.py:Block.Config"
    assert writes.class_name(UNKNOWN) is None


def test_values_are_described_by_structure_not_identity() -> None:
    one, two = _layout(Kind.V, 0), _layout(Kind.V, 0)  # two objects, made from two parses
    assert one is not two and writes.describe(one) == writes.describe(two) is not None
    assert writes.describe(_layout(Kind.V, 1)) != writes.describe(one)
    assert writes.describe(_layout(Kind.R)) != writes.describe(one)
    assert writes.describe(Seq((Literal(1), one))) == writes.describe(Seq((Literal(1), two)))


def test_what_it_does_not_follow_is_none() -> None:
    obj = InstanceValue(_class("Block"))
    assert writes.describe(obj) is None
    assert writes.describe(Seq((Literal(1), obj))) is None
    assert writes.describe(DictValue(((Literal("k"), obj, cst.parse_expression('"k"')),))) is None
