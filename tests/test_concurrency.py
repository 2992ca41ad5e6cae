"""Threads, queues and caches: calls from fresh threads on every kind of algorithm, one default
engine however many threads ask first, OpenCL arrays on other queues and contexts, bounded caches,
and devices named wrongly."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import gemm_engine
from helpers import assert_close, random

#: (batch, m, n, k): a tiled product, a split-K one, a vector-matrix one, a batched one.
KINDS = {"tiled": (1, 70, 50, 40), "split_k": (1, 32, 32, 8192), "skinny": (1, 1, 300, 200),
         "batched": (4, 33, 17, 29)}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_calls_from_fresh_threads(engine, rng, kind):
    batch, m, n, k = KINDS[kind]
    lead = (batch,) if batch > 1 else ()
    a, b = random(rng, lead + (m, k), "float32"), random(rng, (k, n), "float32")
    rt = engine.runtime
    da, db = rt.to_device(a), rt.to_device(b)      # made in this thread; used in fresh ones
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: rt.to_host(engine.matmul(da, db)), range(4)))
    for got in results:
        assert_close(got, a, b, "float32")
    name = engine.last_choice[0].name
    if kind in ("split_k", "skinny"):
        assert kind.split("_")[0] in name, name    # the kind of kernel meant (two launches, a workspace)


def test_one_default_engine_however_many_threads_ask(monkeypatch):
    import gemm_engine.api as api_module
    built = []
    real = api_module.Engine

    class Counting(real):
        def __init__(self, *args, **kwargs):
            built.append(self)
            threading.Event().wait(0.05)     # a slow start: the others arrive meanwhile
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(api_module, "Engine", Counting)
    monkeypatch.setattr(api_module, "_default_engine", None)
    barrier = threading.Barrier(8)

    def first():
        barrier.wait()
        return gemm_engine.default_engine()

    with ThreadPoolExecutor(8) as pool:
        engines = list(pool.map(lambda _: first(), range(8)))
    assert len(built) == 1 and all(e is engines[0] for e in engines)


def test_caches_are_bounded(opencl_engine, rng, monkeypatch):
    import gemm_engine.call.launch as launch_module
    import gemm_engine.engine as engine_module
    engine = gemm_engine.Engine("opencl")
    engine.planner.capacity = 5
    monkeypatch.setattr(launch_module, "CALL_PLANS_MAX", 5)
    monkeypatch.setattr(engine_module, "CHOSEN_MAX", 5)
    rt = engine.runtime
    for n in range(10, 40):
        a, b = rt.to_device(random(rng, (9, 7), "float32")), rt.to_device(random(rng, (7, n), "float32"))
        engine.matmul(a, b)
    assert len(engine.planner) <= 5
    assert len(engine._calls) <= 5 and len(engine._chosen) <= 5
    from gemm_engine.runtime.base import KERNELS_MAX
    assert len(rt._kernels) <= KERNELS_MAX


# -- OpenCL: queues and contexts ------------------------------------------------------------------------
def _cl():
    cl = pytest.importorskip("pyopencl")
    import pyopencl.array as cla
    return cl, cla


def test_arrays_pending_on_another_queue_are_read_after_that_work(opencl_engine, rng):
    cl, cla = _cl()
    rt = opencl_engine.runtime
    other = cl.CommandQueue(rt.context)
    a, b = random(rng, (64, 300), "float32"), random(rng, (300, 50), "float32")
    for _ in range(3):
        da = cla.to_device(other, np.zeros_like(a))
        da += cla.to_device(other, a)           # pending on the other queue when the engine reads it
        out = cla.empty(other, (64, 50), np.float32)
        assert opencl_engine.matmul(da, cla.to_device(other, b), out=out) is out
        assert_close(out.get(), a, b, "float32")  # read on the other queue: after the kernel


def test_arrays_of_another_context_are_refused_and_engines_take_a_queue(opencl_engine, rng):
    cl, cla = _cl()
    rt = opencl_engine.runtime
    foreign = cl.CommandQueue(cl.Context([rt.cl_device]))
    a = cla.to_device(foreign, np.ones((3, 3), np.float32))
    with pytest.raises(TypeError, match="a is a pyopencl array of another context"):
        opencl_engine.matmul(a, a)
    mine = gemm_engine.Engine(queue=foreign)
    assert mine.runtime.queue is foreign and mine.backend == "opencl"
    np.testing.assert_allclose(mine.matmul(a, a).get(), np.full((3, 3), 3.0))


def test_devices_named_wrongly_say_which_exist(opencl_engine, monkeypatch):
    with pytest.raises(ValueError, match="index 77 out of range; devices: 0: "):
        gemm_engine.Engine("opencl", device=77)
    with pytest.raises(TypeError, match="device: expected an OpenCL device index"):
        gemm_engine.Engine("opencl", device=3.5)
    word = opencl_engine.runtime.cl_device.platform.name.split()[0]     # "Portable", "NVIDIA"...
    monkeypatch.setenv("GEMM_ENGINE_OPENCL_DEVICE", f"{word}:5")
    with pytest.raises(ValueError, match=f"GEMM_ENGINE_OPENCL_DEVICE: '{word}:5' asks for match '5'"):
        gemm_engine.Engine("opencl")
    monkeypatch.setenv("GEMM_ENGINE_OPENCL_DEVICE", "no such device")
    with pytest.raises(ValueError, match="no OpenCL device matches 'no such device'; devices: 0: "):
        gemm_engine.Engine("opencl")
