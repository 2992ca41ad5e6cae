"""The quantized decode kernel (M <= 64): numerics on every backend (OpenCL runs its emulation of
the plane product, which checks the fragment arithmetic), its refusals, its choice by ``auto`` and
its CUDA sources (sm_80 and sm_90a, no spills).

References are float64 products with the weights rounded once to x's 16-bit type (what the
fragments hold); the errors left are the output's rounding. Each distinct kernel is a PoCL compile
of several seconds (the emulated products are unrolled), so most cases run a small tiling
(``column_loads=1``), each axis at least once: both layouts, int4 / int8 / fp8, zeros or not,
groups per step / per block / per column, M in one and several 8-row tiles, K and N ragged."""
from __future__ import annotations

import numpy as np
import pytest

from cuda_compile import assert_no_spills, jobs_of, prefetched
from gemm_engine.algorithms import REGISTRY
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BFLOAT16, FLOAT16, FLOAT32
from gemm_engine.errors import SetupError
from gemm_engine.problem import MatmulProblem
from gemm_engine.quant import WeightFormat, quantize
from gemm_engine.selector.rules import RULES
from helpers import BF16, TOLERANCE, np_dtype, rel_error


def weight(rng, k, n):
    return rng.standard_normal((k, n)) * rng.uniform(0.05, 20.0, size=(k, 1))


def run(engine, rng, kind, symmetric, group, m, k, n, dtype, layout, algorithm="quantized_decode", scales=None,
        **knobs):
    """``scales``: the scales' dtype (default x's own: on CUDA int4 then takes the pair FMAs)."""
    if dtype == "bfloat16" and BF16 is None:
        pytest.skip("bfloat16 needs ml_dtypes")
    q = quantize(weight(rng, k, n), kind, group, symmetric, scale_dtype=scales or dtype)
    q = q.prepack() if layout == "prepacked" else q
    x = rng.standard_normal((m, k)).astype(np_dtype(dtype))
    alg = REGISTRY[algorithm](**knobs)
    y = engine.quantized_matmul(x, q, algorithm=alg)
    assert engine.last_choice[0].name == algorithm and y.shape == (m, n) and y.dtype == np_dtype(dtype)
    ref = np.asarray(x, np.float64) @ q.dequantize(rounded_to=dtype).astype(np.float64)
    err = rel_error(y, ref)
    assert err <= TOLERANCE[dtype], f"relative error {err:.3e}"
    return err


#: (format, symmetric, group, M, K, N, dtype, layout, knobs)
CASES = [
    ("int4", False, 32, 5, 100, 37, "bfloat16", "k_packed", dict(column_loads=1, unroll=2)),   # scales per step
    ("int4", True, 64, 17, 200, 70, "float16", "prepacked", dict(column_loads=1, unroll=1)),  # per block, 3 x tiles
    ("int4", False, None, 8, 77, 33, "float16", "k_packed", dict(column_loads=1, unroll=1)),   # per column
    ("int4", True, 32, 2, 64, 40, "bfloat16", "prepacked", dict(column_loads=1, unroll=1, scales="float16")),
    ("int8", False, 32, 3, 130, 40, "bfloat16", "prepacked", dict(column_loads=1, unroll=1)),
    ("int8", True, None, 1, 72, 20, "float16", "k_packed", dict(column_loads=1, unroll=2, planes=2)),
    ("fp8_e4m3", True, 32, 2, 64, 64, "bfloat16", "k_packed", dict(column_loads=1, unroll=1)),
    ("int4", True, 128, 64, 256, 50, "bfloat16", "k_packed", dict(column_loads=1, unroll=1)),  # M = 64
    ("int4", False, 32, 17, 200, 150, "bfloat16", "prepacked", dict(column_loads=1, unroll=1, planes=2,
                                                                      planes_along="n")),    # planes along N
    ("int4", False, 128, 4, 300, 90, "bfloat16", "prepacked", {}),                              # default tiling
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c[:8]))
def test_decode(engine, rng, case):
    *args, knobs = case
    try:
        run(engine, rng, *args, **knobs)
    except SetupError as exc:
        if engine.backend == "opencl" or (engine.device.compute_capability or (0, 0)) >= (8, 0):
            raise
        pytest.skip(f"no plane product here: {exc.reason}")


#: The two register buffers (``prefetch``): rounds of one, an odd and an even number (a plane's last
#: block past K in the guarded path), scales per column / step / block, planes along N, 8-bit codes
#: and M past two tiles; and the single buffer where M alone would choose two.
#: (format, symmetric, group, M, K, N, dtype, layout, knobs)
PREFETCH_CASES = [
    ("int4", False, 32, 3, 160, 40, "bfloat16", "k_packed", dict(column_loads=1, unroll=1, planes=2, prefetch=1)),
    ("int4", True, None, 9, 100, 33, "float16", "prepacked", dict(column_loads=1, unroll=1, planes=2, prefetch=1)),
    ("int4", False, 32, 1, 20, 24, "bfloat16", "prepacked", dict(column_loads=1, unroll=2, prefetch=1)),
    ("int4", False, 64, 17, 300, 50, "float16", "k_packed", dict(column_loads=1, unroll=1, planes=2, prefetch=1)),
    ("int8", False, 32, 4, 200, 36, "bfloat16", "prepacked", dict(column_loads=1, unroll=2, planes=2, prefetch=1)),
    ("int4", False, 32, 5, 230, 150, "bfloat16", "prepacked", dict(column_loads=1, unroll=1, planes=2,
                                                                    planes_along="n", prefetch=1)),
    ("int4", True, 128, 4, 300, 40, "bfloat16", "k_packed", dict(column_loads=1, unroll=1, planes=2, prefetch=0)),
]


@pytest.mark.parametrize("case", PREFETCH_CASES, ids=lambda c: "-".join(str(v) for v in c[:8]) + f"-p{c[8]['prefetch']}")
def test_decode_prefetch(engine, rng, case):
    *args, knobs = case
    try:
        run(engine, rng, *args, **knobs)
    except SetupError as exc:
        if engine.backend == "opencl" or (engine.device.compute_capability or (0, 0)) >= (8, 0):
            raise
        pytest.skip(f"no plane product here: {exc.reason}")
    assert engine.last_choice[1].batch.global_.prefetch == bool(knobs["prefetch"])


#: (format, symmetric, group, layout, dtype): the pair paths on CUDA (scales of x's own type).
PAIR_CASES = [
    ("int4", False, 128, "prepacked", "bfloat16"), ("int4", True, 64, "k_packed", "float16"),
    ("int8", True, None, "k_packed", "bfloat16"), ("int8", False, 64, "prepacked", "bfloat16"),
    ("int8", False, None, "prepacked", "float16"),
    ("fp8_e4m3", True, None, "prepacked", "bfloat16"), ("fp8_e4m3", True, 64, "k_packed", "float16"),
    ("fp8_e4m3", True, None, "k_packed", "bfloat16"),
]


@pytest.mark.parametrize("case", PAIR_CASES, ids=lambda c: "-".join(map(str, c)))
def test_pairs_give_each_weight_rounded_once_exactly(engine, rng, case):
    """One-hot rows of x pick rows of the weight: each output is one weight as the fragments hold
    it, so the pair dequantization must give exactly ``dequantize(rounded_to=x's type)``, bit for
    bit, subnormal fp8 codes and extreme zero points included (rows of very different magnitudes:
    per-column scales leave the small rows' codes subnormal)."""
    kind, symmetric, group, layout, dtype = case
    if engine.backend != "cuda":
        pytest.skip("the pair FMAs are CUDA's (OpenCL takes the float path, which test_decode checks; its "
                    "emulated plane product costs PoCL seconds of compile a kernel)")
    if dtype == "bfloat16" and BF16 is None:
        pytest.skip("bfloat16 needs ml_dtypes")
    k, n, m = 256, 72, 16
    w = rng.standard_normal((k, n)) * np.logspace(-4, 0, k)[rng.permutation(k)][:, None]
    q = quantize(w, kind, group, symmetric, scale_dtype=dtype)
    q = q.prepack() if layout == "prepacked" else q
    rows = rng.permutation(k)[:m]
    x = np.zeros((m, k), np_dtype(dtype))
    x[np.arange(m), rows] = 1
    y = engine.quantized_matmul(x, q, algorithm=REGISTRY["quantized_decode"]())
    assert engine.last_choice[1].batch.global_.fast_pairs
    want = q.dequantize(rounded_to=dtype)[rows]
    got = np.asarray(y).astype(np.float64)
    assert np.array_equal(got, want.astype(np.float64)), np.argwhere(got != want)[:5]
    if kind == "fp8_e4m3":       # the rows picked held subnormal codes
        codes = q.codes()[rows]
        assert np.any((((codes >> 3) & 15) == 0) & ((codes & 7) != 0))


def test_prefetch_knob_is_checked():
    with pytest.raises((SetupError, ValueError), match="prefetch"):
        REGISTRY["quantized_decode"](prefetch=2).setup(_problem(), dialect_for(nominal_cuda_device()))


def test_decode_split_k(engine, rng):
    run(engine, rng, "int4", False, 32, 3, 1000, 40, "bfloat16", "k_packed", "quantized_decode_split_k",
        column_loads=1, unroll=1, split_k=3)
    assert engine.last_choice[1].batch.splits == 3


def test_decode_batch_folds_into_m(opencl_engine, rng):
    e = opencl_engine
    q = quantize(weight(rng, 64, 32), "int4", 32)
    x = rng.standard_normal((2, 3, 64)).astype(np.float16)
    y = e.quantized_matmul(x, q, algorithm=REGISTRY["quantized_decode"](column_loads=1, unroll=1))
    ref = x.astype(np.float64) @ q.dequantize(rounded_to="float16").astype(np.float64)
    assert y.shape == (2, 3, 32) and rel_error(y, ref) <= TOLERANCE["float16"]
    assert e.last_choice[1].batch.global_.m_tiles == 1      # 6 rows: one 8-row tile, batch 1


def _problem(m=1, n=4096, k=4096, et=BFLOAT16, fmt=WeightFormat("int4", 128, scale="bf16_bits"), align=8):
    return MatmulProblem(1, m, n, k, et, et, et, lhs_align=align, weights=fmt)


@pytest.mark.parametrize("problem, words", [
    (_problem(et=FLOAT32), "16-bit"),
    (_problem(m=65), "at most 64"),
    (_problem(fmt=WeightFormat("int4", 16)), "group_size=16"),
    (_problem(fmt=None), "quantized weights"),
])
def test_refusals(problem, words):
    d = dialect_for(nominal_cuda_device())
    with pytest.raises(SetupError, match=words):
        REGISTRY["quantized_decode"]().setup(problem, d)


def test_planes_along_n_widen_the_cube_and_need_no_reduction():
    d = dialect_for(nominal_cuda_device())
    cfg = REGISTRY["quantized_decode"](planes_along="n", planes=4, column_loads=2).setup(_problem(m=64), d)
    g = cfg.batch.global_
    assert g.stage.stage_n == 4 * 64 and g.reduce_floats == 0 and g.along_n
    with pytest.raises(SetupError, match="planes_along"):
        REGISTRY["quantized_decode"](planes_along="m").setup(_problem(), d)


def test_refused_below_sm80_and_where_shared_memory_ends():
    with pytest.raises(SetupError, match="plane product"):
        REGISTRY["quantized_decode"]().setup(_problem(), dialect_for(nominal_cuda_device(7, 5)))
    with pytest.raises(SetupError, match="shared memory"):
        REGISTRY["quantized_decode"](column_loads=2, unroll=1, planes=8).setup(_problem(m=64),
                                                                               dialect_for(nominal_cuda_device()))


def test_auto_takes_decode_on_cuda_and_splits_few_strips():
    d = dialect_for(nominal_cuda_device())
    auto = REGISTRY["auto"]()
    picks = {}
    configs = {}
    for n, m in ((4096, 1), (4096, 32), (4096, 64), (14336, 16), (32768, 16), (4096, 65)):
        configs[(n, m)] = cfg = auto.setup(_problem(m=m, n=n), d)
        picks[(n, m)] = cfg.algorithm.rsplit(".", 1)[1]
    # M <= 16: one launch wherever 32- or 64-column cubes nearly cover the 132 units (no K ranges to add)
    assert picks[(4096, 1)] == picks[(14336, 16)] == picks[(32768, 16)] == "QuantizedDecodeAlgorithm"
    # M = 48-64 on Hopper: the wgmma kernel (test_quantized_wgmma.py); below, and before Hopper, decode's split form
    assert picks[(4096, 32)] == "QuantizedDecodeSplitKAlgorithm" and picks[(4096, 64)] == "QuantizedWgmmaAlgorithm"
    sm80 = dialect_for(nominal_cuda_device(8, 0))
    for m in (32, 64):
        assert auto.setup(_problem(m=m), sm80).algorithm.endswith("QuantizedDecodeSplitKAlgorithm")
    # One register buffer (measured faster than two), 4 steps a block where the 32-column cubes are
    # at most one a unit; int4 at 9-16 rows 2 steps a block.
    g = configs[(4096, 1)].batch.global_
    assert (g.planes, g.loads, g.unroll, g.prefetch, g.stage.stage_n) == (16, 1, 4, False, 32)
    g = configs[(14336, 16)].batch.global_
    assert (g.planes, g.loads, g.unroll, g.prefetch, g.stage.stage_n) == (8, 2, 2, False, 64)
    wide = auto.setup(_problem(m=8, n=6144), d).batch.global_        # 192 cubes of 32 columns: 64 rows a block
    assert (wide.planes, wide.unroll, wide.prefetch) == (16, 2, False)
    assert picks[(4096, 65)] == "QuantizedWgmmaAlgorithm"
    # past 512 rows the pass first, but for one wave of the producer form's 256-row cubes (128 here)
    assert auto.setup(_problem(m=2048), d).algorithm.endswith("DequantizedSpecializedWgmmaAlgorithm")
    assert auto.setup(_problem(m=1024), d).batch.global_.producer
    # last, the pass by register FMA for transposed weights only (W.T: tests/batch/test_dequantize_transposed.py)
    assert [r.algorithm for r in RULES[-10:]] == ["quantized_wgmma_split_k", "quantized_wgmma",
                                                  "quantized_decode_split_k", "quantized_decode",
                                                  "dequantized_specialized_wgmma", "dequantized_pipelined_wgmma",
                                                  "dequantized_pipelined_mma", "quantized_double_buffering_mma",
                                                  "quantized_simple_unit", "dequantized_simple_unit"]


# -- CUDA sources ----------------------------------------------------------------------------------
SOURCE_CASES = [
    ("quantized_decode", "int4", 128, True, "prepacked", 1, "bfloat16", {}),
    ("quantized_decode", "int4", 128, False, "k_packed", 16, "float16", {}),
    ("quantized_decode", "int4", 32, False, "k_packed", 32, "bfloat16", {}),
    ("quantized_decode", "int4", 0, True, "prepacked", 64, "float16", {}),
    ("quantized_decode_split_k", "int4", 128, False, "prepacked", 64, "bfloat16", dict(planes_along="n")),
    ("quantized_decode_split_k", "int4", 128, True, "prepacked", 4, "bfloat16", {}),
    ("quantized_decode", "int8", 0, False, "prepacked", 16, "bfloat16", {}),
    ("quantized_decode", "fp8_e4m3", 0, False, "k_packed", 8, "float16", {}),
    # the 16-plane preset (4096 + 32 columns): grouped 8-bit codes, and scales of another type (the float path)
    ("quantized_decode", "fp8_e4m3", 128, False, "prepacked", 1, "bfloat16", {}),
    ("quantized_decode", "int8", 128, True, "prepacked", 1, "bfloat16", {}),
    ("quantized_double_buffering_mma", "int4", 128, True, "k_packed", 256, "bfloat16", {}),
    ("quantized_simple_mma", "int8", 64, True, "prepacked", 256, "float16", {}),
    ("quantized_simple_unit", "fp8_e4m3", 32, False, "k_packed", 100, "float16", {}),
]


def cuda_sources() -> dict:
    out = {}
    for name, kind, group, zeros, layout, m, dtype, knobs in SOURCE_CASES:
        et = {"bfloat16": BFLOAT16, "float16": FLOAT16}[dtype]
        scale = "bf16_bits" if dtype == "bfloat16" else "f16_bits"
        fmt = WeightFormat(kind, group, zeros and kind != "fp8_e4m3", scale, layout)
        for cc in ((8, 0), (9, 0)):
            d = dialect_for(nominal_cuda_device(*cc))
            alg = REGISTRY[name](**knobs)
            cfg = alg.setup(_problem(m=m, n=4096 + 32, k=4096 + 64, et=et, fmt=fmt), d)
            out[f"{name}-{kind}-{group}-{layout}-{m}-{dtype}-sm{cc[0]}{cc[1]}"] = alg.render(cfg, d)
    return out


def _jobs():
    from cuda_compile import jobs_by_suffix
    return jobs_by_suffix(cuda_sources())


@prefetched(_jobs)
def test_cuda_sources_compile_without_spills():
    assert_no_spills(_jobs(), lambda name, problem: "decode" in name or "did not compile" in problem)


def test_cuda_decode_source_structure():
    src = cuda_sources()["quantized_decode-int4-128-prepacked-1-bfloat16-sm90"]
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in src
    assert "ld.global.nc.L1::no_allocate.v4.u32" in src          # the weights: 16-byte streaming loads
    assert "fma.rn.bf16x2" in src and "cvt.rn.bf16x2.f32" in src  # pair FMAs; scales packed once
    # the prepacked int4 pair: one shift, then mask and magic in one lop3; no conversion instruction
    assert "lop3.b32" in src and "0x000f000fu" in src and "(float)" not in src
    assert src.count("ptx_dequant_pair_bf16_m000f000f_43004300(") >= 1 + 2 * 2 * 2 * 4   # definition + tiles x regs x steps
    # 8-bit codes by pairs too (scales of x's type): a byte permute picks both codes, no float32
    # conversion a code (the old path's f8e4m3_to_f32 / 2^23 + code subtraction a code)
    int8 = cuda_sources()["quantized_decode-int8-0-prepacked-16-bfloat16-sm90"]
    assert int8.count("ptx_dequant_int8_pair_bf16(") >= 1 + 2 * 2 * 4 and "__byte_perm" in int8
    fp8 = cuda_sources()["quantized_decode-fp8_e4m3-0-k_packed-8-float16-sm90"]
    assert fp8.count("ptx_dequant_fp8_pair_f16(") >= 1 + 2 * 2 * 4 and fp8.count("f8e4m3_to_f32(") <= 1   # its definition
