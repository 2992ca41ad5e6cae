"""Backends for the tests. Set GEMM_ENGINE_TEST_BACKENDS=opencl,cuda (comma list) to restrict them.

A backend that cannot be used here is skipped with the reason (no silent pass): CUDA needs CuPy
and a GPU, OpenCL needs PyOpenCL and an OpenCL runtime (PoCL on the CPU in CI).
"""
from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import zlib

import numpy as np
import pytest

# tests/torch mirrors gemm_engine/torch, and tests/ is on sys.path (pyproject's pythonpath): where
# torch is not installed, `import torch` would find that folder as a namespace package and the
# torch tests would fail to collect instead of skipping. Mark torch absent there.
_torch = importlib.util.find_spec("torch")
if _torch is not None and _torch.origin in (None, "namespace"):
    sys.modules["torch"] = None   # `import torch` raises ImportError: pytest.importorskip skips

# Hermetic choices: default calls must not pick up a tuning cache the user's machine holds (the
# tests of the cache point GEMM_ENGINE_CACHE_DIR at their own folders).
os.environ["GEMM_ENGINE_CACHE_DIR"] = tempfile.mkdtemp(prefix="gemm_engine_test_cache_")
# Tests that check what a call ran look at its first call: no stand-in runs it (CUDA engines stand
# in for their first calls by default). tests/call/test_background_compile.py turns it on.
os.environ["GEMM_ENGINE_BACKGROUND_COMPILE"] = "0"

import gemm_engine  # noqa: E402

ALL_BACKENDS = ("opencl", "cuda")
_engines: dict = {}


def _wanted():
    env = os.environ.get("GEMM_ENGINE_TEST_BACKENDS")
    return tuple(b.strip() for b in env.split(",")) if env else ALL_BACKENDS


def get_engine(backend: str) -> gemm_engine.Engine:
    if backend not in _wanted():
        pytest.skip(f"backend {backend} excluded by GEMM_ENGINE_TEST_BACKENDS")
    if backend not in _engines:
        try:
            _engines[backend] = gemm_engine.Engine(backend)
        except (gemm_engine.BackendUnavailableError, ImportError) as exc:
            _engines[backend] = exc
    engine = _engines[backend]
    if isinstance(engine, Exception):
        pytest.skip(f"{backend} backend unavailable here: {engine}")
    return engine


@pytest.fixture(params=ALL_BACKENDS)
def engine(request) -> gemm_engine.Engine:
    return get_engine(request.param)


@pytest.fixture
def opencl_engine() -> gemm_engine.Engine:
    return get_engine("opencl")


@pytest.fixture
def rng(request) -> np.random.Generator:
    # A fresh stream per test (seeded from its name, so failures reproduce).
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite tests/golden/ from the current templates (then review the diff)")


# -- nvcc compile checks: queue every selected compile test's jobs up front (tests/cuda_compile.py) --
def _compiles(item) -> bool:
    return item.get_closest_marker("nvcc") is not None or hasattr(getattr(item, "function", None), "nvcc_jobs")


def pytest_collection_modifyitems(config, items):
    # The compile tests last: a background worker compiles their jobs on one core while the other
    # runs the rest (mostly PoCL builds, one core), so that they mostly find their results ready.
    items[:] = [i for i in items if not _compiles(i)] + [i for i in items if _compiles(i)]


def pytest_collection_finish(session):
    import inspect

    import cuda_compile
    if (cuda_compile.find_nvcc() is None or session.config.option.collectonly
            or os.environ.get("PYTEST_XDIST_WORKER")):
        return   # (an xdist worker runs only some of the tests: it compiles what they ask for)
    seen = set()
    for item in session.items:
        provider = getattr(getattr(item, "function", None), "nvcc_jobs", None)
        if provider is None:
            continue
        params = getattr(getattr(item, "callspec", None), "params", {})
        args = {k: v for k, v in params.items() if k in inspect.signature(provider).parameters}
        key = (provider, repr(sorted(args.items())))
        if key in seen:
            continue
        seen.add(key)
        try:
            jobs = provider(**args)
        except (Exception, pytest.skip.Exception):   # noqa: BLE001 -- the test reports it
            continue
        cuda_compile.prefetch(jobs)


def pytest_unconfigure(config):
    import sys
    if "cuda_compile" in sys.modules:
        sys.modules["cuda_compile"].shutdown()
