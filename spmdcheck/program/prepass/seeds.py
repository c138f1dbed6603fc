"""The seeds of the pre-pass: the words that name a rule able to make a type from untyped operands."""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spmdcheck.frontend import guard
from spmdcheck.program.prepass.scan import WHOLE_FILE_MARKERS, code_only, identifier_words
from spmdcheck.program.prepass.syntax import NEWLINE

if TYPE_CHECKING:
    from spmdcheck.rules.model import OpRule
    from spmdcheck.rules.stubs import Registry

# OpRule fields an op may set and still be unable to type an untyped operand. A rule setting any
# other field (a collective, a mapping, a mesh, the spmd_types API, whatever a later rule kind adds)
# is a seed; so is an spmd_types API call outside `_INERT_SPMD_API`, and a `mesh` context.
_INERT_FIELDS = frozenset(
    {
        "qualname",
        "params",
        "returns",
        "linearity",
        "divisors",
        "contraction",
        "bias",
        "affine_bias",
        "factory",
        "factory_size",
        "factory_rank",
        "passthrough",
        "opaque",
        "grad",
        "dims",
        "inplace_param",
        "is_property",
        "process_group_axis",
        "mesh_group_param",
        "const_type",
        "alias_of",
        "source",
        "spmd_api",
        "context",
        "assumed",  # a constant the checker assumes (get_spmd_backend()): it makes no type
        "instance_test",  # isinstance(t, DTensor) of a typed tensor: it makes no type
        # values, not types: a container of the modules it is given, a string constant (an axis name),
        # the stub module of a model (its code is judged in `seed_words`), a tensor's number of dims
        # (x.dim()). A class typed by a contract another file sets on it is found by `spread`.
        "container_param",
        "rank_of",
        "sequential_param",
        "const_str",
        "model_module",
        "model_path",
        # sizes are numbers (`x.shape`, `x.size(d)`), and a parameter of untyped data has no type either
        "shape_of",
        "untyped_is_unknown",
        "parallel_loss",  # a loss of a DTensor that is already there (made at a boundary, itself a seed)
    }
)


# spmd_types API handlers that only read a type that is already there (backward checks the loss).
_INERT_SPMD_API = frozenset({"backward", "ignore", "local_map"})


# DTensor API handlers that give a number of a mesh that is already there (`mesh.size("tp")`), or the gradient of
# a DTensor that is already there (`x.grad`): a mesh or a DTensor comes from a factory or a boundary, itself a
# seed; names as common as `size` and `grad` would make nearly every file a seed
_INERT_DTENSOR_API = frozenset({"mesh_size", "grad"})

# DTensor API handlers that make a layout, not a type: a placement (`Shard(0)`), a DTensor's placements or
# mesh, a flattened mesh. A layout types a tensor only where it reaches a boundary (`from_local`,
# `redistribute`, `distribute_tensor`: seeds), so a unit naming one is a source only once it may be run for
# a unit that matters (`spread`); DTensor's own sharding rules name them in every file and reach none.
_LAYOUT_DTENSOR_API = frozenset({"placement", "placements", "device_mesh", "flatten"})


_INERT_CONTEXTS = frozenset({"no_grad", "enable_grad", "no_typecheck"})


def _creates_types(rule: OpRule) -> bool:
    inert_dtensor = rule.dtensor_api in _INERT_DTENSOR_API or rule.dtensor_api in _LAYOUT_DTENSOR_API
    for f in dataclasses.fields(rule):
        if f.name in _INERT_FIELDS or (inert_dtensor and f.name in ("dtensor_api", "dtensor_args")):
            continue
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        if getattr(rule, f.name) != default:
            return True
    if rule.spmd_api is not None and rule.spmd_api not in _INERT_SPMD_API:
        return True
    return rule.context is not None and rule.context not in _INERT_CONTEXTS


def seed_words(registry: Registry, mesh_configured: bool) -> frozenset[str]:
    """Identifiers through which a program can meet a type, from the rules themselves.

    A rule is reached by a name whose last part is its key's last part (`dist.all_reduce`,
    `from torch.distributed import all_reduce`); re-exports between checked files are followed
    by the taint. With a mesh configured every factory types its result, so the first part of
    every rule's key (`torch`, which every such name is imported through) is a seed as well.
    """
    words: set[str] = set()
    models: dict[str, str] = {}  # a @model rule's name -> its stub file, judged by what its code names
    for key in registry.rules:
        rule = registry.lookup(key)
        root = key.split(".", 1)[0]
        if rule is None or any(marker.decode() in root for marker in WHOLE_FILE_MARKERS):
            continue  # reached only through a name holding `spmd`: such files are analysed whole
        if mesh_configured:
            words.add(root)
        if _creates_types(rule):
            words.add(key.rpartition(".")[2])
        elif rule.model_path is not None:
            models[key.rpartition(".")[2]] = rule.model_path
    # A model's code runs as the checked code would: it can make a type only by naming a seed (or the
    # spmd_types API); one that only stores its arguments makes values, like a literal does.
    model_words = {name: _model_words(path) for name, path in models.items()}
    changed = True
    while changed:
        changed = False
        for name, named in model_words.items():
            if name not in words and (named is None or not named.isdisjoint(words)):
                words.add(name)
                changed = True
    return frozenset(words)


def _model_words(path: str) -> frozenset[str] | None:
    """The identifiers a model stub's code names outside its import statements; None when it cannot be
    read (then it is a seed) or when it names a marker (`spmd`, `Annotated`)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        text = data.decode("utf-8")
        tree = guard.quiet_ast_parse(data)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return None
    lines = NEWLINE.split(code_only(text))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for n in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                lines[n - 1] = ""
    rest = "\n".join(lines)
    if any(marker.decode() in rest for marker in WHOLE_FILE_MARKERS):
        return None
    return identifier_words(rest)


@dataclass(frozen=True)
class SeedWords:
    """The words the scan looks for: `types`, a unit naming one is a source; `layouts`, a unit naming one is a
    source once it matters (`layout_words`)."""

    types: frozenset[str]
    layouts: frozenset[str] = frozenset()

    def to_plain(self) -> list[list[str]]:
        return [sorted(self.types), sorted(self.layouts)]

    @classmethod
    def from_plain(cls, data: object) -> SeedWords | None:
        """The words `to_plain` gave (None: not such data: a cache written by another version)."""
        if not (isinstance(data, list) and len(data) == 2 and all(isinstance(part, list) for part in data)):
            return None
        if not all(isinstance(w, str) for part in data for w in part):
            return None
        return cls(frozenset(data[0]), frozenset(data[1]))


def layout_words(registry: Registry) -> frozenset[str]:
    """Identifiers of the rules that make a layout (`_LAYOUT_DTENSOR_API`): a unit naming one becomes a source
    once it matters (`scan.Unit.layout`, `spread`; a unit that names a seed as well is a source anyway)."""
    words: set[str] = set()
    for key in registry.rules:
        rule = registry.lookup(key)
        if rule is not None and rule.dtensor_api in _LAYOUT_DTENSOR_API:
            words.add(key.rpartition(".")[2])
    return frozenset(words)
