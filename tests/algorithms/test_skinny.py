"""The ``skinny`` algorithm (M = 1 or N = 1): numerics against a float64 reference on every
backend, its refusals, its choice by ``auto``, and its CUDA sources.

Each distinct kernel costs a compile (about 1.5 s on PoCL), so the cases are chosen to cover the
axes with few kernels: every dtype x reduction shape (dot / split-K) x orientation (M = 1 / N = 1)
once, alternating vector and scalar (unaligned) reads; then K and the output extent swept in
float32; then numpy's 1-D and broadcast-batch forms through the public API.
"""
from __future__ import annotations

import numpy as np
import pytest

from cuda_compile import compile_all, jobs_of, nvcc_or_skip, prefetched
from gemm_engine.algorithms import REGISTRY, resolve
from gemm_engine.selector.rules import RULES
from gemm_engine.algorithms.skinny import SkinnyAlgorithm, SkinnySelection, SkinnySplitKAlgorithm
from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem
from helpers import DTYPES, TOLERANCE, assert_close, random, reference, rel_error
from device_runs import run_device
from skinny_runs import run_raw

# -- every dtype x reduction shape x orientation ----------------------------------------------------
#: (M = 1?, big operand's layout): M = 1 with a row-major rhs and N = 1 with a column-major lhs are
#: split-K (contiguous along the outputs); the other two are dot products (contiguous along K).
MODES = [(True, "row"), (True, "col"), (False, "row"), (False, "col")]
ORDER = ["bfloat16", "float16", "float32", "float64"]


@pytest.mark.parametrize("dtype", [d for d in ORDER if d in DTYPES])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: f"{'m1' if m[0] else 'n1'}-{m[1]}")
def test_dtypes_and_layouts(engine, rng, dtype, mode):
    m1, big = mode
    # Checkerboard over (dtype, mode): every dtype gets vector and scalar reads in both reduction
    # shapes. Scalar cases are unaligned (pad 1), odd-sized, batched with a broadcast operand, and
    # read the vector strided; vector cases have 16-byte-aligned rows and sizes divisible by 8.
    scalar = (ORDER.index(dtype) + MODES.index(mode)) % 2 == 1
    pad = 1 if scalar else 0
    k, extent = (4097, 257) if scalar else (1000, 1000)
    small = "col" if scalar else "row"
    if m1:
        a = random(rng, (1, 1, k), dtype)
        b = random(rng, (2 if scalar else 1, k, extent), dtype)
        layouts = (small, big)
    else:
        a = random(rng, (2 if scalar else 1, extent, k), dtype)
        b = random(rng, (1, k, 1), dtype)
        layouts = (big, small)
    result, cfg = run_raw(engine, a, b, layouts, pad)
    assert cfg.dot == ((big == "col") == m1)
    assert cfg.big.width == (1 if scalar else 16 // a.dtype.itemsize)
    assert_close(result, a, b, dtype)


# -- K and the output extent (float32, the public API on device arrays, poisoned out=) --------------
#: Every K and every output extent once, in few kernels (the 1-D forms below reuse two of them).
SPLIT = [(1, 1000), (7, 3), (1000, 33), (4097, 257)]     # (K, N) with M = 1
DOT = [(1, 33), (7, 1), (64, 257), (4097, 1000)]         # (K, M) with N = 1


@pytest.mark.parametrize("m1,k,extent", [(True, *s) for s in SPLIT] + [(False, *s) for s in DOT])
def test_k_and_extent(engine, rng, m1, k, extent):
    m, n = (1, extent) if m1 else (extent, 1)
    a, b = random(rng, (m, k), "float32"), random(rng, (k, n), "float32")
    assert_close(run_device(engine, a, b, ("row", "row"), "skinny"), a, b, "float32")


def test_deterministic(engine, rng):
    a, b = random(rng, (1, 1000), "float32"), random(rng, (1000, 33), "float32")
    first = run_device(engine, a, b, ("row", "row"), "skinny")
    second = run_device(engine, a, b, ("row", "row"), "skinny")
    assert first.tobytes() == second.tobytes()


# -- numpy's 1-D and broadcast forms ----------------------------------------------------------------
@pytest.mark.parametrize("a_shape,b_shape", [
    ((1000,), (1000, 33)),        # vector @ matrix
    ((257, 64), (64,)),           # matrix @ vector
    ((1000,), (1000,)),           # vector @ vector: a scalar
    ((3, 1, 1000), (1000, 33)),   # batched rows, shared matrix
    ((1000,), (3, 1000, 33)),     # shared vector, batched matrices
    ((3, 257, 64), (64,)),        # batched matrices, shared vector
], ids=str)
def test_numpy_forms(engine, rng, a_shape, b_shape):
    a, b = random(rng, a_shape, "float32"), random(rng, b_shape, "float32")
    result = engine.matmul(a, b, algorithm="skinny")
    assert np.shape(result) == np.matmul(a, b).shape
    assert_close(result, a, b, "float32")


def test_auto_takes_skinny_for_m_or_n_one(engine, rng):
    a, b = random(rng, (1, 1000), "float32"), random(rng, (1000, 33), "float32")
    assert_close(engine.matmul(a, b), a, b, "float32")
    assert engine.last_choice[0].name == "skinny"
    c, v = random(rng, (257, 64), "float32"), random(rng, (64,), "float32")
    assert_close(engine.matmul(c, v), c, v, "float32")
    assert engine.last_choice[0].name == "skinny"
    # Anything else falls through to the next variant (set up only: no compile needed).
    p = MatmulProblem(1, 2, 33, 64, F32, F32, F32)
    auto = resolve("auto")
    assert auto.chosen(auto.setup(p, engine.dialect)).name != "skinny"


def test_fused_epilogue(engine, rng):
    """Outputs leave through `GlobalMatmul.store`, so the problem's epilogue applies."""
    x, w = random(rng, (1, 1000), "float32"), random(rng, (1000, 33), "float32")
    bias = random(rng, (33,), "float32")
    result = engine.matmul(x, w, bias=bias, activation="relu", algorithm="skinny")
    assert engine.last_choice[0].name == "skinny"
    assert rel_error(result, np.maximum(reference(x, w) + bias, 0)) <= TOLERANCE["float32"]


# -- setup (no device) ------------------------------------------------------------------------------
H100 = dialect_for(nominal_cuda_device(9, 0))
F32, BF16 = BY_NAME["float32"], BY_NAME["bfloat16"]


def problem(m, n, k, et=BF16, lhs="row", rhs="row", align=8, batch=1):
    return MatmulProblem(batch, m, n, k, et, et, et, Layout(lhs), Layout(rhs), align, align)


@pytest.mark.parametrize("m,n", [(17, 17), (64, 64), (17, 8192)])
def test_refuses_other_shapes(m, n):
    with pytest.raises(SetupError, match="M or N at most 16") as info:
        SkinnyAlgorithm().setup(problem(m, n, 64), H100)
    assert info.value.component == "skinny_global"


def test_refuses_integer_operands():
    i8, i32 = BY_NAME.get("int8"), BY_NAME.get("int32")
    if i8 is None:
        pytest.skip("no int8 element type")
    p = MatmulProblem(1, 1, 64, 64, i8, i8, i32)
    with pytest.raises(SetupError, match="floating-point"):
        SkinnyAlgorithm().setup(p, H100)


@pytest.mark.parametrize("selection,match", [
    (SkinnySelection(units=100, outputs=64), "outputs"),
    (SkinnySelection(outputs=12), "outputs"),
    (SkinnySelection(unroll=-1), "unroll"),
    (SkinnySelection(units=2048), "units"),
    (SkinnySelection(chunk_k=100), "chunk_k"),
    (SkinnySelection(dispatch="nope"), "dispatch"),
])
def test_refuses_bad_selections(selection, match):
    with pytest.raises(SetupError, match=match):
        SkinnyAlgorithm(selection).setup(problem(1, 8192, 8192), H100)


def test_bandwidth_tiling_for_bf16_vector_matrix():
    """bf16 1 x 8192 x 8192 (row-major W) on an H100: split-K, 16-byte loads, 32 outputs (4 groups
    of 8) per cube of 256 units, 256 cubes for 132 SMs, all of K staged at once."""
    p = problem(1, 8192, 8192)
    alg = SkinnyAlgorithm()
    cfg = alg.setup(p, H100)
    g = cfg.batch.global_
    assert (g.dot, g.big.width, g.outputs, g.units, g.lanes, g.slices, g.chunk) == \
        (False, 8, 32, 256, 4, 64, 8192)
    assert alg.cube_count(cfg, p) == 256
    assert g.shared_memory_bytes <= 48 * 1024
    # A partial selection keeps the fields it sets and chooses the others.
    g2 = SkinnyAlgorithm(SkinnySelection(unroll=4)).setup(p, H100).batch.global_
    assert (g2.unroll, g2.outputs, g2.units) == (4, 32, 256)


def test_dot_tiling_for_matrix_vector():
    g = SkinnyAlgorithm().setup(problem(8192, 1, 8192), H100).batch.global_
    assert (g.dot, g.big.width, g.lanes, g.outputs, g.units) == (True, 8, 16, 16, 256)
    g = SkinnyAlgorithm().setup(problem(8192, 1, 8192, et=BY_NAME["float32"]), H100).batch.global_
    assert (g.dot, g.big.width, g.lanes, g.outputs, g.units) == (True, 4, 32, 8, 256)


def test_kernels_have_no_atomics_and_vector_loads():
    alg = SkinnyAlgorithm()
    for p in (problem(1, 8192, 8192), problem(8192, 1, 8192), problem(1, 8192, 8192, rhs="col")):
        src = alg.render(alg.setup(p, H100), H100)
        assert "atomic" not in src
        assert "float4" in src


def test_registered_and_first_in_auto():
    assert REGISTRY["skinny"] is SkinnyAlgorithm
    assert REGISTRY["skinny_split_k"] is SkinnySplitKAlgorithm
    assert [rule.algorithm for rule in RULES][:2] == ["skinny_split_k", "skinny"]
    cfg = resolve("auto").setup(problem(1, 300, 64), H100)
    assert cfg.algorithm.endswith(".SkinnyAlgorithm")
    # A big operand (16 MiB up) contiguous along the outputs: K split over cubes (sm_80; on Hopper one row of a
    # 16-bit weight takes the specialized kernel's decode tiles: selector/conditions.py `one_row_streams`).
    sm80 = dialect_for(nominal_cuda_device(8, 0))
    cfg = resolve("auto").setup(problem(1, 8192, 8192), sm80)
    assert cfg.algorithm.endswith(".SkinnySplitKAlgorithm")
    assert resolve("auto").setup(problem(1, 8192, 8192), H100).algorithm.endswith(".SpecializedWgmmaAlgorithm")
    # K shorter than the outputs: one launch.
    cfg = resolve("auto").setup(problem(1, 14336, 4096), sm80)
    assert cfg.algorithm.endswith(".SkinnyAlgorithm")
    # Contiguous along K: dot products of whole rows, one launch.
    cfg = resolve("auto").setup(problem(8192, 1, 8192), H100)
    assert cfg.algorithm.endswith(".SkinnyAlgorithm")


# -- skinny_split_k: K over cubes, each unit a 16-byte vector of outputs ----------------------------
def test_split_tiling_for_bf16_vector_matrix():
    """bf16 1 x 8192 x 8192 on an H100: 256 units x 8 outputs per cube (4 KiB of each K row), 4
    column cubes x 32 K ranges of 256 rows (128 cubes for 132 SMs); registers for 16 loads in
    flight per unit; each unit stores its own sums (no shared-memory partials)."""
    p = problem(1, 8192, 8192)
    alg = SkinnySplitKAlgorithm()
    cfg = alg.setup(p, H100)
    g = cfg.batch.global_
    assert (g.outputs, g.units, g.slices, g.unroll, g.chunk, cfg.batch.splits) == (2048, 256, 1, 16, 256, 32)
    assert [launch.cubes for launch in alg.launches(cfg, p)] == [128, 32]
    assert alg.workspace(cfg, p).count == 32 * 8192
    src = alg.render(cfg, H100)
    assert "LAUNCH_BOUNDS_MIN(256, 1) void gemm_engine_kernel" in src
    assert "sk_sum" not in src.split("gemm_engine_reduce")[0]
    # One slice: the unit is its own lane and the slice index the constant 0, not UNIT_ID / 256
    # beside UNIT_ID % 256 (PoCL 5.0 summed only the first K row of each range so: issue 35).
    assert "const int sk_lane = UNIT_ID;" in src and "const int sk_slice = 0;" in src
    assert "UNIT_ID / " not in src and "UNIT_ID % " not in src


def test_split_refuses_dot_shapes():
    with pytest.raises(SetupError, match="contiguous along K"):
        SkinnySplitKAlgorithm().setup(problem(8192, 1, 8192), H100)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, layouts", [
    ((1, 1, 1000, 3000), ("row", "row")),      # vector-matrix: N not a whole cube, K not whole ranges
    ((2, 1, 520, 700), ("row", "row")),        # batch
    ((1, 700, 1, 1100), ("col", "row")),       # matrix-vector with a column-major lhs
], ids=["vm", "batch", "mv"])
def test_split_numerics(engine, rng, dtype, shape, layouts):
    if dtype == "bfloat16" and layouts != ("row", "row"):
        pytest.skip("bfloat16 runs from numpy arrays (device array libraries may lack it): row-major only")
    batch, m, n, k = shape
    lead = (batch,) if batch > 1 else ()
    a, b = random(rng, lead + (m, k), dtype), random(rng, lead + (k, n), dtype)
    if dtype == "bfloat16":
        result = engine.matmul(a, b, algorithm="skinny_split_k")
    else:
        result = run_device(engine, a, b, layouts, "skinny_split_k")
    assert engine.last_choice[1].batch.splits >= 2
    assert_close(result, a, b, dtype)


def test_opencl_setup_fits_small_devices():
    d = dialect_for(DeviceInfo("opencl", "x", 1, 32768, 64, 1))
    g = SkinnyAlgorithm().setup(problem(1, 1000, 4097, F32, align=4), d).batch.global_
    assert g.units <= 64 and g.shared_memory_bytes <= 32768


def vector_read_sources() -> dict:
    alg = SkinnyAlgorithm()
    sources = {}
    for name in ("float32", "float64", "float16", "bfloat16"):
        et = BY_NAME[name]
        for m1, big in (MODES if name == "bfloat16" else [(True, "row"), (False, "row")]):
            m, n = (1, 8192) if m1 else (8192, 1)
            lhs, rhs = ("row", big) if m1 else (big, "row")
            p = problem(m, n, 8192, et, lhs, rhs, 16 // et.itemsize)
            cfg = alg.setup(p, H100)
            assert cfg.batch.global_.big.width == 16 // et.itemsize
            sources[f"{p}"] = alg.render(cfg, H100)
    return sources


@pytest.mark.nvcc
@prefetched(lambda: jobs_of(vector_read_sources()))
def test_cuda_sources_compile():
    """Vector reads in every dtype x reduction shape, and bfloat16 in every orientation too, for the
    H100 (test_cuda_sources compiles the scalar reads: its problems claim no alignment)."""
    nvcc = nvcc_or_skip()
    failures = compile_all(vector_read_sources(), nvcc)
    assert not failures, "\n\n".join(f"{k}:\n{v[-2000:]}" for k, v in list(failures.items())[:3])
