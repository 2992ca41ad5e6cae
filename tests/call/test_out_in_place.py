"""An ``out`` whose rows lie apart (a column slice, one half of interleaved rows, a batch with gaps)
is written in place by the kernels, through its own leading dimension and batch stride
(views.py `out_view`); one they cannot address (unaligned rows, rows not whole 16-byte
pieces, strided columns) still gets the result through a temporary. Either way only out's elements change."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.call import prepare
from helpers import assert_close, random

cla = pytest.importorskip("pyopencl.array")

CASES = {
    # name: (a's shape, b's shape, the poisoned base's shape, out's index into it, written in place)
    "column slice": ((9, 7), (7, 12), (9, 16), np.s_[:, :12], True),
    "interleaved rows": ((9, 7), (7, 16), (9, 2, 16), np.s_[:, 1, :], True),
    "batch with gaps": ((3, 5, 7), (7, 12), (4, 6, 16), np.s_[:3, :5, :12], True),
    "one row": ((1, 7), (7, 12), (3, 16), np.s_[1:2, :12], True),
    "unaligned rows": ((9, 7), (7, 12), (9, 13), np.s_[:, :12], False),
    "rows not whole 16-byte pieces": ((9, 7), (7, 10), (9, 16), np.s_[:, :10], False),
    "strided columns": ((9, 7), (7, 5), (9, 10), np.s_[:, ::2], False),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("epilogue", [{}, {"bias": "b", "activation": "relu"}])
def test_out_with_rows_apart(opencl_engine, rng, monkeypatch, case, epilogue):
    a_shape, b_shape, base_shape, index, in_place = CASES[case]
    q = opencl_engine.runtime.queue
    a, b = random(rng, a_shape, "float32"), random(rng, b_shape, "float32")
    kw = {}
    if epilogue:
        kw = dict(bias=cla.to_device(q, random(rng, (b_shape[-1],), "float32")), activation="relu")
    poison = np.full(base_shape, np.nan, np.float32)
    base = cla.to_device(q, poison)
    out = base[index]
    decisions = []
    real = prepare.writes_in_place
    monkeypatch.setattr(prepare, "writes_in_place", lambda *args: decisions.append(real(*args)) or decisions[-1])
    for _ in range(2):                    # the second call takes the fast path with the same out
        result = opencl_engine.matmul(cla.to_device(q, a), cla.to_device(q, b), out=out, **kw)
        assert result is out
        got = base.get()
        want = a @ b
        if epilogue:
            want = np.maximum(want + kw["bias"].get(), 0)
        np.testing.assert_allclose(got[index], want, rtol=1e-5, atol=1e-5)
        untouched = np.ones(base_shape, bool)
        untouched[index] = False
        assert np.isnan(got[untouched]).all(), "elements outside out were written"
    assert decisions and decisions[0] is in_place


def test_a_column_slice_at_an_offset(opencl_engine, rng):
    a, b = random(rng, (33, 20), "float32"), random(rng, (20, 40), "float32")
    base = cla.to_device(opencl_engine.runtime.queue, np.full((33, 48), np.nan, np.float32))
    view = base[:, 4:44]                 # offset 4 floats: rows 16-byte aligned
    opencl_engine.matmul(cla.to_device(opencl_engine.runtime.queue, a),
                         cla.to_device(opencl_engine.runtime.queue, b), out=view)
    got = base.get()
    assert_close(got[:, 4:44], a, b, "float32")
    assert np.isnan(got[:, :4]).all() and np.isnan(got[:, 44:]).all()


@pytest.mark.cuda
@pytest.mark.parametrize("m, n, k", [(256, 512, 256), (257, 136, 96)])
def test_torch_cuda_out_with_rows_apart_on_the_tensor_core_kernels(m, n, k):
    """bf16 on the wgmma kernels (TMA stores by the out's own strides), twice: the second call on
    the fast path with the same out; the interleaved half of a larger gradient as gated.py writes it."""
    from conftest import get_engine
    torch = pytest.importorskip("torch")
    engine = get_engine("cuda")
    gen = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16, generator=gen)
    want = a.double() @ b.double()
    for base_shape, index in (((m, 2, n), np.s_[:, 1, :]), ((m, n + 24), np.s_[:, 8:n + 8])):
        base = torch.full(base_shape, float("nan"), device="cuda", dtype=torch.bfloat16)
        out = base[index]
        for _ in range(2):
            assert engine.matmul(a, b, out=out) is out
            err = float((out.double() - want).norm() / want.norm())
            assert err < 1e-2, (base_shape, err)
            rest = torch.ones(base_shape, dtype=torch.bool, device="cuda")
            rest[index] = False
            assert base[rest].isnan().all(), "elements outside out were written"


@pytest.mark.parametrize("a_shape, b_shape, base_shape, index", [
    ((8,), (2, 3, 8, 4), (6, 3, 8), np.s_[:2, :, :4]),          # vector @ batch: (2, 3, 4), M dropped
    ((2, 3, 1, 8), (8,), (6, 3, 8), np.s_[:2, :, :1]),          # batch @ vector: (2, 3, 1), N dropped
])
def test_a_vector_operands_result_is_not_taken_for_rows(opencl_engine, rng, a_shape, b_shape, base_shape, index):
    """The result of a vector operand lacks an axis: never written in place (its last two axes are
    not M and N), so nothing outside out is written."""
    q = opencl_engine.runtime.queue
    a, b = random(rng, a_shape, "float32"), random(rng, b_shape, "float32")
    base = cla.to_device(q, np.full(base_shape, np.nan, np.float32))
    out = base[index]
    opencl_engine.matmul(cla.to_device(q, a), cla.to_device(q, b), out=out)
    got = base.get()
    np.testing.assert_allclose(got[index], np.matmul(a, b), rtol=1e-5, atol=1e-5)
    rest = np.ones(base_shape, bool)
    rest[index] = False
    assert np.isnan(got[rest]).all(), "elements outside out were written"
