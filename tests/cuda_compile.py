"""Compile rendered CUDA source with nvcc, no GPU needed: the check that a config builds for a target.

`compile_cuda(source, "sm_90a")` skips the calling test when nvcc is missing and fails it with
nvcc's messages and the numbered source when compilation fails.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

import pytest

from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device

#: The targets CI checks: Ampere (mma.sync, cp.async) and Hopper with its arch-specific features.
ARCHS = ("sm_80", "sm_90a")


def device_for(arch: str) -> DeviceInfo:
    """The nominal device a kernel for ``arch`` ("sm_80", "sm_90a") is rendered for."""
    digits = arch[3:].rstrip("a")
    return nominal_cuda_device(int(digits[:-1]), int(digits[-1]))


def compile_cuda(source: str, arch: str) -> bytes:
    """The cubin nvcc builds from ``source`` for ``arch``."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found on PATH")
    gencode = f"-gencode=arch=compute_{arch[3:]},code={arch}"
    with tempfile.TemporaryDirectory() as tmp:
        src, cubin = os.path.join(tmp, "kernel.cu"), os.path.join(tmp, "kernel.cubin")
        with open(src, "w") as f:
            f.write(source)
        proc = subprocess.run([nvcc, "-cubin", gencode, "-o", cubin, src],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            numbered = "\n".join(f"{i + 1:5d} {line}" for i, line in enumerate(source.splitlines()))
            pytest.fail(f"nvcc failed for {arch}:\n{proc.stderr}\n--- source ---\n{numbered}")
        with open(cubin, "rb") as f:
            return f.read()
