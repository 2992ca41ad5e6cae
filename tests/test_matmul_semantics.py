"""numpy.matmul semantics of `Engine.matmul`: shapes, broadcasting, dtypes, out=, strides, errors."""
from __future__ import annotations

import numpy as np
import pytest

import gemm_engine
from helpers import assert_close, random


@pytest.mark.parametrize("a_shape,b_shape", [
    ((5,), (5,)),            # vector . vector -> scalar (0-d)
    ((5,), (5, 3)),          # vector @ matrix -> (3,)
    ((4, 5), (5,)),          # matrix @ vector -> (4,)
    ((2, 4, 5), (5,)),       # batch @ vector -> (2, 4)
    ((5,), (2, 5, 3)),       # vector @ batch -> (2, 3)
    ((2, 1, 4, 5), (3, 5, 6)),   # broadcast batch dims -> (2, 3, 4, 6): not one stride: copied
    ((3, 4, 5), (5, 6)),     # (B, M, K) @ (K, N): rhs read with batch stride 0
    ((1, 4, 5), (3, 5, 6)),  # size-1 batch broadcast
])
def test_shapes_like_numpy(engine, rng, a_shape, b_shape):
    a, b = random(rng, a_shape, "float32"), random(rng, b_shape, "float32")
    result = engine.matmul(a, b)
    expect = np.matmul(a, b)
    assert np.shape(result) == expect.shape
    assert type(result) is type(expect)      # vector . vector: a numpy scalar, as numpy gives
    assert_close(result, a, b, "float32")


def test_result_dtype_follows_numpy_promotion(engine, rng):
    a, b = random(rng, (6, 7), "float32"), random(rng, (7, 5), "float64")
    result = engine.matmul(a, b)
    assert result.dtype == np.float64
    assert_close(result, a, b, "float32")  # float32 operand precision bounds the error
    assert engine.matmul(random(rng, (3, 4), "float16"), random(rng, (4, 2), "float32")).dtype == np.float32


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.complex64, np.bool_, np.uint8])
def test_unsupported_dtype_raises_type_error(engine, dtype):
    a = np.ones((3, 3), dtype=dtype)
    with pytest.raises(TypeError, match=np.dtype(dtype).name) as info:
        engine.matmul(a, np.ones((3, 3), np.float32))
    assert all(name in str(info.value) for name in ("float32", "float16", "int8"))


def test_zero_dim_operand_raises(engine):
    with pytest.raises(ValueError, match="does not have enough dimensions"):
        engine.matmul(np.float32(2.0), np.ones((2, 2), np.float32))


def test_core_dimension_mismatch_raises(engine):
    with pytest.raises(ValueError, match="mismatch in its core dimension"):
        engine.matmul(np.ones((2, 3), np.float32), np.ones((4, 2), np.float32))


def test_batch_mismatch_raises(engine):
    with pytest.raises(ValueError, match="could not be broadcast"):
        engine.matmul(np.ones((2, 2, 3), np.float32), np.ones((3, 3, 2), np.float32))


@pytest.mark.parametrize("shape", [(0, 3, 4), (2, 0, 4), (2, 3, 0)])
def test_zero_size_dimensions(engine, shape):
    m, k, n = shape
    a, b = np.ones((m, k), np.float32), np.ones((k, n), np.float32)
    result = engine.matmul(a, b)
    assert result.shape == (m, n)
    if k == 0:
        np.testing.assert_array_equal(result, np.zeros((m, n), np.float32))


def test_k_zero_fills_out_with_zeros(engine):
    out = np.full((3, 4), np.nan, np.float32)
    result = engine.matmul(np.ones((3, 0), np.float32), np.ones((0, 4), np.float32), out=out)
    assert result is out
    np.testing.assert_array_equal(out, 0)


def test_empty_batch(engine):
    assert engine.matmul(np.ones((0, 3, 4), np.float32), np.ones((4, 5), np.float32)).shape == (0, 3, 5)


def test_out_numpy_is_written_and_returned(engine, rng):
    a, b = random(rng, (9, 7), "float32"), random(rng, (7, 5), "float32")
    out = np.full((9, 5), np.nan, np.float32)
    assert engine.matmul(a, b, out=out) is out
    assert_close(out, a, b, "float32")


def test_out_same_kind_cast(engine, rng):
    a, b = random(rng, (9, 7), "float32"), random(rng, (7, 5), "float32")
    out = np.full((9, 5), np.nan, np.float64)
    engine.matmul(a, b, out=out)
    assert_close(out, a, b, "float32")


def test_out_strided_view(engine, rng):
    a, b = random(rng, (9, 7), "float32"), random(rng, (7, 5), "float32")
    big = np.full((9, 10), np.nan, np.float32)
    engine.matmul(a, b, out=big[:, ::2])
    assert_close(big[:, ::2], a, b, "float32")
    assert np.isnan(big[:, 1::2]).all(), "elements outside out were written"


@pytest.mark.parametrize("out,error", [
    (np.empty((9, 4), np.float32), ValueError),     # wrong shape
    (np.empty((9, 5), np.int32), TypeError),        # float -> int is not same_kind
    (np.empty((5, 9), np.float32), ValueError),
])
def test_out_checked_before_launch(engine, rng, out, error):
    a, b = random(rng, (9, 7), "float32"), random(rng, (7, 5), "float32")
    out[...] = 7
    with pytest.raises(error, match="out"):
        engine.matmul(a, b, out=out)
    assert (out == 7).all(), "out was modified by a rejected call"


@pytest.mark.parametrize("k", [7, 0])
def test_read_only_out_rejected_before_launch(engine, rng, k):
    # Checked with the other out checks, not found (or not) when the result is copied in.
    a, b = random(rng, (9, k), "float32"), random(rng, (k, 5), "float32")
    out = np.full((9, 5), 7, np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="matmul: out is read-only"):
        engine.matmul(a, b, out=out)
    assert (out == 7).all()


def test_out_device_array_for_numpy_inputs_rejected(engine, rng):
    a = random(rng, (3, 3), "float32")
    with pytest.raises(TypeError, match="out is a device array .* operands are host arrays"):
        engine.matmul(a, a, out=engine.runtime.to_device(a))


def test_non_contiguous_transposed_negative_strides(engine, rng):
    base_a = random(rng, (40, 30), "float32")
    base_b = random(rng, (30, 50), "float32")
    cases = [
        (base_a[::2, ::3], base_b[::3, 1::2]),          # steps on both axes: fits no layout, copied
        (base_a.T[:20], base_b.T[:40]),                  # transposed views
        (base_a[::-1], base_b[:, ::-1]),                 # negative strides on rows / columns
        (base_a[::-2, ::-1], base_b[::-1, ::-3]),
    ]
    for a, b in cases:
        a_before, b_before = a.copy(), b.copy()
        result = engine.matmul(a, b)
        assert_close(result, a, b, "float32")
        np.testing.assert_array_equal(a, a_before)
        np.testing.assert_array_equal(b, b_before)


def test_device_views_without_copies(engine, rng):
    """Transposed and negatively strided device views give correct results and stay unmodified."""
    rt = engine.runtime
    ha, hb = random(rng, (3, 33, 20), "float32"), random(rng, (20, 17), "float32")
    da, db = rt.to_device(ha), rt.to_device(np.ascontiguousarray(hb.T))
    result = rt.to_host(engine.matmul(da, db.T))     # rhs: a column-major view, batch stride 0
    assert_close(result, ha, hb, "float32")
    np.testing.assert_array_equal(rt.to_host(da), ha)


def test_out_aliasing_an_input(engine, rng):
    """`out` overlapping an operand must still give numpy's result (computed into a temporary)."""
    rt = engine.runtime
    ha, hb = random(rng, (16, 16), "float32"), random(rng, (16, 16), "float32")
    da, db = rt.to_device(ha), rt.to_device(hb)
    engine.matmul(da, db, out=da)
    assert_close(rt.to_host(da), ha, hb, "float32")


def test_unknown_algorithm_and_backend_errors(engine):
    a = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match="unknown name 'nope'"):
        engine.matmul(a, a, algorithm="nope")
    with pytest.raises(TypeError, match="algorithm"):
        engine.matmul(a, a, algorithm=3)
    with pytest.raises(ValueError, match="backend"):
        gemm_engine.Engine("vulkan")


def test_algorithm_by_class_and_instance(engine, rng):
    from gemm_engine.algorithms import SimpleAlgorithm, UnitSelection
    a, b = random(rng, (20, 30), "float32"), random(rng, (30, 10), "float32")
    assert_close(engine.matmul(a, b, algorithm=SimpleAlgorithm), a, b, "float32")
    sel = UnitSelection(tile_m=2, tile_n=4, stage_m=32, stage_n=32, stage_k=8)
    assert_close(engine.matmul(a, b, algorithm=SimpleAlgorithm(sel)), a, b, "float32")
    assert engine.last_choice[1].batch.global_.stage.tile.tile_m == 2


def test_setup_error_reason(engine):
    from gemm_engine.algorithms import SimpleAlgorithm, UnitSelection
    bad = SimpleAlgorithm(UnitSelection(tile_m=3, tile_n=4, stage_m=32, stage_n=32, stage_k=8))
    a = np.ones((4, 4), np.float32)
    with pytest.raises(gemm_engine.SetupError, match="does not divide"):
        engine.matmul(a, a, algorithm=bad)


def test_module_level_matmul_uses_default_engine(rng):
    a, b = random(rng, (5, 6), "float32"), random(rng, (6, 7), "float32")
    try:
        result = gemm_engine.matmul(a, b)
    except gemm_engine.BackendUnavailableError as exc:
        pytest.skip(f"no backend available: {exc}")
    assert_close(result, a, b, "float32")


def test_repeated_device_calls_use_fresh_data(engine, rng):
    """The per-call fast path (same shapes, strides, dtypes) must read the new operands each time,
    notice a changed alignment, and still refuse to write into an overlapping out directly."""
    rt = engine.runtime
    for _ in range(3):
        ha, hb = random(rng, (33, 20), "float32"), random(rng, (20, 17), "float32")
        assert_close(rt.to_host(engine.matmul(rt.to_device(ha), rt.to_device(hb))), ha, hb, "float32")
    big = random(rng, (34, 20), "float32")
    dbig = rt.to_device(big)
    for offset in (0, 1):   # same shape and strides, first element moved by one (alignment differs)
        ha = big[offset:offset + 33]
        hb = random(rng, (20, 17), "float32")
        assert_close(rt.to_host(engine.matmul(dbig[offset:offset + 33], rt.to_device(hb))), ha, hb, "float32")
    sq_a, sq_b = random(rng, (16, 16), "float32"), random(rng, (16, 16), "float32")
    da, db, dout = rt.to_device(sq_a), rt.to_device(sq_b), rt.to_device(np.zeros((16, 16), np.float32))
    engine.matmul(da, db, out=dout)                      # caches the direct-out plan
    engine.matmul(da, db, out=da)                        # same metadata, but out aliases a
    assert_close(rt.to_host(da), sq_a, sq_b, "float32")
