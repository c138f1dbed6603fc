"""Reading a file: the cheap relevance scan, parsing, and the syntax-error diagnostic."""
from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

# A file that names none of these cannot hold anything spmdcheck checks.
_RELEVANT = re.compile(rb"torch|spmd|megatron|dist\.|all_reduce|all_gather|reduce_scatter")
_MESH_NAMES = re.compile(r"mesh_dim_names\s*=\s*[\(\[]([^\)\]]*)[\)\]]")
_SET_MESH_KEYS = re.compile(r"set_current_mesh\(\s*\{([^}]*)\}")
_STRING = re.compile(r"""["']([A-Za-z_][\w]*)["']""")


def is_relevant(data: bytes) -> bool:
    return _RELEVANT.search(data) is not None


@dataclass
class ParseFailure:
    message: str
    line: int
    column: int


def parse(text: str) -> cst.Module | ParseFailure:
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError as exc:
        return ParseFailure(exc.message, exc.raw_line, exc.raw_column + 1)
    except (RecursionError, ValueError) as exc:  # pathological input: still a diagnostic, not a crash
        return ParseFailure(str(exc), 1, 1)


def mesh_names_in(text: str) -> set[str]:
    """Axis names of meshes built in this file, found by a text scan (before analysis needs them)."""
    names: set[str] = set()
    for pattern in (_MESH_NAMES, _SET_MESH_KEYS):
        for m in pattern.finditer(text):
            names.update(_STRING.findall(m.group(1)))
    return names
