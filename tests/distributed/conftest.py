"""Two gloo processes shared by the distributed tests (started once: importing torch and PoCL costs
seconds a process); the support modules here are importable by the workers."""
from __future__ import annotations

import os
import sys

import pytest

try:
    import torch  # noqa: F401
except ImportError:     # gemm_engine.distributed is built on torch.distributed: nothing here can import
    collect_ignore_glob = ["test_*.py"]

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.append(HERE)      # after tests/ (its conftest is the one `import conftest` means)


@pytest.fixture(scope="session")
def gloo_pair():
    pytest.importorskip("torch", reason="gemm_engine.distributed needs torch")
    import gemm_engine
    if "opencl" not in os.environ.get("GEMM_ENGINE_TEST_BACKENDS", "opencl"):
        pytest.skip("backend opencl excluded by GEMM_ENGINE_TEST_BACKENDS")
    try:
        gemm_engine.Engine("opencl")
    except (gemm_engine.BackendUnavailableError, ImportError) as exc:
        pytest.skip(f"the gloo workers run the engine's OpenCL backend on CPU tensors: unavailable here ({exc})")
    import dist_pool
    pool = dist_pool.Pool(2)
    try:
        yield pool
    finally:
        pool.close()
