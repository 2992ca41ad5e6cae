"""What every runtime does: kernels compiled once, many in parallel (`compile_many`), and none while
the current stream captures a CUDA graph (a clear error saying to warm up first)."""
from __future__ import annotations

import threading

import numpy as np
import pytest


def _sources(n):
    return [(f"__kernel void k{i}(__global float* x) {{ x[get_global_id(0)] += {i}.0f; }}", f"k{i}") for i in range(n)]


def test_compile_many_compiles_each_distinct_kernel_once_in_threads(opencl_engine, monkeypatch):
    rt = opencl_engine.runtime
    seen, real = [], rt._compile
    monkeypatch.setattr(rt, "_compile", lambda s, n: seen.append((n, threading.current_thread().name)) or real(s, n))
    jobs = _sources(4)
    assert rt.compile_many(jobs + jobs[:2], workers=2) == 4
    assert sorted(n for n, _ in seen) == ["k0", "k1", "k2", "k3"]
    assert all(t.startswith("gemm_engine_compile") for _, t in seen)
    assert rt.compile_many(jobs) == 0 and all(rt.compiled(s, n) for s, n in jobs)


def test_nothing_compiles_while_a_graph_is_captured(opencl_engine, monkeypatch):
    rt = opencl_engine.runtime
    monkeypatch.setattr(rt, "capturing", lambda stream=None: True)
    with pytest.raises(RuntimeError, match="capturing a CUDA graph.*Warm up first"):
        rt.kernel(*_sources(5)[-1])
    with pytest.raises(RuntimeError, match="gemm_engine.warmup"):
        opencl_engine.matmul(np.ones((3, 77), np.float32), np.ones((77, 5), np.float32), activation="sigmoid",
                             alpha=3.0)
    monkeypatch.setattr(rt, "capturing", lambda stream=None: False)
    rt.kernel(*_sources(5)[-1])


def test_a_graph_being_captured_gets_fresh_kept_scratch_of_its_own(opencl_engine, monkeypatch):
    # A graph's replays may run beside later work of the stream that captured it: its split tail's
    # flags must not be the stream's kept ones (and they start zeroed, by a fill the graph holds).
    rt = opencl_engine.runtime
    kept = rt.kept_scratch(64, np.int32)
    monkeypatch.setattr(rt, "capturing", lambda stream=None: True)
    made = []
    monkeypatch.setattr(rt, "scratch", lambda count, dtype: made.append(count) or rt.empty((count,), dtype))
    first, second = rt.kept_scratch(64, np.int32), rt.kept_scratch(64, np.int32)
    assert made == [64, 64] and first is not kept and second is not first
    assert not rt.to_host(first).any() and not rt.to_host(second).any()
    monkeypatch.setattr(rt, "capturing", lambda stream=None: False)
    assert rt.kept_scratch(64, np.int32) is kept
