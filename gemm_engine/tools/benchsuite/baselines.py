"""The libraries the engine is compared with, one small class each, per backend.

CUDA: ``cupy`` (cupy.matmul: cuBLAS), ``torch`` (torch.matmul: cuBLAS / cuBLASLt) and ``triton`` (a
plain Triton kernel, `triton_matmul.py`). OpenCL: ``numpy`` (the host's BLAS on host copies) and
``clblast`` (pyclblast.gemm on the engine's queue). A baseline says per row whether it can run it
(and why not), then `prepare` turns the row's device arrays into a no-argument callable that the
runner times exactly like the engine's call. Device arrays are shared, never copied: torch and
Triton read CuPy's memory through DLPack.

Fused rows (``relu(a @ b + bias)``) run as the library's own unfused sequence (matmul, add, relu):
that is what a user of the library would write, and what fusion is meant to beat.
"""
from __future__ import annotations

import functools
import importlib

import numpy as np

#: Baselines a ratio may be taken against, in order of preference: the device's own BLAS first.
NATIVE = ("cupy", "torch", "clblast", "numpy")


@functools.lru_cache(maxsize=None)
def _module(name: str):
    """(module, None) or (None, why it cannot be imported); asked once per process."""
    try:
        return importlib.import_module(name), None
    except Exception as exc:  # noqa: BLE001 -- a broken install is as unavailable as a missing one
        return None, f"{name} is not importable here ({type(exc).__name__}: {exc})"


class Baseline:
    """A library call to compare with. Subclasses set `name` and implement `prepare`."""

    name = ""
    backend = ""

    def __init__(self, runtime):
        self.rt = runtime

    def available(self, row=None) -> tuple[bool, str]:
        """(True, "") when this baseline can run ``row`` (or, without a row, at all), else
        (False, the reason)."""
        return True, ""

    def note(self, row) -> str:
        """A caveat that goes with this baseline's number for ``row`` ("" when none)."""
        return ""

    def prepare(self, row, a, b, bias):
        """A callable running the baseline once on the row's device arrays (``bias`` is None for
        unfused rows). Results are allocated per call as the engine's are, except where the
        library only writes into a given output (CLBlast): that one is allocated here, once."""
        raise NotImplementedError

    def release(self) -> None:
        """Give back memory the library caches between rows (so the next, larger row fits)."""


# -- CUDA ----------------------------------------------------------------------------------------
class CupyMatmul(Baseline):
    name, backend = "cupy", "cuda"

    def available(self, row=None):
        if row is None:
            return True, ""
        if row.precision == "tf32":
            # CuPy's only tf32 switch is the CUPY_TF32 environment variable, global to the process:
            # it would turn every float32 cupy.matmul of the run into tf32.
            return False, ("cupy.matmul has no per-call tf32 switch (CUPY_TF32 is process-wide); "
                           "torch is the tf32 baseline")
        # bfloat16: CuPy < 14 has no such arrays, but then the runner skips the whole row.
        return True, ""

    def prepare(self, row, a, b, bias):
        cp = self.rt.cp
        if row.fused:
            return lambda: cp.maximum(cp.matmul(a, b) + bias, 0)
        return lambda: cp.matmul(a, b)


class TorchMatmul(Baseline):
    name, backend = "torch", "cuda"

    def available(self, row=None):
        torch, why = _module("torch")
        if torch is None:
            return False, why
        if not torch.cuda.is_available():
            return False, "torch sees no CUDA device"
        return True, ""

    def prepare(self, row, a, b, bias):
        torch = _module("torch")[0]
        ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
        flags = torch.backends.cuda.matmul
        tf32 = row.precision == "tf32"
        # allow_tf32 is global to torch: set on every call, so that the float32 rows timed after a
        # tf32 row run exact float32 again.
        if row.fused:
            tbias = torch.from_dlpack(bias)

            def run():
                flags.allow_tf32 = tf32
                return torch.relu(torch.matmul(ta, tb) + tbias)
        else:
            def run():
                flags.allow_tf32 = tf32
                return torch.matmul(ta, tb)
        return run

    def release(self):
        torch = _module("torch")[0]
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()


class TritonMatmul(Baseline):
    """A plain Triton kernel with one fixed tiling (no autotuning): what a few lines of Triton give."""

    name, backend = "triton", "cuda"

    def available(self, row=None):
        for dep in ("triton", "torch"):   # Triton launches on torch tensors
            if _module(dep)[0] is None:
                return False, _module(dep)[1]
        if row is not None and row.fused:
            return False, "the Triton baseline is a plain matmul kernel (no epilogue)"
        return True, ""

    def prepare(self, row, a, b, bias):
        from .triton_matmul import matmul_call
        torch = _module("torch")[0]
        return matmul_call(torch.from_dlpack(a), torch.from_dlpack(b), tf32=row.precision == "tf32")


# -- OpenCL --------------------------------------------------------------------------------------
class NumpyMatmul(Baseline):
    """numpy.matmul on host copies made before timing: the host BLAS on the same machine."""

    name, backend = "numpy", "opencl"

    def note(self, row):
        if row.dtype in ("float16", "bfloat16"):
            return "numpy has no half-precision BLAS: float32 matmul of upcast copies (upcast not timed)"
        return ""

    def prepare(self, row, a, b, bias):
        def host(x):
            x = self.rt.to_host(x)
            return x.astype(np.float32) if row.dtype in ("float16", "bfloat16") else x
        ha, hb = host(a), host(b)
        if row.fused:
            hbias = host(bias)
            return lambda: np.maximum(np.matmul(ha, hb) + hbias, 0)
        return lambda: np.matmul(ha, hb)


class CLBlastMatmul(Baseline):
    name, backend = "clblast", "opencl"

    def available(self, row=None):
        pyclblast, why = _module("pyclblast")
        if pyclblast is None:
            return False, why
        if row is None:
            return True, ""
        if row.fused:
            return False, "CLBlast has no fused epilogue"
        if row.batch > 1:
            return False, "pyclblast.gemm takes 2-D matrices only"
        if row.dtype not in ("float32", "float16"):
            return False, f"CLBlast has no {row.dtype} GEMM"
        return True, ""

    def prepare(self, row, a, b, bias):
        pyclblast = _module("pyclblast")[0]
        c = self.rt.empty((row.m, row.n), a.dtype)
        queue = self.rt.queue
        return lambda: pyclblast.gemm(queue, row.m, row.n, row.k, a, b, c, a_ld=row.k, b_ld=row.n, c_ld=row.n)


ALL = (CupyMatmul, TorchMatmul, TritonMatmul, NumpyMatmul, CLBlastMatmul)


def baselines_for(runtime, names=None) -> list[Baseline]:
    """The baselines of ``runtime``'s backend (only those in ``names`` when given; a name of another
    backend's baseline or an unknown one raises ValueError)."""
    mine = {cls.name: cls for cls in ALL if cls.backend == runtime.backend}
    if names is None:
        return [cls(runtime) for cls in mine.values()]
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in names if n not in mine]
    if unknown:
        raise ValueError(f"baselines: {', '.join(map(repr, unknown))} not available on the {runtime.backend} "
                         f"backend; expected some of {', '.join(mine)}")
    return [mine[n](runtime) for n in names]
