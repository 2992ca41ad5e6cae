"""runtime/backends.py: which runtime a backend name (and $GEMM_ENGINE_BACKEND) means, and the
refusals naming the argument."""
from __future__ import annotations

import pytest

from gemm_engine.runtime import backends
from gemm_engine.runtime.backends import BACKEND_ENV, make_runtime


class _Made:
    def __init__(self, kind, *args):
        self.kind, self.args = kind, args


@pytest.fixture
def stand_ins(monkeypatch):
    """Runtimes recorded instead of made; CUDA 'available' as the test says."""
    state = {"cuda": False}
    monkeypatch.setattr(backends, "CudaRuntime", lambda device: _Made("cuda", device))
    monkeypatch.setattr(backends, "OpenCLRuntime", lambda device, context, queue: _Made("opencl", device, context, queue))
    monkeypatch.setattr(backends, "cuda_available", lambda: state["cuda"])
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    return state


def test_explicit_backends(stand_ins):
    assert make_runtime("cuda", 1).args == (1,)
    assert make_runtime("opencl", "pocl", None, None).kind == "opencl"


def test_auto_prefers_cuda_where_cupy_sees_a_gpu(stand_ins):
    assert make_runtime("auto", None).kind == "opencl"
    stand_ins["cuda"] = True
    assert make_runtime("auto", None).kind == "cuda"


def test_auto_reads_the_environment(stand_ins, monkeypatch):
    stand_ins["cuda"] = True
    monkeypatch.setenv(BACKEND_ENV, "opencl")
    assert make_runtime("auto", None).kind == "opencl"
    assert make_runtime("cuda", None).kind == "cuda"               # an explicit name wins
    monkeypatch.setenv(BACKEND_ENV, "metal")
    with pytest.raises(ValueError, match=r"\$GEMM_ENGINE_BACKEND: expected 'auto', 'cuda' or 'opencl', got 'metal'"):
        make_runtime("auto", None)


def test_opencl_objects_mean_opencl(stand_ins):
    stand_ins["cuda"] = True
    made = make_runtime("auto", None, context="ctx")
    assert made.kind == "opencl" and made.args == (None, "ctx", None)
    with pytest.raises(TypeError, match="context / queue: OpenCL objects"):
        make_runtime("cuda", None, queue="q")


def test_unknown_backend_is_refused_by_name(stand_ins):
    with pytest.raises(ValueError, match="backend: expected 'auto', 'cuda' or 'opencl', got 'vulkan'"):
        make_runtime("vulkan", None)


def test_the_real_opencl_runtime_here(opencl_engine):
    rt = make_runtime("opencl", None)
    assert rt.backend == "opencl" and rt.device.backend == "opencl"
