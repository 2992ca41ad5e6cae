"""tools/benchsuite/overhead.py (the parts that need no child process): the children's environment
(every compiler cache under one folder, cache-disabling switches removed, this checkout importable),
the problem config's checks, and the per-call clock (host-only time stops before the synchronize).
(The child processes themselves: tests/benchsuite/test_overhead.py.)"""
from __future__ import annotations

import os
import time

import pytest

from gemm_engine.tools.benchsuite import overhead


def test_child_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PYOPENCL_NO_CACHE", "1")
    monkeypatch.setenv("CUDA_CACHE_DISABLE", "1")
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = overhead._child_env(str(tmp_path))
    assert "PYOPENCL_NO_CACHE" not in env and "CUDA_CACHE_DISABLE" not in env
    for var in ("CUPY_CACHE_DIR", "CUDA_CACHE_PATH", "POCL_CACHE_DIR", "XDG_CACHE_HOME"):
        assert env[var].startswith(str(tmp_path))
    assert env["PYTHONPATH"].split(os.pathsep)[1:] == ["/elsewhere"]


def test_children_import_this_checkout(tmp_path):
    first = overhead._child_env(str(tmp_path))["PYTHONPATH"].split(os.pathsep)[0]
    assert os.path.isfile(os.path.join(first, "gemm_engine", "__init__.py"))
    assert os.path.samefile(os.path.join(first, "gemm_engine"), os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(overhead.__file__)))))


def test_config_needs_both_or_neither():
    cfg = overhead._config("opencl", 64, "float32", None)
    assert cfg["m"] == 64 and cfg["dtype"] == "float32" and cfg["problems"] == overhead.DEFAULT_PROBLEMS
    assert overhead._config("cuda", None, None, "simple_unit")["dtype"] is None
    with pytest.raises(ValueError, match="give both or neither"):
        overhead._config("opencl", 64, None, None)


def test_per_call_clock():
    log = []

    def fn():
        log.append("call")

    def sync():
        time.sleep(0.01)
        log.append("sync")
    total, host, runs = overhead._us_per_call(fn, sync, calls=5, repeats=3)
    assert log == ["call", "sync"] + (["call"] * 5 + ["sync"]) * 3      # one warm call, then whole runs
    assert len(runs) == 3 and total >= 0.01 / 5 * 1e6 * 0.9 and host < total
