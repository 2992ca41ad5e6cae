"""GPTQ and AWQ checkpoints: tensors packed here by their documented bit orders (written out
element by element, independently of the package's vectorized unpacking) come back as the weights
they stand for."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.quant import AWQ_ORDER, from_awq, from_gptq


def gptq_tensors(codes, zeros, scales, bits, zero_offset=1):
    """AutoGPTQ's QuantLinear.pack: qweight (K * bits / 32, N) packed along K, row r * (32 / bits)
    + j in bits [bits * j, ...); qzeros (groups, N * bits / 32) packed along N the same way,
    stored minus ``zero_offset``."""
    per = 32 // bits
    k, n = codes.shape
    qweight = np.zeros((k // per, n), np.uint32)
    for row in range(k):
        for col in range(n):
            qweight[row // per, col] |= np.uint32(int(codes[row, col]) << (bits * (row % per)))
    stored = (zeros - zero_offset).astype(np.int64) & ((1 << bits) - 1)
    qzeros = np.zeros((zeros.shape[0], n // per), np.uint32)
    for g in range(zeros.shape[0]):
        for col in range(n):
            qzeros[g, col // per] |= np.uint32(int(stored[g, col]) << (bits * (col % per)))
    return qweight.view(np.int32), qzeros.view(np.int32), scales.astype(np.float16)


def awq_tensors(codes, zeros, scales):
    """AutoAWQ's WQLinear_GEMM.from_linear: qweight (K, N / 8), nibble i of word c holding column
    8c + AWQ_ORDER[i]; qzeros (groups, N / 8) the same; scales (groups, N)."""
    def pack(x):
        out = np.zeros((x.shape[0], x.shape[1] // 8), np.uint32)
        for c in range(x.shape[1] // 8):
            for i, column in enumerate(AWQ_ORDER):
                out[:, c] |= x[:, 8 * c + column].astype(np.uint32) << np.uint32(4 * i)
        return out.view(np.int32)
    return pack(codes), pack(zeros), scales.astype(np.float16)


def expected(codes, zeros, scales, group):
    rows = np.arange(codes.shape[0]) // group
    scale = scales.astype(np.float16).astype(np.float64)[rows]
    return ((codes.astype(np.float64) - zeros[rows]) * scale).astype(np.float32)


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("group", [32, 128])
def test_gptq(rng, bits, group):
    k, n = 256, 16
    top = (1 << bits) - 1
    codes = rng.integers(0, top + 1, (k, n))
    zeros = rng.integers(1, top + 1, (k // group, n)).astype(np.float64)
    scales = rng.uniform(0.01, 0.1, (k // group, n))
    q = from_gptq(*gptq_tensors(codes, zeros, scales, bits), bits=bits, group_size=group)
    assert q.format.kind == ("int4" if bits == 4 else "int8") and q.format.zeros and q.shape == (k, n)
    np.testing.assert_array_equal(q.dequantize(), expected(codes, zeros, scales, group))


def test_gptq_v2_zeros_and_symmetric_checkpoints(rng):
    k, n = 64, 8
    codes = rng.integers(0, 16, (k, n))
    scales = rng.uniform(0.01, 0.1, (2, n))
    zeros = np.full((2, n), 8.0)
    q = from_gptq(*gptq_tensors(codes, zeros, scales, 4), group_size=32)
    assert not q.format.zeros and q.zeros is None      # all zero points 8: the symmetric format
    np.testing.assert_array_equal(q.dequantize(), expected(codes, zeros, scales, 32))
    v2 = from_gptq(*gptq_tensors(codes, zeros - 1, scales, 4, zero_offset=0), group_size=32, zero_offset=0)
    np.testing.assert_array_equal(v2.dequantize(), expected(codes, zeros - 1, scales, 32))


def test_gptq_act_order_and_mismatched_shapes_are_refused(rng):
    codes = rng.integers(0, 16, (64, 8))
    tensors = gptq_tensors(codes, np.full((2, 8), 3.0), np.ones((2, 8)), 4)
    g_idx = np.arange(64) // 32
    assert from_gptq(*tensors, group_size=32, g_idx=g_idx).shape == (64, 8)
    with pytest.raises(ValueError, match="act-order"):
        from_gptq(*tensors, group_size=32, g_idx=g_idx[::-1])
    with pytest.raises(ValueError, match="groups"):
        from_gptq(*tensors, group_size=16)
    with pytest.raises(ValueError, match="disagree"):
        from_gptq(tensors[0], tensors[1][:, :0], tensors[2], group_size=32)
    with pytest.raises(ValueError, match="bits"):
        from_gptq(*tensors, bits=3)


def test_awq(rng):
    k, n, group = 128, 24, 64
    codes = rng.integers(0, 16, (k, n))
    zeros = rng.integers(0, 16, (k // group, n)).astype(np.float64)
    scales = rng.uniform(0.01, 0.1, (k // group, n))
    q = from_awq(*awq_tensors(codes, zeros, scales), group_size=group)
    np.testing.assert_array_equal(q.dequantize(), expected(codes, zeros, scales, group))
    np.testing.assert_array_equal(q.codes(), codes)


def test_torch_tensors(rng):
    torch = pytest.importorskip("torch")
    codes = rng.integers(0, 16, (64, 8))
    zeros, scales = rng.integers(1, 16, (2, 8)).astype(np.float64), rng.uniform(0.01, 0.1, (2, 8))
    qw, qz, sc = gptq_tensors(codes, zeros, scales, 4)
    q = from_gptq(torch.from_numpy(qw), torch.from_numpy(qz), torch.from_numpy(sc).to(torch.bfloat16), group_size=32)
    assert q.format.scale == "bf16_bits"
    np.testing.assert_allclose(q.dequantize(), expected(codes, zeros, scales, 32), rtol=2 ** -7)
