"""Compile rendered CUDA sources with nvcc (no GPU needed) for the architectures we ship.

Used by the compile-check tests so that a broken CUDA template fails CI on a machine without a
GPU. Each source is compiled to a cubin for sm_80 and sm_90a.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pytest

from gemm_engine.batch.base import KERNEL_NAME
from gemm_engine.batch.split_k import REDUCE_KERNEL_NAME

ARCHS = ("-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90a,code=sm_90a")


def nvcc_or_skip() -> str:
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if nvcc is None:
        pytest.skip("nvcc is not installed: CUDA sources cannot be compile-checked here")
    return nvcc


def compile_cuda(source: str, nvcc: str, arch: str) -> tuple[bool, str]:
    """(ok, compiler output) for one source and one -gencode flag."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "kernel.cu")
        with open(path, "w") as f:
            f.write(source)
        proc = subprocess.run([nvcc, "-cubin", arch, "-o", os.path.join(tmp, "kernel.cubin"), path],
                              capture_output=True, text=True)
        return proc.returncode == 0, proc.stdout + proc.stderr


def bundle(sources: list[str]) -> str:
    """Several kernel sources in one translation unit: each in its own namespace (macros may be
    redefined identically; helpers and kernels must not clash), so nvcc starts once per bundle.
    ``#include`` lines are hoisted out of the namespaces (a header must be seen at file scope)."""
    includes, bodies = [], []
    for i, src in enumerate(sources):
        lines = src.splitlines()
        includes += [ln for ln in lines if ln.startswith("#include") and ln not in includes]
        body = "\n".join(ln for ln in lines if not ln.startswith("#include"))
        for name in (KERNEL_NAME, REDUCE_KERNEL_NAME):   # extern "C" names ignore namespaces
            body = body.replace(name, f"{name}_{i}")
        bodies.append(f"namespace bundle{i} {{\n{body}\n}}")
    return "\n".join(includes + bodies)


def archs_for(min_arch: str | None) -> tuple[str, ...]:
    """The -gencode flags of ARCHS an algorithm's kernels are valid for: all of them, or (for an
    algorithm whose class declares ``min_arch = "sm_90a"``: wgmma is arch-specific PTX that no
    compute_80 pass accepts) only those of that target."""
    if min_arch is None:
        return ARCHS
    return tuple(a for a in ARCHS if a.endswith(f"code={min_arch}"))


def compile_all(sources: dict, nvcc: str, per_bundle: int = 24, archs: tuple[str, ...] = ARCHS) -> dict:
    """{names: error text} for every bundle of sources that failed on an arch; {} when all compiled."""
    items = list(sources.items())
    bundles = [items[i:i + per_bundle] for i in range(0, len(items), per_bundle)]
    jobs = [(chunk, arch) for chunk in bundles for arch in archs]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(lambda j: compile_cuda(bundle([s for _, s in j[0]]), nvcc, j[1]), jobs))
    return {f"{[n for n, _ in chunk]} [{arch}]": log
            for (chunk, arch), (ok, log) in zip(jobs, results) if not ok}
