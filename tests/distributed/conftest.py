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
    import dist_pool
    dist_pool.require_gloo_engine()
    pool = dist_pool.Pool(2)
    try:
        yield pool
    finally:
        pool.close()
