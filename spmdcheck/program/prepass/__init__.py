"""The pre-pass: which files, and which function bodies, can produce a finding.

libcst (positions, fixes) costs about ten times CPython's `ast`, and most code in a
real tree never meets a type: unannotated code is silent (gradual typing). So every
file is first read with `ast` (which is also its syntax check), cut into *units* (a
module-level statement, function, class header or method), and each unit's identifiers
are collected from its text without comments and prose strings. A file with a unit that
may make a type is checked; the checked files it imports come along as libraries; the
bodies of the functions and methods that cannot matter are blanked line for line
(positions do not move) before libcst parses anything.

Why nothing dropped can hold a finding: a type (or a rank value, a mesh, a collective
whose ranks may diverge) can only enter a program through
- a rule that creates one from untyped operands (a collective, a Megatron mapping or
  model, a rank query, the spmd_types API, a mesh; with a mesh configured, any rule at
  all), which the code names by the last part of its name (`dist.all_reduce`,
  `from torch.distributed import all_reduce as ar`); `seed_words` reads them from the
  rules, and a rule of a kind it does not know is a seed;
- a layout (a placement `Shard(0)`, a DTensor's `placements` or `device_mesh`, a
  flattened mesh), which types a tensor only at a boundary (`from_local`, a seed): a
  unit naming one (`seeds.layout_words`; an import of one makes none), or reading what
  such a unit binds, is a *layout source* once it matters: kept, and its file checked,
  but what it binds makes its readers layout units, not sources, so DTensor's own
  sharding rules, which name placements everywhere and reach no boundary, stay out;
- an annotation or a file setting, whose spellings all contain `spmd` or `Annotated`
  (`spmd_types`, `spmdcheck.annotations.Local`, `# spmdcheck:`, `typing.Annotated`);
and a suppression comment names its code (`# noqa: SPMD101`). A file whose code names
`Annotated`, that imports `spmd_types` or `spmdcheck`, or whose comments hold a setting or a
code is analysed whole (`scan._whole`; prose about SPMD and names like `spmd_mesh` do not count).
Elsewhere a unit naming a seed is a *source*, and `spread` propagates to a fixed point:
- a unit naming what a source binds, in its own file or a checked module it imports
  (it may call it or read its value), is a source; a class with a source method is a
  source, and so is a method reading `self.<attr>` of a source method of its class or
  of a base class;
- a unit a source or exposed unit names is *exposed* (it may be called with typed
  arguments): a module-level function or class named from a file that imports it, a
  method whose name any unit that matters mentions, of a class that matters (objects
  travel anywhere, but the analysis runs a method only on an object whose class some
  code it reads names), and the dunder methods and `forward` of a class that matters
  (construction and calls run them);
- a function writing into state a unit that matters defines (`REGISTRY[name] = obj`,
  `HOOKS.append(fn)`) is exposed, and so is a unit a decorator that matters decorates
  (`@register("row")`: called with it when the module runs, it may store it there).
Names are compared as words (an f-string's text is prose, its replacement fields code),
so the relation only over-approximates what the analysis can follow. SPMDCHECK_NO_PREPASS=1
turns all of this off (every file checked whole), and tests compare the two.

The package: `seeds` (the seed words, from the rules), `scan` (a file cut into units, and the scan as plain
data for the result cache), `digest` (what the analysis reads of a file), `purity` (pure module-level
statements, for selective runs), `spread` (the taint to a fixed point, and the bodies to blank); the names
below are its interface.
"""

from __future__ import annotations

from spmdcheck.program.prepass.digest import analysed_digest, comment_cuts
from spmdcheck.program.prepass.purity import statements
from spmdcheck.program.prepass.scan import (
    FileScan,
    Unit,
    code_only,
    scan,
    scan_from_plain,
    scan_hash,
    scan_to_plain,
)
from spmdcheck.program.prepass.seeds import SeedWords, layout_words, seed_words
from spmdcheck.program.prepass.spread import Plan, blank_bodies, blank_spans, plan, spread
from spmdcheck.program.prepass_switch import enabled

__all__ = [
    "FileScan",
    "Plan",
    "SeedWords",
    "Unit",
    "analysed_digest",
    "blank_bodies",
    "blank_spans",
    "code_only",
    "comment_cuts",
    "enabled",
    "layout_words",
    "plan",
    "scan",
    "scan_from_plain",
    "scan_hash",
    "scan_to_plain",
    "seed_words",
    "spread",
    "statements",
]
