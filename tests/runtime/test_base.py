"""What every runtime does: kernels compiled once, many in parallel (`compile_many`), a source that
threads ask for at once built once, and none while the current stream captures a CUDA graph (a clear
error saying to warm up first)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from gemm_engine.runtime import base


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


def test_a_source_asked_for_by_threads_at_once_is_built_once(opencl_engine, monkeypatch):
    # A background worker and a caller (or two warmup workers) asking for one source: the second waits
    # for the first's build instead of compiling again, and meets its error if it fails.
    rt = opencl_engine.runtime
    started, release, built = threading.Event(), threading.Event(), []
    real = rt._build

    def slow(source):
        built.append(source)
        started.set()
        release.wait(10)
        if "#error" in source:
            raise RuntimeError("the compiler says no")
        return real(source)

    monkeypatch.setattr(rt, "_build", slow)
    waiting = threading.Semaphore(0)

    class Counted(base.Future):     # the build a second caller waits on: counts who waits
        def result(self, timeout=None):
            waiting.release()
            return super().result(timeout)

    monkeypatch.setattr(base, "Future", Counted)
    for source in (_sources(7)[-1][0], "#error\n" + _sources(8)[-1][0]):
        started.clear(), release.clear()
        results = []

        def ask():
            try:
                results.append(rt.build(source))
            except RuntimeError as exc:
                results.append(exc)

        threads = [threading.Thread(target=ask) for _ in range(3)]
        threads[0].start()
        assert started.wait(10)
        for t in threads[1:]:
            t.start()
        assert waiting.acquire(timeout=10) and waiting.acquire(timeout=10)   # both wait on the first's build
        release.set()
        for t in threads:
            t.join(10)
        assert built.count(source) == 1 and len(results) == 3
        if "#error" in source:
            assert all(isinstance(r, RuntimeError) and "says no" in str(r) for r in results)
            assert not rt.built(source)
        else:
            assert all(r is results[0] for r in results) and rt.built(source)
    assert not rt._building


def test_a_build_interrupted_on_its_thread_fails_its_waiters_without_the_interrupt(opencl_engine, monkeypatch):
    # A KeyboardInterrupt on the building thread stays there: a waiter gets a RuntimeError saying the
    # build was interrupted, and the next caller builds afresh.
    rt = opencl_engine.runtime
    source = _sources(9)[-1][0]
    started, release, waiting = threading.Event(), threading.Event(), threading.Semaphore(0)

    class Counted(base.Future):
        def result(self, timeout=None):
            waiting.release()
            return super().result(timeout)
    monkeypatch.setattr(base, "Future", Counted)

    def interrupted(src):
        started.set()
        release.wait(10)
        raise KeyboardInterrupt
    monkeypatch.setattr(rt, "_build", interrupted)
    seen = {}

    def build():
        try:
            rt.build(source)
        except BaseException as exc:  # noqa: BLE001 -- what each thread met
            seen[threading.current_thread().name] = exc
    first = threading.Thread(target=build, name="builder")
    first.start()
    assert started.wait(10)
    second = threading.Thread(target=build, name="waiter")
    second.start()
    assert waiting.acquire(timeout=10)
    release.set()
    first.join(10), second.join(10)
    assert isinstance(seen["builder"], KeyboardInterrupt)
    assert isinstance(seen["waiter"], RuntimeError) and "interrupted" in str(seen["waiter"])
    assert not rt._building
    monkeypatch.undo()
    assert rt.build(source) is not None and rt.built(source)


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


def test_a_captured_kept_scratch_zeroes_only_what_kernels_expect_zero(opencl_engine, monkeypatch):
    # The split tail's partial slots are written before they are read: a captured call (each replay
    # runs its fill) zeroes the flag words only, not megabytes of partial tiles.
    rt = opencl_engine.runtime
    monkeypatch.setattr(rt, "capturing", lambda stream=None: True)
    filled = []
    real = rt.fill_zero
    monkeypatch.setattr(rt, "fill_zero", lambda x: filled.append(x.size) or real(x))
    poisoned = rt.to_device(np.full(1000, 7, np.int32))
    monkeypatch.setattr(rt, "scratch", lambda count, dtype: poisoned)
    got = rt.kept_scratch(1000, np.int32, zeroed=64)
    host = rt.to_host(got)
    assert filled == [64] and not host[:64].any() and (host[64:] == 7).all()
    filled.clear()
    rt.kept_scratch(1000, np.int32)
    assert filled == [1000]

