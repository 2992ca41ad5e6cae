"""`gemm_engine.source`: the kernel source any algorithm renders for a problem, with no device.

CUDA sources are rendered for a nominal device of the arch asked for (an H100-like sm_90, an
A100-like sm_80: codegen/device.py), OpenCL sources for a nominal OpenCL GPU or the device given;
nothing is compiled or launched. The first lines say how to build the source by hand (CUDA: the
nvcc target, ``sm_90a`` where wgmma needs the arch-specific one).
"""
from __future__ import annotations

import numpy as np

from ..algorithms.base import resolve
from ..call.plan import render
from ..call.prepare import dense_problem
from ..codegen.device import DeviceInfo, nominal_cuda_device
from ..codegen.dialect import dialect_for
from ..dtypes import bfloat16_dtype, element_type
from ..problem import Layout, MatmulProblem

#: The OpenCL device `source` renders for when given none: a GPU-like one (32-wide planes).
NOMINAL_OPENCL = DeviceInfo("opencl", "nominal OpenCL GPU", 32, 48 * 1024, 1024, 32)


def nominal_device(backend: str = "cuda", arch: str = "sm_90") -> DeviceInfo:
    if backend == "opencl":
        return NOMINAL_OPENCL
    if backend != "cuda":
        raise ValueError(f"backend: expected 'cuda' or 'opencl', got {backend!r}")
    digits = str(arch).lower().removeprefix("sm_").rstrip("a")
    if not digits.isdigit() or len(digits) < 2:
        raise ValueError(f"arch: expected a CUDA arch such as 'sm_80' or 'sm_90', got {arch!r}")
    return nominal_cuda_device(int(digits[:-1]), int(digits[-1]))


def source(algorithm="auto", problem: MatmulProblem | None = None, *, m: int = 1024, n: int = 1024,
           k: int = 1024, batch: int = 1, dtype="float32", layouts=("row", "row"), precision: str = "default",
           backend: str = "cuda", arch: str = "sm_90", device: DeviceInfo | None = None) -> str:
    """The source ``algorithm`` (a registered name, an Algorithm subclass or instance; "auto" by
    default) renders for ``problem`` (or the dense problem of ``m, n, k, batch, dtype, layouts``) on
    ``device`` (default: a nominal device of ``backend`` and ``arch``). Raises SetupError when the
    algorithm cannot run the problem there, saying why."""
    device = device or nominal_device(backend, arch)
    if problem is None:
        lhs, rhs = (Layout(x) for x in layouts)
        problem = dense_problem(batch, m, n, k, element_type_of(dtype), precision=precision,
                                lhs_layout=lhs, rhs_layout=rhs)
    dialect = dialect_for(device)
    alg = resolve(algorithm)
    cfg = alg.setup(problem, dialect)
    return render(alg.chosen(cfg), cfg, dialect)


def element_type_of(dtype) -> np.dtype:
    """The numpy dtype of a dtype or its name ("bfloat16" through ml_dtypes); TypeError naming the
    supported ones otherwise."""
    dt = bfloat16_dtype() if isinstance(dtype, str) and dtype == "bfloat16" else np.dtype(dtype)
    element_type(dt)
    return dt
