"""runtime/cuda.py without a GPU, against a stand-in CuPy module: the device facts read from the
driver's properties, the device argument's checks, availability, CuPy's cache folder and the
toolkit include folder. (Kernels on a real GPU: the CUDA numerics tests, skipped here.)"""
from __future__ import annotations

import os
import sys
import types

import pytest

from gemm_engine.errors import BackendUnavailableError
from gemm_engine.runtime import nvrtc as nvrtc_runtime
from gemm_engine.runtime.cuda import CudaRuntime, cuda_available
from gemm_engine.runtime.nvrtc import cuda_include_dir, cupy_cache_dir

H100 = {"name": b"NVIDIA H100 80GB HBM3", "multiProcessorCount": 132, "sharedMemPerBlock": 49152,
        "sharedMemPerBlockOptin": 232448, "maxThreadsPerBlock": 1024, "warpSize": 32, "major": 9, "minor": 0}


def _fake_cupy(props=(H100,), count_error=None, driver=True):
    cp = types.ModuleType("cupy")
    runtime = types.SimpleNamespace(
        getDeviceCount=(lambda: (_ for _ in ()).throw(count_error)) if count_error else (lambda: len(props)),
        getDeviceProperties=lambda i: dict(props[i]))
    drv = types.SimpleNamespace(launchKernel=lambda *a: None, launchCooperativeKernel=lambda *a: None) if driver \
        else types.SimpleNamespace()
    cp.cuda = types.SimpleNamespace(runtime=runtime, Device=lambda i: ("device", i), driver=drv,
                                    get_cuda_path=lambda: "/nonexistent/cuda")
    cp.ndarray = type("ndarray", (), {})
    return cp


@pytest.fixture
def fake_cupy(monkeypatch):
    def install(**kw):
        cp = _fake_cupy(**kw)
        monkeypatch.setitem(sys.modules, "cupy", cp)
        return cp
    return install


def test_device_facts_come_from_the_properties(fake_cupy):
    fake_cupy()
    rt = CudaRuntime()
    d = rt.device
    assert d.backend == "cuda" and d.name == "NVIDIA H100 80GB HBM3" and d.compute_units == 132
    assert d.max_shared_memory == 232448                    # the opt-in limit, not the default 48 KiB
    assert d.compute_capability == (9, 0) and d.arch == "sm_90" and d.plane_size == 32
    assert rt.cuda_device == ("device", 0) and rt.co_resident_launch
    assert rt.dialect.backend == "cuda"


def test_without_the_opt_in_property_the_default_limit(fake_cupy):
    props = {k: v for k, v in H100.items() if k != "sharedMemPerBlockOptin"}
    fake_cupy(props=(props,), driver=False)
    rt = CudaRuntime()
    assert rt.device.max_shared_memory == 49152
    assert rt.driver_launch is None and not rt.co_resident_launch


def test_device_index_checks(fake_cupy):
    fake_cupy(props=(H100, dict(H100, name="second")))
    assert CudaRuntime(1).cuda_device == ("device", 1) and CudaRuntime(1).device.name == "second"
    with pytest.raises(ValueError, match=r"index 2 out of range; devices: 0: NVIDIA H100 80GB HBM3; 1: second"):
        CudaRuntime(2)
    for bad in (True, "0", 1.0):
        with pytest.raises(TypeError, match="device: expected a CUDA device index"):
            CudaRuntime(bad)


def test_no_device_is_backend_unavailable(fake_cupy):
    fake_cupy(count_error=RuntimeError("no CUDA-capable device"))
    with pytest.raises(BackendUnavailableError, match="CuPy sees no CUDA device: no CUDA-capable device"):
        CudaRuntime()
    assert not cuda_available()


def test_without_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)          # import cupy raises ImportError
    assert not cuda_available()
    with pytest.raises(BackendUnavailableError, match="needs CuPy"):
        CudaRuntime()


def test_cuda_available_counts_devices(fake_cupy):
    fake_cupy(props=())
    assert not cuda_available()
    fake_cupy()
    assert cuda_available()


def test_cupy_cache_dir_asks_cupy_first_then_the_documented_rule(monkeypatch):
    cp = types.SimpleNamespace(cuda=types.SimpleNamespace(compiler=types.SimpleNamespace(get_cache_dir=lambda: "/c")))
    assert cupy_cache_dir(cp) == "/c"
    bare = types.SimpleNamespace(cuda=types.SimpleNamespace())
    monkeypatch.setenv("CUPY_CACHE_DIR", "/from/env")
    assert cupy_cache_dir(bare) == "/from/env"
    monkeypatch.delenv("CUPY_CACHE_DIR")
    assert cupy_cache_dir(bare) == os.path.expanduser("~/.cupy/kernel_cache")


def test_include_dir_is_the_toolkit_with_crt_headers(monkeypatch, tmp_path):
    toolkit = tmp_path / "cuda"
    (toolkit / "include" / "crt").mkdir(parents=True)
    (toolkit / "include" / "crt" / "mma.h").write_text("")
    monkeypatch.setenv("CUDA_PATH", str(toolkit))
    real_exists = os.path.exists
    monkeypatch.setattr(nvrtc_runtime.os.path, "exists",
                        lambda p: False if str(p).startswith("/usr/local/cuda") else real_exists(p))
    cp = types.SimpleNamespace(cuda=types.SimpleNamespace(get_cuda_path=lambda: "/wheel/cuda"))
    assert cuda_include_dir(cp) == str(toolkit / "include")
    monkeypatch.delenv("CUDA_PATH")
    assert cuda_include_dir(cp) == "/wheel/cuda/include"     # nothing better: CuPy's own
