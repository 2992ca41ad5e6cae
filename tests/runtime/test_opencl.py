"""The OpenCL runtime against a caller's other queues, sub-buffers and misaligned arrays.

The races are forced: a deliberately slow kernel on a second queue writes an operand (recording no
event on the array), and the engine is called at once; or the caller reads ``out`` / overwrites an
input on its own queue right after the call. Each check fails when the runtime does not order the
queues on the device.
"""
from __future__ import annotations

import numpy as np
import pytest

import gemm_engine
from helpers import assert_close, random

# One work-item that spins for ``spins`` dependent steps (a count the compiler cannot know) and
# writes a value nothing reads: on PoCL it keeps its queue busy for a few tenths of a second at 5e7.
_SLOW_COPY = """
__kernel void spin(__global float* sink, const int spins) {
    float x = sink[0];
    for (int s = 0; s < spins; ++s) x = x * 0.999999f + 1e-7f;
    sink[1] = x;
}
"""
_COPY = """
__kernel void copy(__global float* dst, __global const float* src) { dst[get_global_id(0)] = src[get_global_id(0)]; }
"""


def _cl():
    cl = pytest.importorskip("pyopencl")
    import pyopencl.array as cla
    return cl, cla


@pytest.fixture
def other_queue(opencl_engine):
    cl, _ = _cl()
    rt = opencl_engine.runtime
    queue = cl.CommandQueue(rt.context)
    programs = cl.Program(rt.context, _SLOW_COPY + _COPY).build()
    return queue, programs


@pytest.mark.parametrize("repeat", [False, True], ids=["first call", "repeated call"])
def test_an_operand_a_slow_kernel_on_another_queue_writes_is_read_after_it(opencl_engine, other_queue, rng, repeat):
    cl, cla = _cl()
    queue, programs = other_queue
    a, b = random(rng, (64, 64), "float32"), random(rng, (64, 48), "float32")
    source = cla.to_device(queue, a)
    da = cla.zeros(queue, a.shape, np.float32)       # zeros until the slow kernel fills it
    db = cla.to_device(queue, b)
    if repeat:       # plans the call: the one below takes the fast path (call/fast.py)
        opencl_engine.matmul(da, db)
        assert opencl_engine.fast.call(da, db, None, None, (None, False, "default", -1, None, None, "same_kind"))[1]
    queue.finish()
    sink = cla.zeros(queue, (2,), np.float32)
    queue.finish()
    # No event is recorded on `da`: only its queue knows the write is pending, behind the spin.
    programs.spin(queue, (1,), None, sink.data, np.int32(50_000_000))
    programs.copy(queue, (a.size,), None, da.data, source.data)
    got = opencl_engine.matmul(da, db)
    assert_close(got.get(), a, b, "float32")


def test_out_on_another_queue_is_read_there_after_the_kernel(opencl_engine, other_queue, rng):
    cl, cla = _cl()
    queue, programs = other_queue
    a, b = random(rng, (384, 512), "float32"), random(rng, (512, 384), "float32")
    da, db = cla.to_device(queue, a), cla.to_device(queue, b)
    out = cla.zeros(queue, (384, 384), np.float32)
    seen = cla.zeros(queue, (384, 384), np.float32)
    queue.finish()
    opencl_engine.matmul(da, db, out=out)
    # The caller's own kernel on its queue, with no wait: it must see the product.
    programs.copy(queue, (out.size,), None, seen.data, out.data)
    assert_close(seen.get(), a, b, "float32")


def test_an_input_overwritten_on_its_queue_after_the_call_is_read_first(opencl_engine, other_queue, rng):
    cl, cla = _cl()
    queue, programs = other_queue
    a, b = random(rng, (384, 512), "float32"), random(rng, (512, 384), "float32")
    da, db = cla.to_device(queue, a), cla.to_device(queue, b)
    queue.finish()
    got = opencl_engine.matmul(da, db)
    zeros = cla.zeros(queue, a.shape, np.float32)
    programs.copy(queue, (a.size,), None, da.data, zeros.data)    # the caller reuses a's memory
    assert_close(got.get(), a, b, "float32")


@pytest.mark.parametrize("which", ["a", "b"])
def test_out_on_a_sub_buffer_of_an_input_is_written_through_a_temporary(opencl_engine, rng, which):
    cl, cla = _cl()
    rt = opencl_engine.runtime
    a, b = random(rng, (32, 32), "float32"), random(rng, (32, 32), "float32")
    da, db = rt.to_device(a), rt.to_device(b)
    target = da if which == "a" else db
    region = target.base_data.get_sub_region(0, target.nbytes)
    out = cla.Array(rt.queue, (32, 32), np.float32, data=region)
    assert rt.may_overlap(out, target)
    opencl_engine.matmul(da, db, out=out)
    assert_close(out.get(), a, b, "float32")


def test_a_misaligned_operand_is_named(opencl_engine):
    cl, cla = _cl()
    rt = opencl_engine.runtime
    raw = cla.zeros(rt.queue, (65,), np.uint8)
    odd = cla.Array(rt.queue, (4, 4), np.float32, data=raw.base_data, offset=1)
    with pytest.raises(ValueError, match="b starts 1 bytes into its buffer"):
        opencl_engine.matmul(np.ones((4, 4), np.float32), odd)


def test_pyopencl_ctx_that_matches_nothing_is_named(monkeypatch):
    cl, _ = _cl()
    monkeypatch.setenv("PYOPENCL_CTX", "7")
    monkeypatch.delenv("GEMM_ENGINE_OPENCL_DEVICE", raising=False)
    with pytest.raises(ValueError, match=r"\$PYOPENCL_CTX='7'.*devices: 0: "):
        gemm_engine.Engine("opencl")


def test_a_cache_home_that_is_a_file_still_gives_a_device(tmp_path):
    # PoCL lists no device when $XDG_CACHE_HOME cannot hold its kernel cache: the engine gives the
    # process a folder of its own, says so, and runs.
    import subprocess
    import sys
    _cl()
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    env = {k: v for k, v in __import__("os").environ.items() if k != "POCL_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(not_a_folder)
    code = ("import numpy as np, gemm_engine; e = gemm_engine.Engine('opencl'); "
            "print(e.matmul(np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)).tolist())")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[[3.0, 3.0], [3.0, 3.0]]"
    assert "is not a usable folder" in done.stderr
