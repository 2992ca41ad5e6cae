"""Backends for the tests. Set GEMM_ENGINE_TEST_BACKENDS=opencl,cuda (comma list) to restrict them.

A backend that cannot be used here is skipped with the reason (no silent pass): CUDA needs CuPy
and a GPU, OpenCL needs PyOpenCL and an OpenCL runtime (PoCL on the CPU in CI).
"""
from __future__ import annotations

import os
import zlib

import numpy as np
import pytest

import gemm_engine

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
