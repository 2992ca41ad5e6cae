"""Dialects: the only place where CUDA and OpenCL words are written.

Templates are written once against a neutral vocabulary (in the manner of PyOpenCL's CLUDA and
tinygrad's C-style renderer). A dialect supplies:

* a preamble of macros that define the neutral words for its backend (`KERNEL`, `LAUNCH_BOUNDS(n)`,
  `GLOBAL`, `LOCAL`, `UNIT_ID`, `CUBE_ID`, `SYNC_CUBE()`, ... and the integer types `i64` / `u64`);
* C type names for the neutral element words and the zero literal of each compute word;
* expressions that read and write one element of global memory with conversion to the compute
  type (half precision without headers or `cl_khr_fp16`);
* capability queries (`supports("fp64")`, `"mma_sync"`...) used by component setup;
* on CUDA and NVIDIA's OpenCL, the PTX intrinsics (codegen/ptx.py, ptx_intrinsics.py); on CUDA the
  WMMA API.

The base is dialect_base.py, the backends cuda_dialect.py and opencl_dialect.py; this module picks
one for a device: on OpenCL by the device's vendor and what the capability probe found there. A test
greps every other module for backend words and inline assembly.
"""
from __future__ import annotations

from .cuda_dialect import CudaDialect, cuda_target_arch  # noqa: F401  (re-exported)
from .device import DeviceInfo
from .dialect_base import Dialect  # noqa: F401  (re-exported)
from .amdgcn_dialect import AmdgcnOpenCLDialect
from .intel_dialect import IntelOpenCLDialect
from .opencl_dialect import OpenCLDialect, PtxOpenCLDialect


def dialect_for(device: DeviceInfo) -> Dialect:
    if device.backend == "cuda":
        return CudaDialect(device)
    if device.backend != "opencl":
        raise ValueError(f"device: unknown backend {device.backend!r} (expected 'cuda' or 'opencl')")
    if device.vendor == "nvidia" and "inline_ptx" in device.features:
        return PtxOpenCLDialect(device)
    if device.vendor == "amd":
        return AmdgcnOpenCLDialect(device)
    if device.vendor == "intel" and "intel_dpas" in device.features:
        return IntelOpenCLDialect(device)
    return OpenCLDialect(device)
