"""tools/source.py: the source an algorithm renders with no device -- for nominal CUDA devices of the
arch asked (sm_90a where wgmma needs it) or a nominal OpenCL GPU -- and its argument checks."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.errors import SetupError
from gemm_engine.tools.source import NOMINAL_OPENCL, element_type_of, nominal_device, source


def test_nominal_devices():
    assert nominal_device("cuda", "sm_80").compute_capability == (8, 0)
    assert nominal_device("cuda", "sm_90a").compute_capability == (9, 0)
    assert nominal_device("opencl") is NOMINAL_OPENCL
    with pytest.raises(ValueError, match="backend: expected 'cuda' or 'opencl'"):
        nominal_device("metal")
    with pytest.raises(ValueError, match="arch: expected a CUDA arch"):
        nominal_device("cuda", "hopper")


def test_cuda_sources_name_their_build():
    text = source("simple_unit", m=64, n=64, k=64)
    assert "extern \"C\" __global__" in text and "gemm_engine_kernel" in text and "nvcc" in text
    hopper = source("pipelined_wgmma", m=512, n=512, k=512, dtype="float16")
    assert "code=sm_90a" in hopper and "ptx_wgmma" in hopper
    assert "sm_80" in source("simple_mma", m=128, n=128, k=128, dtype="float16", arch="sm_80").split("\n", 2)[1]


def test_opencl_sources_and_refusals():
    text = source("simple_unit", m=33, n=17, k=9, backend="opencl", layouts=("col", "row"))
    assert "__kernel" in text and "CL1.2" in text
    with pytest.raises(SetupError, match="wgmma"):
        source("pipelined_wgmma", dtype="float16", backend="opencl")


def test_element_type_of():
    assert element_type_of("float16") == np.float16
    with pytest.raises(TypeError, match="unsupported dtype 'int16'"):
        element_type_of("int16")
