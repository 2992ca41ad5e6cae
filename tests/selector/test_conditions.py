"""selector/conditions.py: each rule condition's bounds (None: take the algorithm; a reason: not here)."""
from __future__ import annotations

from dataclasses import replace

from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.selector.conditions import (INT8_SPECIALIZED_MIN_K_RATIO, ONE_ROW_MAX_WAVES, ONE_ROW_MIN_BYTES,
                                             SPECIALIZED_MIN_TILES, SPLIT_SKINNY_MIN_BYTES,
                                             WGMMA_TRANSPOSE_MIN_EXTENT, always, one_row_streams,
                                             skinny_split_worth_it, specialized_worth_it, split_k_worth_it,
                                             wgmma_worth_it)
from renders import OPENCL_DEVICE, any_problem

SM80, SM90 = dialect_for(nominal_cuda_device(8, 0)), dialect_for(nominal_cuda_device(9, 0))
OPENCL = dialect_for(OPENCL_DEVICE)


def test_always():
    assert always(any_problem((1, 1, 1, 1)), OPENCL) is None


def test_skinny_split_only_on_cuda_with_a_long_k_and_a_big_operand():
    # (On Hopper one row of a 16-bit weight takes the decode tiles instead: the test below.)
    assert skinny_split_worth_it(any_problem((1, 1, 8192, 8192), "bfloat16"), SM80) is None
    assert skinny_split_worth_it(any_problem((1, 1, 8192, 8192), "float32"), SM90) is None
    assert "CUDA" in skinny_split_worth_it(any_problem((1, 1, 8192, 8192), "bfloat16"), OPENCL)
    assert "shorter than" in skinny_split_worth_it(any_problem((1, 1, 14336, 4096), "bfloat16"), SM80)
    # 4096 x 2048 bf16: 16 MiB exactly is enough, one row of K less is not.
    assert skinny_split_worth_it(any_problem((1, 1, 2048, 4096), "bfloat16"), SM80) is None
    assert 2048 * 4096 * 2 == SPLIT_SKINNY_MIN_BYTES
    assert "streamed fast enough" in skinny_split_worth_it(any_problem((1, 1, 2048, 4095), "bfloat16"), SM80)
    assert skinny_split_worth_it(any_problem((1, 64, 64, 64)), SM90) is None      # not skinny: setup refuses


def test_one_row_takes_the_decode_tiles_on_hopper():
    """One row of a 16-bit weight on sm_90 (bench/SELECTION_NOTES.md, "One-row products"): a weight
    contiguous along the outputs always (skinny_split_k's calls took 34-65 us for 19-24 us kernels),
    one contiguous along K from 64 MiB where unsplit tiles fill at most a wave."""
    linear = ("row", "col")
    for shape, layout in (((1, 1, 4096, 4096), ("row", "row")), ((1, 1, 2048, 8192), ("row", "row")),
                          ((1, 1, 14336, 4096), linear), ((1, 1, 4096, 14336), linear), ((1, 1, 5120, 13824), linear)):
        assert one_row_streams(any_problem(shape, "bfloat16", layout), SM90), shape
        assert "decode tiles" in skinny_split_worth_it(any_problem(shape, "bfloat16", layout), SM90)
    assert ONE_ROW_MIN_BYTES == 64 << 20
    for shape, dtype, device in (((1, 1, 4096, 4096), "bfloat16", SM90),     # 32 MiB contiguous along K
                                 ((1, 1, 3072, 8192), "bfloat16", SM90),
                                 ((1, 1, 28672, 4096), "bfloat16", SM90),    # 224 tiles: more than a wave
                                 ((1, 2, 14336, 4096), "bfloat16", SM90),    # two rows: their own rule
                                 ((1, 1, 14336, 4096), "float32", SM90), ((1, 1, 14336, 4096), "bfloat16", SM80),
                                 ((2, 1, 14336, 4096), "bfloat16", SM90)):   # a batch: not measured
        assert not one_row_streams(any_problem(shape, dtype, linear), device), (shape, dtype)
    # Contiguous along the outputs, up to ONE_ROW_MAX_WAVES waves of tiles (28672 columns: 224 tiles).
    assert ONE_ROW_MAX_WAVES == 2
    assert one_row_streams(any_problem((1, 1, 28672, 4096), "bfloat16"), SM90)
    assert not one_row_streams(any_problem((1, 1, 65536, 1024), "bfloat16"), SM90)      # 512 tiles
    assert not one_row_streams(any_problem((1, 1, 8388608, 1), "bfloat16"), SM90)
    mixed = any_problem((1, 1, 14336, 4096), "bfloat16", linear)
    assert not one_row_streams(replace(mixed, rhs=BY_NAME["float16"]), SM90)          # bf16 x f16: no wgmma
    from gemm_engine.quant import WeightFormat
    quantized = replace(mixed, weights=WeightFormat("int4", 128, True, "bf16_bits", "prepacked"))
    assert not one_row_streams(quantized, SM90)


def test_split_k_where_k_is_long_against_the_output():
    assert split_k_worth_it(any_problem((1, 64, 64, 65536), "float32"), OPENCL) is None
    assert split_k_worth_it(any_problem((1, 16, 8192, 8192)), SM80) is None             # thin output
    assert split_k_worth_it(any_problem((1, 512, 512, 512), "float32"), SM90) is None    # few FMA tiles
    assert "carry the parallelism" in split_k_worth_it(any_problem((1, 4096, 4096, 4096)), SM90)
    # On Hopper the specialized kernel's tiles (split along K) take a long K in one kernel.
    assert "specialized kernel" in split_k_worth_it(any_problem((1, 1024, 1024, 4096)), SM90)
    assert split_k_worth_it(any_problem((1, 1024, 1024, 4096)), SM80) is None


def test_wgmma_transposes_only_past_the_extent_bound():
    assert wgmma_worth_it(any_problem((1, 512, 512, 512)), SM90) is None                # 16-bit: transpose bits
    small = wgmma_worth_it(any_problem((1, 512, 512, 512), "tf32"), SM90)               # b row-major: copied
    assert "M = 512" in small and str(WGMMA_TRANSPOSE_MIN_EXTENT) in small
    big = any_problem((1, WGMMA_TRANSPOSE_MIN_EXTENT, WGMMA_TRANSPOSE_MIN_EXTENT, 512), "tf32")
    assert wgmma_worth_it(big, SM90) is None
    assert wgmma_worth_it(any_problem((1, 512, 512, 512), "tf32", ("row", "col")), SM90) is None   # K-major both


def test_specialized_from_a_third_of_a_wave_or_many_operations():
    assert specialized_worth_it(any_problem((1, 4096, 4096, 4096)), SM90) is None
    few = any_problem((1, 640, 640, 2560))                  # 15 tiles of 128 x 256, 50 of 64 x 128, 2^31 operations
    assert f"fewer than {SPECIALIZED_MIN_TILES}" in specialized_worth_it(few, SM90)
    # ... but a wave of 64 x 128 tiles takes it (selector/small_wave.py).
    assert specialized_worth_it(any_problem((1, 1000, 1000, 1000)), SM90) is None
    assert specialized_worth_it(any_problem((1, 1024, 1024, 4096)), SM90) is None   # 2^33 operations
    block = any_problem((1, 64, 64, 128), "float8_e4m3fn", out="bfloat16",
                        epilogue=Epilogue(lhs_scale="block", rhs_scale="block"))
    assert specialized_worth_it(block, SM90) is None                  # the one kernel that applies block scales
    # int8 on few tiles (32 of 128 x 256) and 2^33 operations and more needs K >= 8 max(M, N).
    assert "int8 also" in specialized_worth_it(any_problem((1, 1024, 1024, 4096), "int8", ("row", "col")), SM90)
    long_k = any_problem((1, 1024, 1024, 1024 * INT8_SPECIALIZED_MIN_K_RATIO), "int8", ("row", "col"))
    assert specialized_worth_it(long_k, SM90) is None


def test_specialized_passes_copies_that_cost_more_than_they_gain():
    odd = any_problem((1, 512, 512, 512), align=(1, 1))               # TMA cannot address it: copied first
    assert "copied first" in specialized_worth_it(odd, SM90)


def test_several_rows_stream_on_the_skinny_kernel_on_cuda():
    from gemm_engine.selector.conditions import SKINNY_AUTO_ROWS, skinny_worth_it
    assert skinny_worth_it(any_problem((1, 1, 300, 64)), OPENCL) is None                   # one row: everywhere
    linear = ("row", "col")          # nn.Linear's weight: contiguous along K (dot products)
    assert skinny_worth_it(any_problem((1, 4, 4096, 4096), "bfloat16", linear), SM80) is None
    assert "decode tiles" in skinny_worth_it(any_problem((1, 4, 4096, 4096), "bfloat16", linear), SM90)
    assert "CUDA" in skinny_worth_it(any_problem((1, 4, 4096, 4096), "bfloat16", linear), OPENCL)
    assert "not a stream" in skinny_worth_it(any_problem((1, 4, 512, 512), "bfloat16", linear), SM80)
    assert f"{SKINNY_AUTO_ROWS + 1} rows" in skinny_worth_it(any_problem((1, SKINNY_AUTO_ROWS + 1, 4096, 4096)), SM90)
    # A weight contiguous along the outputs: tensor cores (4 rows of 4096 x 14336: 43.9 us against 48.0 and 65.7).
    assert "contiguous along the outputs" in skinny_worth_it(any_problem((1, 4, 4096, 4096), "bfloat16"), SM80)
    assert skinny_worth_it(any_problem((1, 64, 64, 64)), SM90) is None                      # its setup refuses it


def test_weight_streaming_takes_the_specialized_kernel_before_split_k():
    decode = any_problem((1, 64, 4096, 4096), "bfloat16", ("row", "col"))
    assert "weight-streaming" in split_k_worth_it(decode, SM90)
    assert specialized_worth_it(decode, SM90) is None
    assert split_k_worth_it(decode, SM80) is None                                       # thin, as before


def test_few_rows_stream_on_the_specialized_kernel_not_pipelined_or_skinny():
    """bf16 2-16 x 4096 x 4096: the specialized kernel's 64 x 64 tiles, which read only the rows
    inside the problem (9.2-9.8 us kernels against skinny's 11.6 / 16.0 at 2 / 4 rows and
    pipelined_wgmma's 17.1 / 18.0 at 8 / 16: bench/SELECTION_NOTES.md, "Short problems"; 32 columns
    a tile since "32-column tiles"); one row of this 32 MiB weight keeps the skinny (GEMV) kernel."""
    from gemm_engine.selector.conditions import skinny_worth_it
    linear = ("row", "col")
    for rows in (2, 4, 8, 16):
        p = any_problem((1, rows, 4096, 4096), "bfloat16", linear)
        assert "weight-streaming" in split_k_worth_it(p, SM90) and specialized_worth_it(p, SM90) is None
        assert rows > 4 or "decode tiles" in skinny_worth_it(p, SM90)
    assert skinny_worth_it(any_problem((1, 1, 4096, 4096), "bfloat16", linear), SM90) is None
    assert skinny_worth_it(any_problem((1, 4, 4096, 4096), "bfloat16", linear), SM80) is None    # no wgmma: skinny
    # Not where its tiles would be too few to split over the device, nor where an operand is copied.
    assert split_k_worth_it(any_problem((1, 128, 128, 262144), "bfloat16"), SM90) is None
    assert split_k_worth_it(any_problem((1, 16, 4096, 4095), "bfloat16", ("row", "col"), align=(1, 1)), SM90) is None


def test_ragged_operands_copied_for_the_specialized_kernel_from_2_32_operations():
    """An operand copied only for TMA's 16-byte rule: the copy pays from 2^32 operations whatever the
    tiles (held-out random rows, bench/SELECTION_NOTES.md "Held-out rows": 982 x 1338 x 6595 col/col
    77 us against pipelined_wgmma's 238; 3941 x 142 x 5010 81 against 179), not below it (1084 x
    4317 x 48: 29 us in pipelined_wgmma against 74 with the copy)."""
    col = ("col", "col")
    assert specialized_worth_it(any_problem((1, 982, 1338, 6595), "bfloat16", col, align=(2, 1)), SM90) is None
    assert specialized_worth_it(any_problem((1, 3941, 142, 5010), "bfloat16", ("col", "row"), align=(1, 2)), SM90) is None
    why = specialized_worth_it(any_problem((1, 1084, 4317, 48), "bfloat16", col, align=(4, 8)), SM90)
    assert "16-byte rule" in why and "2^32" in why
    # A transposing copy (tf32 wgmma reads K-major only) keeps its bound on the other extent.
    assert "768" in specialized_worth_it(any_problem((1, 4096, 512, 4096), "tf32", ("col", "row")), SM90)


def test_split_k_only_where_the_unsplit_kernel_outlasts_a_split_call():
    """On the H100 a split-K call (two launches, a workspace) took 49-75 us with 6-13 us of kernels;
    the one-launch kernel streams a 64 x 64 tile's K at about 60 GB/s (48 x 512 x 6536 col/row: 26
    us against 69 split). Aligned operands only (the rate was measured so); other GPUs as before."""
    from gemm_engine.selector.conditions import unsplit_kernel_us
    thin = any_problem((1, 48, 512, 6536), "bfloat16", ("col", "row"))
    assert 25 < unsplit_kernel_us(thin, SM90) < 30
    assert "unsplit kernel" in split_k_worth_it(thin, SM90)
    assert "unsplit kernel" in split_k_worth_it(any_problem((2, 392, 336, 2080), "bfloat16", ("col", "col")), SM90)
    assert split_k_worth_it(any_problem((1, 128, 128, 65536), "bfloat16"), SM90) is None     # 280 us unsplit
    assert split_k_worth_it(thin, SM80) is None
    # Other dtypes as before (the rate is bf16 / f16's): exact float32's fallback streams far slower.
    assert split_k_worth_it(any_problem((1, 600, 600, 5000), "float32"), SM90) is None
