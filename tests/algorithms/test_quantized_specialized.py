"""The quantized specialized kernel (the Hopper warp-specialized kernel with the packed weights
converted in shared memory by the producer warpgroup): numerics on an sm_90 GPU (skipped
elsewhere), its refusals, its register budget and what its CUDA source holds.

References are float64 products with the weights rounded once to x's 16-bit type. Cases: int4 /
int8 / fp8, zeros or not, groups of 32 (two a slot), 64, 128 and per column, both 16-bit types,
scales of another type (the float path), M, N (not whole strips) and K (not whole slots, word rows
past the strip's) ragged, 128 x 128, 128 x 256 and 256 x 128 tiles, the split tail off and on, a
bias."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.algorithms import REGISTRY
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BFLOAT16, FLOAT16
from gemm_engine.errors import SetupError
from gemm_engine.global_ import tma_converting, tma_specialized
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.quant import WeightFormat, quantize
from helpers import BF16, TOLERANCE, np_dtype, rel_error

NAME = "quantized_specialized_wgmma"
WIDE = dict(warpgroups_m=2, partition_m=2, tile_n=128, stages=4, tma_store=False, split_tail=0)
SM90 = dialect_for(nominal_cuda_device(9, 0))


def _hopper_or_skip(engine):
    cc = engine.device.compute_capability
    if engine.backend != "cuda" or cc is None or cc[0] != 9:
        pytest.skip("wgmma and setmaxnreg run on CUDA sm_90 only (the source is checked below)")


#: (format, symmetric, group, M, K, N, dtype, scale dtype, knobs)
CASES = [
    ("int4", False, 128, 256, 1024, 512, "bfloat16", None, {}),
    ("int4", False, 128, 200, 1032, 4100, "bfloat16", None, {}),          # N past whole strips, K past slots
    ("int4", True, 64, 130, 1024, 4160, "bfloat16", None, {}),
    ("int4", True, 32, 300, 2048, 1024, "float16", None, {}),              # two groups a slot
    ("int4", False, 128, 256, 2048, 2048, "float16", "bfloat16", {}),     # scales of another type
    ("int4", True, None, 256, 1024, 2048, "bfloat16", None, {}),           # per column
    ("int8", True, None, 256, 1024, 1024, "bfloat16", None, {}),
    ("int8", False, 64, 77, 1000, 1000, "float16", None, {}),
    ("fp8_e4m3", True, None, 256, 1024, 1024, "bfloat16", None, {}),
    ("fp8_e4m3", True, 128, 333, 1500, 3000, "float16", None, {}),
    ("int4", False, 64, 512, 64, 1024, "bfloat16", None, {}),              # one slot
    ("int4", False, 128, 1024, 1024, 1024, "bfloat16", None, dict(split_tail=0)),
    ("int4", False, 128, 1000, 2000, 3000, "bfloat16", None, dict(tile_n=128, stages=4)),
    ("int4", False, 128, 300, 4104, 4100, "bfloat16", None, WIDE),
    ("int8", True, 64, 333, 1500, 3000, "float16", None, dict(WIDE, stages=3, tma_store=True, store_parts=2)),
    # a tile named by its shape alone: its ring and staging fitted to it (algorithms/specialized_wgmma.py)
    ("int4", False, 128, 48, 4096, 4096, "bfloat16", None, dict(tile_n=64)),
    ("int4", True, 64, 700, 2048, 1536, "float16", None, dict(warpgroups_m=2, partition_m=2, tile_n=128)),
]


def run(engine, rng, kind, symmetric, group, m, k, n, dtype, scales, knobs, bias=None):
    if BF16 is None and "bfloat16" in (dtype, scales):
        pytest.skip("bfloat16 needs ml_dtypes")
    w = rng.standard_normal((k, n)) * rng.uniform(0.05, 20.0, size=(k, 1))
    q = quantize(w, kind, group, symmetric, scale_dtype=scales or dtype).prepack()
    x = rng.standard_normal((m, k)).astype(np_dtype(dtype))
    out = np.full((m, n), np.nan, np_dtype(dtype))           # poisoned: unwritten elements fail
    for _ in range(2):                                         # the general path, then the fast one
        y = engine.quantized_matmul(x, q, algorithm=REGISTRY[NAME](**knobs), out=out, bias=bias)
        assert engine.last_choice[0].name == NAME
        ref = np.asarray(x, np.float64) @ q.dequantize(rounded_to=dtype).astype(np.float64)
        ref = ref + (np.asarray(bias, np.float64) if bias is not None else 0)
        got = np.asarray(y).astype(np.float64)
        assert not np.isnan(got).any()
        assert rel_error(got, ref) <= TOLERANCE[dtype]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c[:8]) + "".join(
    f"-{k}{v}" for k, v in c[8].items()))
def test_quantized_specialized(engine, rng, case):
    _hopper_or_skip(engine)
    run(engine, rng, *case)


def test_bias(engine, rng):
    _hopper_or_skip(engine)
    run(engine, rng, "int4", False, 128, 1024, 1024, 2048, "bfloat16", None, {},
        bias=rng.standard_normal(2048).astype(np.float32))


def _problem(m=1024, n=4096, k=4096, et=BFLOAT16, fmt=WeightFormat("int4", 128, True, "bf16_bits", "prepacked")):
    return MatmulProblem(1, m, n, k, et, et, et, Layout.ROW, Layout.ROW, 8, 8, weights=fmt)


@pytest.mark.parametrize("problem, knobs, words", [
    (_problem(fmt=WeightFormat("int4", 128, True, "bf16_bits")), {}, "prepacked"),
    (_problem(fmt=WeightFormat("int4", 96, True, "bf16_bits", "prepacked")), {}, "group_size=96"),
    (_problem(fmt=None), {}, "quantized"),
    (_problem(), dict(cluster_m=2, split_tail=0), "cluster_m=2"),
    (_problem(), dict(stages=8), "shared memory"),
])
def test_refusals(problem, knobs, words):
    with pytest.raises(SetupError, match=words):
        REGISTRY[NAME](**knobs).setup(problem, SM90)


def test_registers_never_more_than_the_launch_holds():
    # setmaxnreg.inc waits until the registers it asks for are free: asking for more than the
    # warpgroups gave back (the launch's 168 a unit) hung on the H100 when another cube held the
    # multiprocessor's rest (2 consumers at 208 beside a producer at 96).
    for consumers, registers in tma_converting.CONSUMER_REGISTERS.items():
        units = 128 * (1 + consumers)
        # At most what ptxas gives a unit at entry under 1 cube a multiprocessor (168 at 384 units, 128
        # at 512; at 256 it gave 232, above this model's 168).
        launch = min(168, 65536 // units // 8 * 8) * units
        assert (tma_converting.PRODUCER_REGISTERS + consumers * registers) * 128 <= launch
    dense = tma_specialized.PRODUCER_REGISTERS + 2 * tma_specialized.CONSUMER_REGISTERS[2]
    assert tma_converting.PRODUCER_REGISTERS + 2 * tma_converting.CONSUMER_REGISTERS[2] <= dense


@pytest.mark.parametrize("kind, group, dtype", [("int4", 128, BFLOAT16), ("int8", 0, FLOAT16),
                                                ("fp8_e4m3", 32, BFLOAT16)])
def test_the_source_copies_words_and_scales_and_fences_before_arriving(kind, group, dtype):
    fmt = WeightFormat(kind, group, kind == "int4", "bf16_bits" if dtype is BFLOAT16 else "f16_bits", "prepacked")
    p = _problem(m=200, n=4100, k=4104, et=dtype, fmt=fmt)
    alg = REGISTRY[NAME]()
    cfg = alg.setup(p, SM90)
    g = cfg.batch.global_
    assert g.converters == 3 and g.cluster_m == 1
    assert g.rhs_loader.smem_bytes % 1024 == 0               # the next slot's values on a swizzle atom
    assert g.dynamic_shared_bytes <= SM90.device.max_shared_memory
    source = alg.chosen(cfg).render(cfg, SM90)
    assert "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" in source
    assert "rhs_map" not in source                              # the words are read without a map
    convert = source[source.index("cv_unit = "):]
    assert "fence.proxy.async.shared::cta" in source
    assert convert.index("ptx_fence_proxy_async();") < convert.index("SYNC_PLANE();")   # visible to wgmma first
    assert f"setmaxnreg_dec_{tma_converting.PRODUCER_REGISTERS}" in source
    assert "qscale +" in source and "cv_valid" in source      # scale rows copied; word rows past K zeroed


def test_the_default_tile_is_256_x_128_where_four_slots_fit():
    wide = REGISTRY[NAME]().setup(_problem(m=1024, n=14336, k=4096), SM90).batch.global_
    assert (wide.stage.stage_m, wide.stage.stage_n, wide.stages) == (256, 128, 4)
    byte = _problem(m=1024, n=14336, k=4096, fmt=WeightFormat("int8", 0, False, "bf16_bits", "prepacked"))
    kept = REGISTRY[NAME]().setup(byte, SM90).batch.global_         # 3 slots of 256 x 128 only: kept
    assert (kept.stage.stage_m, kept.stage.stage_n) == (128, 256)


def test_a_few_rows_take_whole_strips_where_the_dense_rule_takes_32_columns():
    """The dense rule's 32-column decode tiles (bench/SELECTION_NOTES.md, "32-column tiles") are
    not whole packed-word strips, nor measured beyond dense products: the converting kernel takes
    64 columns split as before them (8 x 4096 x 14336: 2 parts), and its tuning space only tilings
    of whole strips."""
    from gemm_engine.quant.format import STRIP_COLUMNS
    for m, n, k, kind in ((1, 4096, 4096, "int4"), (16, 4096, 4096, "int8"), (64, 4096, 4096, "int4"),
                          (8, 4096, 14336, "int4")):
        fmt = WeightFormat(kind, 128 if kind == "int4" else 0, kind == "int4", "bf16_bits", "prepacked")
        p = _problem(m=m, n=n, k=k, fmt=fmt)
        g = REGISTRY[NAME]().setup(p, SM90).batch.global_
        assert g.stage.stage_n == STRIP_COLUMNS, (m, n, k, kind)
        assert g.split_tail == (2 if (m, n, k) == (8, 4096, 14336) else 0), (m, n, k)
        space = REGISTRY[NAME]().tuning_space(p, SM90)
        assert space and all(c.get("warpgroups_n", 1) * c["tile_n"] % STRIP_COLUMNS == 0 for c in space)


def test_misaligned_words_or_scales_are_refused_before_launch():
    # The per-call values are derived before any launch: an address the bulk copies cannot read
    # (not on 16 bytes) is a ValueError naming qweight, not a fault.
    alg = REGISTRY[NAME]()
    cfg = alg.setup(_problem(), SM90)
    derive = alg.chosen(cfg).call_values(cfg, _problem()).derive
    values = dict(rhs_base=4096 + 4, rhs_offset=0, qscale_base=8192, qscale_offset=0, qscale_ld=4096,
                  qzero_base=16384, qzero_offset=0, qzero_ld=4096)
    with pytest.raises(ValueError, match="qweight: its packed words"):
        derive(values)
    with pytest.raises(ValueError, match="qweight: its scales"):
        derive(dict(values, rhs_base=4096, qscale_offset=1))
    with pytest.raises(ValueError, match="qweight: its zeros"):
        derive(dict(values, rhs_base=4096, qzero_ld=4100))
