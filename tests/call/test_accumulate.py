"""``out += a @ b`` as ``matmul(a, b, out=out, c=out, beta=1)``: the call's epilogue is marked
accumulating (call/prepare.py `_accumulating`: the TMA writer then adds the tile into ``out``
instead of reading c, global_/write/tma_store_writer.py) exactly where c is ``out`` itself, written
in place, with beta 1 and nothing after the sum; the fast path's key keeps a plan made so from a
call whose c lies elsewhere. On PoCL the kernels read c either way: these tests check the
decision and the results; tests/algorithms/test_accumulate_tma.py runs the adding stores."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import random

cla = pytest.importorskip("pyopencl.array")


def _accumulating(engine) -> bool:
    return engine.last_choice[1].batch.global_.epilogue.accumulate


def _arrays(engine, rng, m=20, n=24, k=16):
    q = engine.runtime.queue
    return [cla.to_device(q, random(rng, shape, "float32")) for shape in ((m, k), (k, n), (m, n), (m, n))]


def test_c_is_out_with_beta_1_accumulates(opencl_engine, rng):
    a, b, out, _ = _arrays(opencl_engine, rng)
    for call in range(3):                       # the general path, then the fast path twice
        before = out.get()
        assert opencl_engine.matmul(a, b, out=out, c=out, beta=1.0, bias=None) is out
        np.testing.assert_allclose(out.get(), before + a.get() @ b.get(), rtol=1e-5, atol=1e-5)
        assert _accumulating(opencl_engine), call


@pytest.mark.parametrize("kw", [dict(beta=2.0), dict(beta=1.0, activation="relu"), dict(beta=1.0, other_c=True)],
                         ids=["beta 2", "activation after the sum", "c elsewhere"])
def test_other_calls_read_c(opencl_engine, rng, kw):
    a, b, out, other = _arrays(opencl_engine, rng)
    c = other if kw.pop("other_c", False) else out
    for _ in range(2):
        c_host = c.get()
        opencl_engine.matmul(a, b, out=out, c=c, **kw)
        want = kw["beta"] * c_host + a.get() @ b.get()
        if kw.get("activation"):
            want = np.maximum(want, 0)
        np.testing.assert_allclose(out.get(), want, rtol=1e-5, atol=1e-5)
        assert not _accumulating(opencl_engine)


def test_a_plan_that_accumulates_is_not_reused_for_c_elsewhere(opencl_engine, rng):
    # Same shapes, strides and dtypes: only where c lies tells the two calls apart (the fast path's key).
    a, b, out, other = _arrays(opencl_engine, rng)
    opencl_engine.matmul(a, b, out=out, c=out, beta=1.0)
    assert _accumulating(opencl_engine)
    opencl_engine.matmul(a, b, out=out, c=other, beta=1.0)
    np.testing.assert_allclose(out.get(), other.get() + a.get() @ b.get(), rtol=1e-5, atol=1e-5)
    assert not _accumulating(opencl_engine)
    before = out.get()
    opencl_engine.matmul(a, b, out=out, c=out, beta=1.0)
    np.testing.assert_allclose(out.get(), before + a.get() @ b.get(), rtol=1e-5, atol=1e-5)
    assert _accumulating(opencl_engine)


def test_out_overlapping_an_operand_does_not_accumulate(opencl_engine, rng):
    # out is a's storage too: written through a temporary, so c (out) is read as it was.
    q = opencl_engine.runtime.queue
    a = cla.to_device(q, random(rng, (16, 16), "float32"))
    b = cla.to_device(q, random(rng, (16, 16), "float32"))
    before = a.get()
    opencl_engine.matmul(a, b, out=a, c=a, beta=1.0)
    np.testing.assert_allclose(a.get(), before + before @ b.get(), rtol=1e-5, atol=1e-5)
    assert not _accumulating(opencl_engine)
