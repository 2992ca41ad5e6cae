"""The quantized decode kernel's tiling by problem and whether one launch fills the device
(selector/quantized_decode.py), on nominal devices (no GPU)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BFLOAT16
from gemm_engine.problem import MatmulProblem
from gemm_engine.quant import WeightFormat
from gemm_engine.selector.quantized_decode import decode_preset, one_launch_fills, strips

INT4 = WeightFormat("int4", 128, True, "bf16_bits", "prepacked")


def _problem(m=1, n=4096, k=4096, batch=1, fmt=INT4):
    return MatmulProblem(batch, m, n, k, BFLOAT16, BFLOAT16, BFLOAT16, lhs_align=8, weights=fmt)


H100 = dialect_for(nominal_cuda_device())     # 132 compute units


def test_strips_count_cubes_of_columns_rows_and_batch():
    assert strips(_problem(n=4096), 64) == 64 and strips(_problem(n=4097), 64) == 65
    assert strips(_problem(m=65, n=4096, batch=2), 32) == 2 * 128 * 2


@pytest.mark.parametrize("n, m, preset", [
    (14336, 1, {"planes": 8}),                                          # 224 cubes of 64 columns
    (8448, 16, {"planes": 8}),                                          # 132: exactly one a unit
    (4096, 1, {"planes": 16, "column_loads": 1, "unroll": 4}),          # 64 of 64, 128 of 32 >= 0.9 x 132,
    #                                                                     at most one a unit: 4 steps a block
    (8192, 4, {"planes": 16, "column_loads": 1, "unroll": 2}),          # 256 of 32: 64 rows of K a block
    (3072, 1, {}),                                                      # 96 of 32: split K instead
    (4096, 17, {}),                                                     # three x tiles: the defaults
])
def test_decode_preset(n, m, preset):
    assert decode_preset(_problem(m=m, n=n), H100) == preset


def test_no_preset_without_weights():
    assert decode_preset(replace(_problem(), weights=None), H100) == {}


def test_one_launch_fills():
    assert "two" in one_launch_fills(_problem(n=32768), H100)           # 512 wide cubes
    assert "32 columns and 16 planes" in one_launch_fills(_problem(n=4096), H100)
    assert one_launch_fills(_problem(n=3072), H100) is None             # split K
    assert one_launch_fills(_problem(m=64, n=4096), H100) is None       # M = 64: no one-launch tiling
    assert "64 columns and 8 planes" in one_launch_fills(_problem(m=16, n=14336), H100)


@pytest.mark.parametrize("fmt, unroll", [
    (WeightFormat("int8", 0, False, "bf16_bits", "prepacked"), 4),        # pairs, per column: 64 rows of K
    (WeightFormat("fp8_e4m3", 0, False, "bf16_bits", "k_packed"), 4),
    (WeightFormat("fp8_e4m3", 128, False, "bf16_bits", "prepacked"), 2),  # grouped: 4 steps spill (ptxas: 64 regs)
    (WeightFormat("int8", 0, False, "f16_bits", "prepacked"), 2),         # scales of another type: the float path
])
def test_16_plane_blocks_for_8_bit_codes(fmt, unroll):
    for n in (4096, 6144):       # at most one cube a unit, and more
        assert decode_preset(_problem(n=n, fmt=fmt), H100) == {"planes": 16, "column_loads": 1, "unroll": unroll}
