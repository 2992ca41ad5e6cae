"""global_/read/dequantizing_loader.py: the loader's setup (rhs quantized weights only, float32 or
16-bit shared memory, whole packed words along K) and the quantized unit kernels that read through
it on PoCL: x @ W against x @ W.dequantize() in float64, for each format and partial tiles."""
from __future__ import annotations

import numpy as np
import pytest

import gemm_engine
from gemm_engine.dtypes import FLOAT32, PACKED_WORDS
from gemm_engine.errors import SetupError
from gemm_engine.global_.read.dequantizing_loader import DequantizingLoader
from gemm_engine.global_.read.loaders import OperandTile
from gemm_engine.problem import Layout
from gemm_engine.quant.format import WeightFormat

INT4 = WeightFormat("int4", group_size=32)


def _tile(ident="rhs", rows=32, cols=64, weights=INT4, smem_word="f32", k_rows=True):
    return OperandTile(ident, PACKED_WORDS if weights else FLOAT32, Layout.ROW, rows, cols, False, False, cols + 4,
                       k_along_rows=k_rows, smem_word=smem_word, weights=weights)


def test_setup_counts_words():
    cfg = DequantizingLoader().setup(_tile(), 128)
    assert cfg.tasks == -(-(32 // INT4.per_word * 64) // 128)
    assert DequantizingLoader().setup(_tile(smem_word="bf16_bits"), 64).units == 64


@pytest.mark.parametrize("tile, needle", [
    (_tile(weights=None), "the rhs operand is dense"),
    (_tile("lhs", k_rows=False), "the rhs (K x N weights) only"),
    (_tile(smem_word="f64"), "the stage holds f64"),
    (_tile(rows=4), "stage_k=4 is not a multiple of the 8 int4 codes"),
])
def test_refusals(tile, needle):
    with pytest.raises(SetupError) as info:
        DequantizingLoader().setup(tile, 64)
    assert needle in str(info.value) and info.value.component == "dequantizing"


@pytest.mark.parametrize("fmt, group, symmetric", [("int4", 32, True), ("int4", 64, False), ("int8", None, True),
                                                   ("fp8_e4m3", 32, True)])
def test_quantized_unit_kernels_on_pocl(opencl_engine, rng, fmt, group, symmetric):
    k, n = 128, 40
    w = rng.standard_normal((k, n)).astype(np.float32)
    qw = gemm_engine.quantize(w, fmt, group_size=group, symmetric=symmetric)
    x = rng.standard_normal((3, 7, k)).astype(np.float32)
    got = opencl_engine.quantized_matmul(x, qw, algorithm="quantized_simple_unit")
    ref = x.astype(np.float64) @ qw.dequantize().astype(np.float64)
    assert got.shape == (3, 7, n)
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5 * np.abs(ref).max())
