"""The checker as a library: check a source string, a set of sources as one program, or files.

A thin facade over the driver (spmdcheck/engine/): these names stay put while the driver's modules move.

    from spmdcheck.api import Settings, check_source
    diagnostics = check_source(text, "train.py", Settings(mesh=("dp", "tp")))
"""

from __future__ import annotations

from spmdcheck.diagnostics.render import Diagnostic
from spmdcheck.engine.analyse import check_file, check_files
from spmdcheck.engine.check import check_source, check_sources
from spmdcheck.rules.registry import load_registry, shipped_stubs
from spmdcheck.rules.stubs import Registry
from spmdcheck.settings import FileResult, Settings

__all__ = [
    "Diagnostic",
    "FileResult",
    "Registry",
    "Settings",
    "check_file",
    "check_files",
    "check_source",
    "check_sources",
    "load_registry",
    "shipped_stubs",
]
