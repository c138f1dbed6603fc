"""Project helpers declared in the configuration instead of a stub file.

`[tool.spmdcheck] group-helpers = {"mypkg.dist.tp_group" = "tp"}` says that the function returns the
process group of mesh axis "tp"; `mesh-setters = ["mypkg.dist.use_mesh"]` says that the function is a
context manager (or decorator) setting the current mesh to its first argument, as
`spmd_types.set_current_mesh` does. Both are rules like any stub entry: they are written out as a stub
directory (`@process_group("tp")`, `@context("mesh")`) that joins the stub path, so the rest of the
checker sees no difference from a stub the user wrote.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import tempfile

GROUP_HELPERS = "group-helpers"
MESH_SETTERS = "mesh-setters"


class HelperConfigError(ValueError):
    pass


def _check_qualname(key: str, qualname: object) -> str:
    if not isinstance(qualname, str):
        raise HelperConfigError(f"`{key}`: {qualname!r} is not a string")
    parts = qualname.split(".")
    if len(parts) < 2 or not all(p.isidentifier() for p in parts):
        raise HelperConfigError(
            f"`{key}`: {qualname!r} is not a module-level function named with its module (`mypkg.dist.helper`)"
        )
    return qualname


def check_group_helpers(value: object) -> tuple[tuple[str, str], ...]:
    """`{qualified function name = axis name}` -> sorted pairs; raises HelperConfigError."""
    if not isinstance(value, dict):
        raise HelperConfigError(f"`{GROUP_HELPERS}` must be a table of \"module.function\" = \"axis\"")
    out = []
    for qualname, axis in value.items():
        _check_qualname(GROUP_HELPERS, qualname)
        if not isinstance(axis, str) or not axis.strip() or axis != axis.strip():
            raise HelperConfigError(f"`{GROUP_HELPERS}`: the axis of {qualname!r} must be a non-empty axis name")
        out.append((qualname, axis))
    return tuple(sorted(out))


def check_mesh_setters(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise HelperConfigError(f"`{MESH_SETTERS}` must be a list of \"module.function\" names")
    return tuple(sorted({_check_qualname(MESH_SETTERS, q) for q in value}))


def render(group_helpers: tuple[tuple[str, str], ...], mesh_setters: tuple[str, ...]) -> dict[str, str]:
    """The stub files (relative path -> text) declaring these helpers."""
    entries: dict[str, list[str]] = {}
    for qualname, axis in group_helpers:
        module, name = qualname.rsplit(".", 1)
        entries.setdefault(module, []).append(
            f"@process_group({axis!r})\ndef {name}(*args: Any, **kwargs: Any) -> Any: ...\n"
        )
    for qualname in mesh_setters:
        module, name = qualname.rsplit(".", 1)
        entries.setdefault(module, []).append(
            f'@context("mesh")\ndef {name}(mesh: Any, *args: Any, **kwargs: Any) -> Any: ...\n'
        )
    header = (
        '"""Written by spmdcheck from [tool.spmdcheck] group-helpers / mesh-setters."""\n\n'
        "from typing import Any\n\nfrom spmdcheck.annotations import context, process_group\n\n"
    )
    return {module.replace(".", "/") + ".pyi": header + "\n".join(body) for module, body in entries.items()}


def materialize(group_helpers: tuple[tuple[str, str], ...], mesh_setters: tuple[str, ...]) -> pathlib.Path | None:
    """A stub directory holding the rendered helpers (one per distinct declaration, reused), or None."""
    files = render(group_helpers, mesh_setters)
    if not files:
        return None
    digest = hashlib.sha256(repr(sorted(files.items())).encode()).hexdigest()[:20]
    for base in (_cache_base(), pathlib.Path(tempfile.gettempdir()) / "spmdcheck"):
        root = base / "helper-stubs" / digest
        try:
            for rel, text in files.items():
                path = root / rel
                if not path.is_file() or path.read_text(encoding="utf-8") != text:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    tmp = path.with_suffix(f".tmp{os.getpid()}")
                    tmp.write_text(text, encoding="utf-8")
                    tmp.replace(path)  # atomic: a parallel run never reads half a stub
            return root
        except OSError:
            continue
    raise HelperConfigError("cannot write the stub directory for group-helpers / mesh-setters")


def _cache_base() -> pathlib.Path:
    base = os.environ.get("SPMDCHECK_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "spmdcheck"
    )
    return pathlib.Path(base)
