"""What runs inside a rank process: join the process group once, then run programs
sent by the parent (pool.py) until told to stop.

A job is a dict (see :func:`run_job`); the answer is a dict with ``status`` "ok"
or "error". Messages are pickled by value with plain ``pickle`` (no shared
memory), one ``send_bytes`` each way.
"""
from __future__ import annotations

import contextlib
import datetime
import os
import pickle
import sys
import traceback
import types
import warnings

FAKE_MEGATRON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_megatron")
FAKE_DEEPSPEED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_deepspeed")
UNSUPPORTED_MARK = "fake megatron"


def rank_main(kind: str, rank: int, world: int, port: int, conn) -> None:  # noqa: ANN001
    """Entry of a rank process. ``kind`` is "gloo" (a real group) or "fake" (spmd-types' checker)."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    warnings.filterwarnings("ignore")
    for fake in (FAKE_MEGATRON, FAKE_DEEPSPEED):
        if fake not in sys.path:
            sys.path.insert(0, fake)
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    try:
        if kind == "gloo":
            dist.init_process_group("gloo", rank=rank, world_size=world,
                                    timeout=datetime.timedelta(seconds=120))
        else:
            from torch.testing._internal.distributed.fake_pg import FakeStore

            dist.init_process_group("fake", rank=rank, world_size=world, store=FakeStore())
        conn.send_bytes(pickle.dumps({"status": "ready", "pid": os.getpid()}))
    except Exception as exc:  # noqa: BLE001
        conn.send_bytes(pickle.dumps({"status": "error", "error": _error(exc, "init")}))
        return
    state = _RankState(kind, rank, world)
    while True:
        try:
            raw = conn.recv_bytes()
        except (EOFError, OSError):
            break
        job = pickle.loads(raw)
        if job == "stop":
            break
        try:
            result = state.run_job(job)
        except BaseException as exc:  # noqa: BLE001 - report, never die silently
            result = {"status": "error", "error": _error(exc, "harness")}
        try:
            conn.send_bytes(pickle.dumps(result))
        except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable output
            conn.send_bytes(pickle.dumps({"status": "error", "error": _error(exc, "harness")}))
    with contextlib.suppress(Exception):
        dist.destroy_process_group()


def _error(exc: BaseException, stage: str) -> dict:
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(tb)
    unsupported = (
        isinstance(exc, (ImportError, NotImplementedError)) or UNSUPPORTED_MARK in str(exc)
        or (isinstance(exc, AttributeError) and "fake_megatron" in text)
    )
    spmd_error = any(c.__name__ == "SpmdTypeError" for c in type(exc).__mro__)
    frames = traceback.extract_tb(exc.__traceback__)
    from_spmd_types = bool(frames) and f"{os.sep}spmd_types{os.sep}" in frames[-1].filename and isinstance(
        exc, (ValueError, TypeError))
    return {
        "type": type(exc).__name__,
        "message": str(exc)[:2000],
        "traceback": text[-4000:],
        "stage": stage,
        "unsupported": unsupported,
        "spmd_type_error": spmd_error,
        "from_spmd_types": from_spmd_types,
    }


class _RankState:
    def __init__(self, kind: str, rank: int, world: int) -> None:
        self.kind, self.rank, self.world = kind, rank, world
        self.meshes: dict = {}

    def mesh(self, axes: tuple[str, ...], sizes: tuple[int, ...]):  # noqa: ANN201
        key = (axes, sizes)
        if key not in self.meshes:
            from torch.distributed.device_mesh import init_device_mesh

            self.meshes[key] = init_device_mesh("cpu", sizes, mesh_dim_names=axes)
        return self.meshes[key]

    def run_job(self, job: dict) -> dict:
        import torch

        from .layout import rank_cotangent, seeded_randn

        axes, sizes = tuple(job["axes"]), tuple(job["sizes"])
        mesh = self.mesh(axes, sizes)
        name = f"_gt_program_{job['id']}"
        module = types.ModuleType(name)
        module.__file__ = job["path"]
        sys.modules[name] = module
        stage = "load"
        try:
            import spmd_types as spmd
            from megatron.core import parallel_state

            parallel_state._bind_mesh(mesh)
            torch.manual_seed(job.get("seed", 0))
            erased = contextlib.nullcontext() if job.get("mode") == "typecheck" else _erase_type_assertions(spmd)
            with spmd.set_current_mesh(mesh), erased:
                package = job.get("package")
                if package:  # a whole program: import its entry module from the package copy
                    namespace = _import_package(package)
                else:
                    exec(compile(job["source"], job["path"], "exec"), module.__dict__)  # noqa: S102
                    namespace = module.__dict__
                fn = namespace[job["entry"]]
                params = {k: v for k, v in namespace.items()
                          if isinstance(v, torch.Tensor) and v.is_leaf and v.requires_grad}
                inputs = {k: v.detach().clone().requires_grad_(v.is_floating_point())
                          for k, v in job["inputs"].items()}
                if job.get("mode") == "typecheck":
                    for k, t in inputs.items():  # the declared types, as the checker must see them
                        ty = job["input_types"].get(k)
                        if ty is not None:
                            spmd.assert_type(t, {a: _spmd_type(spmd, kd, d) for a, (kd, d) in ty.items()})
                torch.manual_seed(job.get("seed", 0))
                stage = "forward"
                if job.get("mode") == "typecheck":
                    from spmd_types.checker import typecheck

                    with typecheck(strict_mode="strict" if job.get("strict") else "permissive"):
                        fn(**inputs)
                    return {"status": "ok", "outputs": [], "grads": {}, "self_backward": False}
                versions = {k: t._version for k, t in inputs.items()}
                out = fn(**inputs)
                mutated = sorted(k for k, t in inputs.items() if t._version != versions[k])
                outs = list(out) if isinstance(out, (tuple, list)) else ([] if out is None else [out])
                self_backward = any(t.grad is not None for t in [*inputs.values(), *params.values()])
                stage = "backward"
                if not self_backward:
                    tensors, cots = [], []
                    for i, o in enumerate(outs):
                        if not (isinstance(o, torch.Tensor) and o.requires_grad and o.is_floating_point()):
                            continue
                        cot = job["cotangents"][i] if i < len(job["cotangents"]) else None
                        if isinstance(cot, torch.Tensor) and tuple(cot.shape) == tuple(o.shape):
                            c = cot.to(o.dtype)
                        elif isinstance(cot, dict):  # a recipe: no global meaning, drawn here at the local shape
                            c = seeded_randn(tuple(o.shape), *cot["seed_parts"]).to(o.dtype)
                        elif cot is None:  # the one-rank reference: the parent draws the same g again
                            c = rank_cotangent(tuple(o.shape), int(job.get("seed", 0)), i, 0).to(o.dtype)
                        else:  # a shape the reference did not have: the run differs anyway
                            c = rank_cotangent(tuple(o.shape), int(job.get("seed", 0)), i, self.rank).to(o.dtype)
                        tensors.append(o)
                        cots.append(c)
                    if tensors:
                        torch.autograd.backward(tensors, cots)
            return {
                "status": "ok",
                "outputs": [o.detach().clone() if isinstance(o, torch.Tensor) else None for o in outs],
                "grads": {k: (None if t.grad is None else t.grad.detach().clone()) for k, t in inputs.items()},
                "self_backward": self_backward,
                "mutated": mutated,
                "module_grads": {k: (None if t.grad is None else t.grad.detach().clone()) for k, t in params.items()},
                "module_types": {k: _axis_kinds(spmd, t, mesh) for k, t in params.items()},
            }
        except BaseException as exc:  # noqa: BLE001
            return {"status": "error", "error": _error(exc, stage)}
        finally:
            sys.modules.pop(name, None)
            if job.get("package"):
                _drop_package(job["package"])
            with contextlib.suppress(Exception):
                from megatron.core import parallel_state

                parallel_state._bind_mesh(None)


def _import_package(package: dict) -> dict:
    """Import ``<name>.<entry>`` from the package copy under ``root`` (the parent made it); its namespace."""
    import importlib

    if package["root"] not in sys.path:
        sys.path.insert(0, package["root"])
    importlib.invalidate_caches()
    return vars(importlib.import_module(f"{package['name']}.{package['entry']}"))


def _drop_package(package: dict) -> None:
    """Forget the package's modules, so the next job imports (and runs) them afresh."""
    prefix = package["name"]
    for mod in [m for m in sys.modules if m == prefix or m.startswith(prefix + ".")]:
        del sys.modules[mod]
    with contextlib.suppress(ValueError):
        sys.path.remove(package["root"])


ASSERTIONS = ("assert_type", "assert_local_type", "assert_type_like", "assert_local_type_like", "mutate_type")


@contextlib.contextmanager
def _erase_type_assertions(spmd):  # noqa: ANN001, ANN202
    """In the execution run, spmd_types' type assertions are erased (each returns its tensor): they change no
    value, and outside ``typecheck()`` spmd_types does not track types through ops, so a correct
    ``assert_type``/``mutate_type`` can still fail on a stale or missing tag. Checking them is the runtime
    checker's job (the second opinion), not the execution's."""
    import spmd_types.runtime as runtime

    def identity(tensor, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        return tensor

    saved = []
    for mod in (spmd, runtime):
        for name in ASSERTIONS:
            if hasattr(mod, name):
                saved.append((mod, name, getattr(mod, name)))
                setattr(mod, name, identity)
    try:
        yield
    finally:
        for mod, name, fn in saved:
            setattr(mod, name, fn)


def _axis_kinds(spmd, t, mesh) -> dict | None:  # noqa: ANN001
    """A module-level tensor's run-time SPMD type by axis name ("R", ...), None if it has none.
    Size-1 axes are never stored (spmd_types drops them): they read as R."""
    if not spmd.has_local_type(t):
        return None
    out = {}
    for name in mesh.mesh_dim_names:
        group = mesh.get_group(name)
        if group.size() == 1:
            out[name] = "R"
            continue
        k = spmd.maybe_get_axis_local_type(t, group)
        if k is None:
            return None
        out[name] = k.name if len(k.name) == 1 else str(k)[-1]
    return out


def _spmd_type(spmd, kind: str, dim: int | None):  # noqa: ANN001, ANN202
    if kind == "S":
        return spmd.S(dim)
    return {"R": spmd.R, "I": spmd.I, "V": spmd.V, "P": spmd.P}[kind]
