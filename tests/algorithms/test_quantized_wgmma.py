"""The quantized wgmma kernel (quantized weights past decode sizes on Hopper): numerics on an sm_90
GPU (skipped elsewhere: wgmma has no emulation), its refusals, and its CUDA sources (sm_90a: no
spills, and no wgmma batch that ptxas serializes).

References are float64 products with the weights rounded once to x's 16-bit type (what the A
fragments hold); the errors left are the output's rounding. Cases cover every axis at least once:
int4 / int8 / fp8, zeros or not, groups of 32 (two a slot), 64, 128 and per column, both 16-bit
types, scales of another type (the float path), M, N and K ragged against every tile, x
column-major and 2-byte aligned, two A tiles a warpgroup, one and two warpgroups, 64 and 128 rows
of K a slot, up to 256 rows a cube, two and three A buffers, k_split, split K (prepacked, ragged),
a batch and a fused epilogue. Cases pin the knobs they are about (the selector's preset fills in the
others) and check that the config holds them."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from cuda_compile import compile_jobs, jobs_by_suffix, nvcc_or_skip, prefetched, spill_problems_of
from gemm_engine.algorithms import REGISTRY
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BFLOAT16, FLOAT16, FLOAT32
from gemm_engine.epilogue.activations import resolve_activation
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.quant import WeightFormat, quantize
from helpers import BF16, TOLERANCE, np_dtype, rel_error


def _hopper_or_skip(engine):
    cc = engine.device.compute_capability
    if engine.backend != "cuda" or cc is None or cc[0] != 9:
        pytest.skip("wgmma runs on CUDA sm_90 only (the sources are compile-checked below)")


def weight(rng, k, n):
    return rng.standard_normal((k, n)) * rng.uniform(0.05, 20.0, size=(k, 1))


#: (format, symmetric, group, M, K, N, dtype, knobs)
CASES = [
    ("int4", False, 128, 256, 1024, 256, "bfloat16", {}),                        # whole tiles
    ("int4", True, 128, 100, 300, 200, "float16", {}),                           # every axis ragged
    ("int4", False, 32, 37, 200, 130, "bfloat16", {}),                           # two groups a slot
    ("int4", True, None, 300, 257, 129, "bfloat16", dict(a_tiles=2, block_k=64)),  # per column, tokens 128 x 3
    ("int4", False, 64, 64, 512, 320, "bfloat16", dict(warpgroups=1, stages=3, a_buffers=2)),
    ("int8", False, 64, 130, 448, 196, "bfloat16", {}),
    ("int4", False, 32, 96, 600, 200, "bfloat16", dict(block_k=128)),             # four groups a slot
    ("int4", False, 32, 64, 700, 136, "bfloat16", dict(block_k=128, k_split=2)),  # two warpgroups a column tile
    ("int4", True, 128, 200, 520, 130, "float16", dict(k_split=2, warpgroups=2, a_buffers=2)),
    ("fp8_e4m3", True, None, 64, 300, 72, "bfloat16", dict(block_k=128, k_split=2, layout="prepacked")),
    ("int8", True, 256, 64, 700, 136, "float16", dict(block_k=128, layout="prepacked")),
    ("int8", True, None, 64, 130, 72, "float16", dict(tokens=96)),
    ("fp8_e4m3", True, 128, 200, 640, 136, "bfloat16", {}),
    ("fp8_e4m3", True, None, 33, 100, 64, "float16", {}),
    ("int4", False, 128, 80, 384, 192, "bfloat16", dict(scales="float16")),      # the float path
    ("int8", True, 32, 70, 200, 100, "float16", dict(scales="bfloat16")),
    ("int4", False, 128, 256, 600, 300, "bfloat16", dict(layout="prepacked")),
    ("int8", False, 64, 48, 256, 100, "float16", dict(layout="prepacked")),
    ("fp8_e4m3", True, 32, 160, 320, 64, "bfloat16", dict(layout="prepacked", scales="float16")),
    # Knobs pinned where the selector's preset would fill in others: the tilings auto takes past
    # 128 rows (64 rows of K a slot, two warpgroups, up to 256 rows a cube) and the third A buffer.
    ("int4", False, 128, 256, 1000, 300, "bfloat16", dict(tokens=256, warpgroups=2, block_k=64, stages=4)),
    ("int4", True, 32, 150, 333, 140, "float16", dict(tokens=160, warpgroups=2, block_k=64, layout="prepacked")),
    ("int8", False, 64, 64, 640, 136, "bfloat16", dict(a_buffers=3, stages=5, block_k=64)),
    ("int4", False, 64, 100, 900, 129, "bfloat16", dict(a_buffers=3, stages=5, block_k=128, tokens=128)),
    # A producer warpgroup issuing the copies on mbarriers (global_/quantized_wgmma_roles.py): both
    # packed layouts, every format, ragged axes, 128 rows of K a slot, three A buffers, the float path.
    ("int4", False, 128, 256, 1000, 300, "bfloat16", dict(tokens=256, warpgroups=2, block_k=64, producer=1,
                                                           layout="prepacked")),
    ("int4", True, 32, 150, 334, 140, "float16", dict(tokens=160, warpgroups=2, block_k=64, producer=1)),  # 4-byte x rows
    ("int4", False, None, 77, 1100, 200, "bfloat16", dict(tokens=96, warpgroups=2, block_k=128, stages=3,
                                                          producer=1, layout="prepacked")),
    ("int8", False, 64, 200, 640, 136, "bfloat16", dict(warpgroups=2, block_k=64, producer=1, layout="prepacked")),
    ("fp8_e4m3", True, None, 100, 300, 200, "float16", dict(warpgroups=2, block_k=64, producer=1)),
    ("int4", False, 128, 300, 700, 260, "bfloat16", dict(tokens=128, warpgroups=2, block_k=64, stages=5, a_buffers=3,
                                                           producer=1, scales="float16")),
    ("int8", True, None, 60, 900, 300, "float16", dict(tokens=64, warpgroups=2, block_k=128, stages=4, producer=1,
                                                       layout="prepacked")),     # the narrow rule's tiling
]

#: The knobs of a case that must come back in the level's config as given (not the preset's).
PINNED = ("tokens", "warpgroups", "block_k", "stages", "a_buffers", "a_tiles", "k_split", "producer")


def run(engine, rng, kind, symmetric, group, m, k, n, dtype, algorithm="quantized_wgmma", scales=None,
        x_layout="row", batch=(), epilogue=None, layout="k_packed", **knobs):
    if dtype == "bfloat16" and BF16 is None:
        pytest.skip("bfloat16 needs ml_dtypes")
    q = quantize(weight(rng, k, n), kind, group, symmetric, scale_dtype=scales or dtype)
    q = q.prepack() if layout == "prepacked" else q
    x = rng.standard_normal((*batch, m, k)).astype(np_dtype(dtype))
    if x_layout == "col":
        x = np.asfortranarray(x)
    alg = REGISTRY[algorithm](**knobs)
    out = np.full((*batch, m, n), np.nan, np_dtype(dtype))          # poisoned: unwritten elements fail
    y = engine.quantized_matmul(x, q, algorithm=alg, out=out, **(epilogue or {}))
    assert engine.last_choice[0].name == algorithm
    g = engine.last_choice[1].batch.global_
    assert all(getattr(g, key) == knobs[key] for key in PINNED if key in knobs), g
    ref = np.asarray(x, np.float64) @ q.dequantize(rounded_to=dtype).astype(np.float64)
    if epilogue:
        ref = ref + np.asarray(epilogue["bias"], np.float64)
    got = np.asarray(y)
    assert not np.isnan(got.astype(np.float64)).any()
    err = rel_error(got, ref)
    assert err <= TOLERANCE[dtype], f"relative error {err:.3e}"
    return engine.last_choice[1].batch.global_


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c[:7]) + "".join(
    f"-{k}{v}" for k, v in c[7].items()))
def test_quantized_wgmma(engine, rng, case):
    _hopper_or_skip(engine)
    *args, knobs = case
    run(engine, rng, *args, **knobs)


def test_split_k_column_major_x_batch_and_bias(engine, rng):
    _hopper_or_skip(engine)
    run(engine, rng, "int4", False, 128, 64, 4096, 256, "bfloat16", "quantized_wgmma_split_k", split_k=4)
    assert engine.last_choice[1].batch.splits == 4
    # split K: prepacked (auto's path for QuantizedLinear), groups per step, a ragged last range;
    # and with two warpgroups a column tile
    run(engine, rng, "int4", False, 32, 64, 4296, 136, "bfloat16", "quantized_wgmma_split_k", layout="prepacked",
        split_k=4)
    run(engine, rng, "int8", True, 64, 96, 3000, 72, "float16", "quantized_wgmma_split_k", split_k=3, k_split=2, producer=0,
        block_k=128)
    g = run(engine, rng, "int4", True, 64, 128, 320, 136, "float16", x_layout="col")
    assert g.x_layout.mn_major
    run(engine, rng, "int8", False, 64, 40, 192, 72, "bfloat16", batch=(3,))
    bias = rng.standard_normal(200).astype(np.float32)
    run(engine, rng, "int4", False, 128, 96, 256, 200, "bfloat16", epilogue={"bias": bias})


def test_producer_split_k_column_major_x_batch_and_bias(engine, rng):
    """The producer warpgroup's form under the split-K fixup (its units run the fixup's barriers
    too), with a column-major x, a batch and a fused bias."""
    _hopper_or_skip(engine)
    knobs = dict(warpgroups=2, block_k=64, producer=1)
    run(engine, rng, "int4", False, 128, 256, 4296, 136, "bfloat16", "quantized_wgmma_split_k", layout="prepacked",
        split_k=3, **knobs)
    assert engine.last_choice[1].batch.splits == 3
    g = run(engine, rng, "int4", True, 64, 128, 320, 136, "float16", x_layout="col", **knobs)
    assert g.x_layout.mn_major and g.producer
    run(engine, rng, "int8", False, 64, 40, 192, 72, "bfloat16", batch=(3,), **knobs)
    run(engine, rng, "int4", False, 128, 100, 9000, 200, "bfloat16", "quantized_wgmma_split_k", layout="prepacked",
        split_k=4, tokens=128, block_k=128, stages=4, **{k: v for k, v in knobs.items() if k != "block_k"})
    bias = rng.standard_normal(200).astype(np.float32)
    run(engine, rng, "int4", False, 128, 96, 256, 200, "bfloat16", epilogue={"bias": bias}, **knobs)


def test_unaligned_x_takes_the_register_path(engine, rng):
    """x rows starting at odd elements (a device view: a host array is uploaded aligned): the
    copies go through registers (2-byte pieces)."""
    _hopper_or_skip(engine)
    cp = pytest.importorskip("cupy")
    q = quantize(weight(rng, 128, 64), "int4", 64, False, scale_dtype="float16")
    x = rng.standard_normal((70, 129)).astype(np.float16)
    out = cp.full((70, 64), cp.nan, cp.float16)
    y = engine.quantized_matmul(cp.asarray(x)[:, 1:], q, algorithm=REGISTRY["quantized_wgmma"](), out=out)
    assert engine.last_choice[1].batch.global_.lhs_loader.registers
    ref = x[:, 1:].astype(np.float64) @ q.dequantize(rounded_to="float16").astype(np.float64)
    assert rel_error(cp.asnumpy(y), ref) <= TOLERANCE["float16"]


@pytest.mark.parametrize("kind, group, layout", [("int4", 128, "k_packed"), ("int4", 32, "prepacked"),
                                                 ("int8", None, "k_packed"), ("int8", 64, "prepacked"),
                                                 ("fp8_e4m3", 64, "k_packed"), ("fp8_e4m3", None, "prepacked")])
def test_each_weight_rounded_once_exactly(engine, rng, kind, group, layout):
    """One-hot rows of x pick rows of the weight: each output must be the weight as
    ``dequantize(rounded_to=...)`` gives it, bit for bit (fp8 subnormal codes included)."""
    _hopper_or_skip(engine)
    if BF16 is None:
        pytest.skip("bfloat16 needs ml_dtypes")
    k, n, m = 256, 136, 256          # every row of K picked once
    w = rng.standard_normal((k, n)) * np.logspace(-4, 0, k)[rng.permutation(k)][:, None]
    q = quantize(w, kind, group, kind != "int4", scale_dtype="bfloat16")
    q = q.prepack() if layout == "prepacked" else q
    rows = rng.permutation(k)[:m]
    x = np.zeros((m, k), BF16)
    x[np.arange(m), rows] = 1
    y = engine.quantized_matmul(x, q, algorithm=REGISTRY["quantized_wgmma"]())
    assert engine.last_choice[1].batch.global_.fast_pairs
    want = q.dequantize(rounded_to="bfloat16")[rows].astype(np.float64)
    got = np.asarray(y).astype(np.float64)
    assert np.array_equal(got, want), np.argwhere(got != want)[:5]


def _problem(m=256, n=4096, k=4096, et=BFLOAT16, fmt=WeightFormat("int4", 128, scale="bf16_bits"), align=8,
             layout=Layout.ROW):
    return MatmulProblem(1, m, n, k, et, et, et, lhs_align=align, weights=fmt, lhs_layout=layout)


@pytest.mark.parametrize("problem, knobs, words", [
    (_problem(et=FLOAT32), {}, "16-bit"),
    (_problem(fmt=None), {}, "quantized weights"),
    (_problem(fmt=WeightFormat("int4", 48, scale="bf16_bits")), {}, "group_size=48"),
    (_problem(), dict(tokens=48), "multiple of 32"),
    (_problem(), dict(tokens=256, a_tiles=2), "accumulators"),
    (_problem(), dict(a_tiles=3), "a_tiles=3"),
    (_problem(), dict(warpgroups=3), "at most 2"),
    (_problem(), dict(stages=2), "stages=2"),
    (_problem(), dict(block_k=96), "block_k=96"),
    (_problem(), dict(k_split=3), "k_split=3"),
    (_problem(), dict(k_split=2, warpgroups=2, tokens=256, stages=3), "at most 128 registers"),
    (_problem(), dict(a_tiles=4, tokens=64, block_k=128), "registers"),
    (_problem(), dict(k_split=2, warpgroups=2, a_tiles=2, tokens=64, block_k=64, stages=3), "cannot hold"),
    (_problem(fmt=WeightFormat("int4", 96, scale="bf16_bits")), dict(block_k=128, k_split=2), "group_size=96"),
    (_problem(fmt=WeightFormat("int4", 192, scale="bf16_bits")), dict(block_k=128), "group_size=192"),
    (_problem(m=64), dict(stages=3, a_buffers=3), "stages=3"),
    (_problem(), dict(a_buffers=4), "a_buffers=4"),
    (_problem(layout=Layout.COL), dict(tokens=96), "atoms of 64"),
    (_problem(), dict(stages=12), "shared memory"),
    (_problem(), dict(producer=1, warpgroups=1), "warpgroups=1"),
    (_problem(), dict(producer=1, warpgroups=2, k_split=2, tokens=64), "k_split=2"),
    (_problem(align=1), dict(producer=1, warpgroups=2), "4-byte aligned"),
    (_problem(), dict(producer=2, warpgroups=2), "producer=2"),
])
def test_refusals(problem, knobs, words):
    with pytest.raises(SetupError, match=words):
        REGISTRY["quantized_wgmma"](**knobs).setup(problem, dialect_for(nominal_cuda_device(9, 0)))


def test_refused_off_hopper():
    for cc in ((8, 0), (10, 0)):
        with pytest.raises(SetupError, match="wgmma"):
            REGISTRY["quantized_wgmma"]().setup(_problem(), dialect_for(nominal_cuda_device(*cc)))


# -- CUDA sources ----------------------------------------------------------------------------------
SOURCE_CASES = [
    ("quantized_wgmma", "int4", 128, True, 256, "bfloat16", Layout.ROW, dict(tokens=256, warpgroups=2, block_k=64,
                                                                           stages=4)),
    ("quantized_wgmma", "int4", 32, False, 64, "float16", Layout.ROW, dict(a_buffers=3, stages=5)),
    ("quantized_wgmma", "int4", 0, True, 1000, "bfloat16", Layout.ROW, dict(a_tiles=2, block_k=64)),
    ("quantized_wgmma", "int8", 64, False, 128, "bfloat16", Layout.ROW, {}),
    ("quantized_wgmma", "fp8_e4m3", 128, False, 200, "float16", Layout.COL, {}),
    ("quantized_wgmma_split_k", "int4", 128, False, 64, "bfloat16", Layout.ROW, {}),
    ("quantized_wgmma", "int4", 128, False, 96, "bfloat16", Layout.ROW, dict(scales="f16_bits", a_buffers=2)),
    ("quantized_wgmma", "int4", 128, False, 256, "bfloat16", Layout.ROW, dict(layout="prepacked")),
    ("quantized_wgmma", "int8", 0, True, 128, "float16", Layout.ROW, dict(layout="prepacked", a_tiles=2, block_k=64,
                                                                          stages=4)),
    ("quantized_wgmma", "int4", 128, False, 64, "bfloat16", Layout.ROW, dict(block_k=128, k_split=2)),
    ("quantized_wgmma", "int8", 64, False, 200, "float16", Layout.COL, dict(k_split=2, warpgroups=2, block_k=64)),
    ("quantized_wgmma", "int4", 128, True, 256, "bfloat16", Layout.ROW, dict(tokens=256, warpgroups=2, block_k=128,
                                                                          stages=3, producer=1, layout="prepacked")),
    ("quantized_wgmma", "int8", 0, False, 200, "float16", Layout.COL, dict(warpgroups=2, block_k=64, producer=1)),
    ("quantized_wgmma_split_k", "int4", 128, True, 256, "bfloat16", Layout.ROW, dict(warpgroups=2, producer=1)),
]


def cuda_sources() -> dict:
    out = {}
    d = dialect_for(nominal_cuda_device(9, 0))
    for name, kind, group, zeros, m, dtype, layout, knobs in SOURCE_CASES:
        knobs = dict(knobs)
        et = {"bfloat16": BFLOAT16, "float16": FLOAT16}[dtype]
        scale = knobs.pop("scales", "bf16_bits" if dtype == "bfloat16" else "f16_bits")
        words = knobs.pop("layout", "k_packed")
        fmt = WeightFormat(kind, group, zeros and kind != "fp8_e4m3", scale, words)
        alg = REGISTRY[name](**knobs)
        cfg = alg.setup(_problem(m=m, n=4096 + 40, k=4096 + 72, et=et, fmt=fmt, layout=layout), d)
        mark = "-producer" if knobs.get("producer") else ""
        out[f"{name}-{kind}-{group}-{m}-{dtype}-{layout.value}-{scale}-{words}{mark}-sm90"] = alg.render(cfg, d)
    return out


def _jobs():
    return jobs_by_suffix(cuda_sources())


@prefetched(_jobs)
def test_cuda_sources_compile_without_spills_or_serialized_batches():
    results = compile_jobs(_jobs(), nvcc_or_skip())
    problems = spill_problems_of(results)
    assert not problems, "\n\n".join(f"{k}: {v[-1500:]}" for k, v in list(problems.items())[:3])
    # ptxas's C7513 / C7511: "wgmma.mma_async instructions are serialized" (a wait after every
    # instruction), for registers defined inside a batch's pipeline stage / too few registers.
    serialized = [name for (name, _), c in results.items() if "C7513" in c.log or "C7511" in c.log]
    assert not serialized, serialized


def test_cuda_source_structure():
    src = cuda_sources()["quantized_wgmma-int4-128-256-bfloat16-row-bf16_bits-k_packed-sm90"]
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in src
    assert src.count("ptx_wgmma_rs_m64n256k16_f32_bf16_t0(") == 1 + 3 * 4     # definition + 3 blocks (2 in the loop) x 4 steps
    small = cuda_sources()["quantized_wgmma-int4-32-64-float16-row-f16_bits-k_packed-sm90"]   # 3 buffers, 2 pending
    assert "wgmma.wait_group.sync.aligned 2;" in small and small.count("ptx_wgmma_rs_m64n64k16_f32_f16_t0(") == 1 + 5 * 8   # 128 rows of K a slot
    assert "wgmma.wait_group.sync.aligned 2;" not in src
    assert "cp.async.cg.shared.global" in src and "ptx_dequant_pair_bf16(" in src
    assert "wgmma.wait_group.sync.aligned 1;" in src
    col = cuda_sources()["quantized_wgmma-fp8_e4m3-128-200-float16-col-f16_bits-k_packed-sm90"]
    assert "k16_f32_f16_t1(" in col                        # x N-major: imm-trans-b
    # the producer warpgroup: its copies complete on mbarriers, the registers move to the consumers
    prod = cuda_sources()["quantized_wgmma-int4-128-256-bfloat16-row-bf16_bits-prepacked-producer-sm90"]
    assert "cp.async.mbarrier.arrive.noinc" in prod and "cp.async.mbarrier" not in src
    assert "LAUNCH_BOUNDS_MIN(384, 1)" in prod and "setmaxnreg.inc.sync.aligned.u32 224" in prod
    # the cube meets once, after the barriers' initialization: no barrier a slot
    assert prod.split("gemm_engine_kernel(")[1].count("SYNC_CUBE()") == 1
    # prepacked int4: the lane's pair one shift and one lop3 (mask and magic) away
    pre = cuda_sources()["quantized_wgmma-int4-128-256-bfloat16-row-bf16_bits-prepacked-sm90"]
    assert "ptx_dequant_pair_bf16_m000f000f_43004300(" in pre and "4 * qw_t" in pre


def test_auto_takes_the_wgmma_kernel_between_decode_and_prefill():
    """The measured rules (selector/quantized_wgmma.py): one warpgroup up to 128 rows; two for 256-row
    cubes that cover the units; 128-row cubes over a short K where they do not; K in 4 ranges over a
    long K with few cubes; the decode kernel below 48 rows; the dequantizing pass past 512 rows (but
    for one wave of 256-row cubes, to 1024) and past 256 rows where only the split form would fill
    the device."""
    d = dialect_for(nominal_cuda_device(9, 0))
    fmt = WeightFormat("int4", 128, True, "bf16_bits", "prepacked")

    def pick(m, n, k, f=fmt):
        cfg = REGISTRY["auto"]().setup(_problem(m=m, n=n, k=k, fmt=f), d)
        g = cfg.batch.global_
        return (cfg.algorithm.rsplit(".", 1)[1], getattr(g, "tokens", None), getattr(g, "warpgroups", None),
                getattr(cfg.batch, "splits", None), getattr(g, "block_k", None))

    def producer(m, n, k, f=fmt):
        return REGISTRY["auto"]().setup(_problem(m=m, n=n, k=k, fmt=f), d).batch.global_.producer

    # cubes of up to 128 rows: two warpgroups with the producer where they cover 0.6 of the units, and
    # in the split form; else one warpgroup
    assert pick(64, 14336, 4096) == ("QuantizedWgmmaAlgorithm", 64, 2, None, 128) and producer(64, 14336, 4096)
    assert pick(64, 8192, 8192) == ("QuantizedWgmmaAlgorithm", 64, 1, None, 128)
    # Two warpgroups a cube take the producer warpgroup (128 rows of K a slot for 4-bit codes).
    assert pick(256, 14336, 4096) == ("QuantizedWgmmaAlgorithm", 256, 2, None, 128) and producer(256, 14336, 4096)
    int8 = WeightFormat("int8", 0, False, "bf16_bits", "prepacked")
    assert pick(256, 14336, 4096, int8) == ("QuantizedWgmmaAlgorithm", 256, 2, None, 64)
    assert producer(256, 14336, 4096, int8) and not producer(64, 8192, 8192)
    # 8-bit codes: the narrow cubes' producer only in the split form
    assert pick(64, 14336, 4096, int8) == ("QuantizedWgmmaAlgorithm", 64, 1, None, 128)
    assert pick(128, 4096, 14336, int8) == ("QuantizedWgmmaSplitKAlgorithm", 128, 2, 4, 128)
    assert pick(256, 4096, 4096) == ("QuantizedWgmmaAlgorithm", 128, 1, None, 128)
    assert pick(64, 4096, 14336) == ("QuantizedWgmmaSplitKAlgorithm", 64, 2, 4, 128)
    assert pick(128, 4096, 14336) == ("QuantizedWgmmaSplitKAlgorithm", 128, 2, 4, 128)
    assert pick(256, 4096, 14336) == ("QuantizedWgmmaSplitKAlgorithm", 256, 2, 4, 64) and producer(256, 4096, 14336)
    assert pick(40, 4096, 4096)[0].startswith("QuantizedDecode")
    assert pick(48, 28672, 4096) == ("QuantizedWgmmaAlgorithm", 64, 2, None, 128)
    assert pick(200, 8192, 8192) == ("QuantizedWgmmaAlgorithm", 128, 1, None, 128)
    assert pick(512, 4096, 14336)[0] == pick(1024, 14336, 4096)[0] == "DequantizedSpecializedWgmmaAlgorithm"
    assert pick(512, 14336, 4096) == ("QuantizedWgmmaAlgorithm", 256, 2, None, 128)
    # Past 512 rows only one wave of the producer form's cubes (128 on 132 units), not more.
    assert pick(1024, 4096, 4096) == pick(1024, 4096, 14336) == ("QuantizedWgmmaAlgorithm", 256, 2, None, 128)
    assert pick(2048, 4096, 4096)[0] == pick(1024, 2048, 4096)[0] == "DequantizedSpecializedWgmmaAlgorithm"


@pytest.mark.parametrize("name", ["quantized_wgmma", "quantized_decode"])
def test_gated_epilogue_refused_by_the_quantized_levels(name):
    """Both levels store each accumulator alone: a gated activation (two columns a result) is a
    SetupError naming the level, not a wrong product."""
    problem = replace(_problem(m=64), epilogue=Epilogue(activation=resolve_activation("swiglu")))
    with pytest.raises(SetupError, match="stores element by element"):
        REGISTRY[name]().setup(problem, dialect_for(nominal_cuda_device(9, 0)))


def test_grouped_quantized_experts_keep_their_measured_tilings():
    """The narrow cubes' producer preset is the dense problems': quantized experts of about 128 rows
    a group keep one warpgroup (with it, their level's 256-token cubes in four slots did not fit,
    and auto fell through to a kernel 9-20x slower on the H200); at prefill (512 rows a group) the
    two-warpgroup cubes take the producer (Mixtral up, int4: 1.28 ms against 1.40)."""
    from gemm_engine.problem import Groups
    d = dialect_for(nominal_cuda_device(9, 0))
    fmt = WeightFormat("int4", 128, True, "bf16_bits", "prepacked")

    def pick(groups, m, n, k):
        problem = MatmulProblem(groups, m, n, k, BFLOAT16, BFLOAT16, BFLOAT16, lhs_align=8, weights=fmt,
                                groups=Groups("contiguous"))
        cfg = REGISTRY["grouped"]().setup(problem, d)
        g = cfg.batch.global_
        return cfg.algorithm.rsplit(".", 1)[1], g.warpgroups, g.block_k, g.stages, g.producer

    assert pick(8, 1024, 14336, 4096) == pick(64, 8192, 2816, 2048) == ("GroupedQuantizedWgmmaAlgorithm", 1, 128, 3,
                                                                         False)
    assert pick(8, 4096, 14336, 4096) == ("GroupedQuantizedWgmmaAlgorithm", 2, 128, 3, True)


def test_producer_only_where_x_rows_are_4_byte_aligned():
    """x with rows not 4-byte aligned goes through the copying units' registers, which the producer
    form lacks: the presets keep the copying form there (by name and under auto), and past 512 rows
    the dequantizing pass; the register split is checked against the launch's entry share."""
    from types import SimpleNamespace
    from gemm_engine.global_.quantized_wgmma_roles import check_register_split
    d = dialect_for(nominal_cuda_device(9, 0))
    for m in (64, 256):
        cfg = REGISTRY["quantized_wgmma"]().setup(_problem(m=m, n=14336, k=4096, et=FLOAT16,
                                                           fmt=WeightFormat("int4", 128, scale="f16_bits"), align=1), d)
        assert not cfg.batch.global_.producer
    aligned = REGISTRY["quantized_wgmma"]().setup(_problem(m=256, n=14336, k=4096), d)
    assert aligned.batch.global_.producer
    unaligned = _problem(m=1024, n=4096, k=4096, align=1)
    assert REGISTRY["auto"]().setup(unaligned, d).algorithm.endswith("DequantizedSpecializedWgmmaAlgorithm")
    check_register_split("level", SimpleNamespace(producer=True, units=384, consumer_units=256))
    with pytest.raises(SetupError, match="take"):
        check_register_split("level", SimpleNamespace(producer=True, units=512, consumer_units=384))
