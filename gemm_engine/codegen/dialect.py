"""Dialects: the only place where CUDA and OpenCL words are written.

Templates are written once against a neutral vocabulary (in the manner of PyOpenCL's CLUDA and
tinygrad's C-style renderer). A dialect supplies:

* a preamble of macros that define the neutral words for its backend (`KERNEL`, `LAUNCH_BOUNDS(n)`,
  `GLOBAL`, `LOCAL`, `UNIT_ID`, `CUBE_ID`, `SYNC_CUBE()`, ... and the integer type `i64`);
* C type names for the neutral element words and the zero literal of each compute word;
* expressions that read and write one element of global memory with conversion to the compute
  type (half precision without headers or `cl_khr_fp16`);
* capability queries (`supports("fp64")`, `"mma_sync"`...) used by component setup;
* on CUDA, every PTX intrinsic (codegen/ptx.py) and the WMMA API.

The base is dialect_base.py, the backends cuda_dialect.py and opencl_dialect.py; this module picks
one for a device. A test greps every other module for backend words and inline assembly.
"""
from __future__ import annotations

from .cuda_dialect import CudaDialect, cuda_target_arch  # noqa: F401  (re-exported)
from .device import DeviceInfo
from .dialect_base import Dialect  # noqa: F401  (re-exported)
from .opencl_dialect import OpenCLDialect


def dialect_for(device: DeviceInfo) -> Dialect:
    return {"cuda": CudaDialect, "opencl": OpenCLDialect}[device.backend](device)
