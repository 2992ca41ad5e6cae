"""DMMA algorithms (``simple_dmma``, ``pipelined_dmma``: float64 on FP64 tensor cores): setup
refusals, configs and tiling rule, the chunk loader's copy widths for 8-byte elements, nvcc compile
checks for sm_80 / sm_90a (no spills) of every loader path and edge, and CUDA numerics.

The fragment mapping itself is checked against the PTX ISA in test_dmma_fragments.py. The numerics
need CuPy and an sm_80+ GPU and skip otherwise; the compile checks need nvcc.
"""
from __future__ import annotations

import numpy as np
import pytest

from helpers import cuda_engine_or_skip, device_col_major
from cuda_compile import SM80 as SM80_FLAG, SM90A as SM90A_FLAG, compile_jobs, nvcc_or_skip, prefetched, spill_problems_of
from gemm_engine.algorithms import REGISTRY, PlaneSelection
from gemm_engine.selector.rules import RULES
from gemm_engine.algorithms.dmma import (DmmaSelection, PipelinedDmmaAlgorithm, PipelinedDmmaSelection,
                                         SimpleDmmaAlgorithm)
from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BFLOAT16, FLOAT16, FLOAT32, FLOAT64
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem

SM80, SM90 = dialect_for(nominal_cuda_device(8, 0)), dialect_for(nominal_cuda_device(9, 0))
ROW, COL = Layout.ROW, Layout.COL
ALGORITHMS = [SimpleDmmaAlgorithm, PipelinedDmmaAlgorithm]


def problem(shape=(1, 256, 256, 64), lhs=ROW, rhs=ROW, align=(2, 2), et=FLOAT64, precision="default"):
    return MatmulProblem(*shape, et, et, et, lhs, rhs, *align, precision=precision)


def opencl_dialect():
    return dialect_for(DeviceInfo(backend="opencl", name="nominal opencl", compute_units=16,
                                  max_shared_memory=65536, max_threads_per_cube=1024, plane_size=32))


# -- setup --------------------------------------------------------------------------------------------
def test_registered_and_auto_takes_pipelined_dmma_for_float64():
    assert REGISTRY["simple_dmma"] is SimpleDmmaAlgorithm
    assert REGISTRY["pipelined_dmma"] is PipelinedDmmaAlgorithm

    # Measured on the H100: pipelined_dmma 0.47-0.62x cuBLAS against 0.18-0.26x for register FMA
    # (bench/results/h100/float64.md, notes), so `auto`'s rules take it for float64 on CUDA.
    order = [rule.algorithm for rule in RULES]
    assert order.index("pipelined_dmma") < order.index("simple_unit")
    cuda = dialect_for(nominal_cuda_device(9, 0))
    f64 = MatmulProblem(1, 512, 512, 512, FLOAT64, FLOAT64, FLOAT64, lhs_align=2, rhs_align=2)
    assert REGISTRY["auto"]().chosen(REGISTRY["auto"]().setup(f64, cuda)).name == "pipelined_dmma"


@pytest.mark.parametrize("alg", ALGORITHMS)
@pytest.mark.parametrize("dialect, needle", [(opencl_dialect(), "sm_80"),
                                             (dialect_for(nominal_cuda_device(7, 5)), "sm_80")])
def test_refuses_devices_without_dmma(alg, dialect, needle):
    with pytest.raises(SetupError) as info:
        alg().setup(problem(), dialect)
    assert needle in info.value.reason


@pytest.mark.parametrize("alg", ALGORITHMS)
@pytest.mark.parametrize("et, precision", [(FLOAT32, "default"), (FLOAT32, "tf32"), (FLOAT16, "default"),
                                           (BFLOAT16, "default")])
def test_refuses_everything_but_float64(alg, et, precision):
    with pytest.raises(SetupError, match="float64 only") as info:
        alg().setup(problem(et=et, precision=precision), SM90)
    assert info.value.component == "dmma"


def test_refuses_mixed_operands():
    p = MatmulProblem(1, 64, 64, 64, FLOAT64, FLOAT32, FLOAT64)
    with pytest.raises(SetupError, match="rhs is float32"):
        SimpleDmmaAlgorithm().setup(p, SM90)


@pytest.mark.parametrize("sel, needle", [
    (DmmaSelection(tile_m=16, tile_k=32), "instruction shape"),
    (DmmaSelection(tile_k=8), "instruction shape"),
    (DmmaSelection(stage_k=6), "multiple of tile_k"),
    (DmmaSelection(partition_m=8, partition_n=8), "accumulator registers"),
    (DmmaSelection(planes_m=8, planes_n=8), "exceed"),
    (DmmaSelection(planes_m=8, planes_n=4, partition_m=4, partition_n=8, stage_k=32), "shared memory"),
])
def test_refuses_bad_selections(sel, needle):
    with pytest.raises(SetupError, match=needle):
        SimpleDmmaAlgorithm(sel).setup(problem(), SM90)


def test_sm90_shapes_need_sm90():
    """mma.sync's 16 x 8 plane tile is an f64 shape on sm_90 only (m16n8k4 with tile_k=0)."""
    with pytest.raises(SetupError, match="needs sm_90"):
        SimpleDmmaAlgorithm(PlaneSelection()).setup(problem(), SM80)
    st = SimpleDmmaAlgorithm(PlaneSelection()).setup(problem(), SM90).batch.global_.stage
    assert (st.tile.tile_m, st.tile.tile_n, st.tile.tile_k) == (16, 8, 4)


def test_simple_config():
    st = SimpleDmmaAlgorithm().setup(problem((1, 4096, 4096, 4096)), SM80).batch.global_.stage
    assert (st.stage_m, st.stage_n, st.stage_k, st.units) == (128, 64, 16, 256)
    assert (st.tile.tile_m, st.tile.tile_n, st.tile.tile_k, st.tile.smem_word) == (8, 8, 4, "f64")
    assert (st.lhs_ld, st.rhs_ld) == (132, 68)                    # padded by 4 doubles: ld / 4 odd
    assert not st.lhs_k_contiguous and not st.rhs_k_contiguous   # the cyclic loaders store k-major


def test_tiling_rules_fill_the_device():
    def select_dmma_tiling(p, dialect):
        return SimpleDmmaAlgorithm().selection_for(p, dialect)

    def select_pipelined_dmma_tiling(p, dialect):
        return PipelinedDmmaAlgorithm().selection_for(p, dialect)

    for select in (select_dmma_tiling, select_pipelined_dmma_tiling):
        for n in (64, 300, 1000, 4096):
            sel = select(problem((1, n, n, n)), SM90)
            fills = -(-n // sel.stage_m) * -(-n // sel.stage_n) >= 132
            smallest = ((32, 32), (64, 64), (32, 64))
            assert fills or (sel.stage_m, sel.stage_n) in smallest, (select.__name__, n, sel)
    # sm_90 by the waves of each tile (H100 kernel times in algorithms/dmma.py): 32 x 64 under 1.5
    # waves of 64 x 64 tiles, 64 x 64 where its waves are fuller, else 128 x 64.
    for n, stage in ((512, (32, 64)), (768, (32, 64)), (1000, (64, 64)), (1536, (64, 64)), (2048, (128, 64)),
                     (3000, (64, 64)), (4096, (128, 64))):
        sel = select_pipelined_dmma_tiling(problem((1, n, n, n)), SM90)
        assert (sel.stage_m, sel.stage_n) == stage, n
    # sm_90: 128 x 64 (measured 0.91-0.95x cuBLAS against 0.78-0.82x for 128 x 128 on the H100).
    for dialect, tile, stage_n in ((SM80, (8, 8, 4), 128), (SM90, (16, 8, 8), 64)):
        big = select_pipelined_dmma_tiling(problem((1, 4096, 4096, 4096)), dialect)
        assert (big.stage_m, big.stage_n, big.stage_k, big.stages) == (128, stage_n, 16, 3)
        assert (big.tile_m, big.tile_n, big.tile_k or 4) == tile
        assert (big.partition_m * big.tile_m, big.partition_n * 8) == (64, 32)


@pytest.mark.parametrize("lhs, rhs", [(ROW, ROW), (ROW, COL), (COL, ROW), (COL, COL)])
def test_pipelined_shared_memory_follows_the_global_layout(lhs, rhs):
    g = PipelinedDmmaAlgorithm().setup(problem((1, 4096, 4096, 4096), lhs, rhs), SM90).batch.global_
    st = g.stage
    assert (st.lhs_k_contiguous, st.rhs_k_contiguous) == (lhs is ROW, rhs is COL)
    assert st.lhs_ld == (st.stage_k if lhs is ROW else st.stage_m) + 4
    assert g.lhs_loader.size == 8 and g.lhs_loader.vec == 2
    assert g.lhs_loader.smem_bytes == st.lhs_smem_elems * 8 and g.rhs_loader.smem_bytes == st.rhs_smem_elems * 8
    assert g.dynamic_shared_bytes == g.stages * (g.lhs_loader.smem_bytes + g.rhs_loader.smem_bytes)
    assert g.dynamic_shared_bytes <= 120 * 1024        # at most 128 x 128 x 16 in 3 slots: 110 to 120 KiB


@pytest.mark.parametrize("align, piece", [(2, 2), (1, 1)])
def test_pipelined_copy_width_follows_alignment(align, piece):
    g = PipelinedDmmaAlgorithm().setup(problem(align=(align, 2)), SM90).batch.global_
    assert (g.lhs_loader.piece, g.lhs_loader.registers) == (piece, False)   # 16- or 8-byte cp.async
    assert (g.rhs_loader.piece, g.rhs_loader.registers) == (2, False)
    src = PipelinedDmmaAlgorithm().render(PipelinedDmmaAlgorithm().setup(problem(align=(align, 2)), SM90), SM90)
    assert "cp.async.cg.shared.global [%0], [%1], 16" in src
    assert ("cp.async.ca.shared.global [%0], [%1], 8" in src) == (align == 1)


def test_no_backend_words_in_the_tile():
    import gemm_engine.algorithms.dmma as alg_mod
    import gemm_engine.tile.dmma as tile_mod
    for mod in (tile_mod, alg_mod):
        text = open(mod.__file__).read()
        for word in ("__syncthreads", "threadIdx", "__shared__", "get_local_id", "barrier(", "__cvta"):
            assert word not in text, (mod.__name__, word)


# -- nvcc -----------------------------------------------------------------------------------------
COMPILE_CASES = [  # (algorithm, shape, lhs, rhs, align, selection): every loader path and edge
    (SimpleDmmaAlgorithm, (1, 256, 256, 64), ROW, ROW, (2, 2), None),
    (SimpleDmmaAlgorithm, (3, 129, 67, 45), COL, COL, (1, 1), None),
    (SimpleDmmaAlgorithm, (1, 1, 200, 77), ROW, COL, (1, 2), None),
    (SimpleDmmaAlgorithm, (1, 4096, 4096, 4096), COL, ROW, (2, 2), None),
    (PipelinedDmmaAlgorithm, (1, 4096, 4096, 4096), ROW, ROW, (2, 2), None),     # 128 x 128, 16-byte copies
    (PipelinedDmmaAlgorithm, (1, 4093, 4093, 4093), ROW, ROW, (1, 1), None),     # 8-byte copies, all edges
    (PipelinedDmmaAlgorithm, (2, 4093, 4093, 4093), COL, COL, (1, 1), None),     # ... transposed, batched
    (PipelinedDmmaAlgorithm, (1, 4096, 4096, 4096), ROW, COL, (2, 1), None),     # both k-contiguous
    (PipelinedDmmaAlgorithm, (1, 1000, 1000, 1000), COL, ROW, (2, 2), None),     # 64 x 64 stage, edges
    (PipelinedDmmaAlgorithm, (3, 129, 67, 45), COL, COL, (1, 2), None),
    (PipelinedDmmaAlgorithm, (1, 300, 257, 40), ROW, ROW, (2, 1),
     PipelinedDmmaSelection(planes_n=2, partition_m=4, stage_k=32, stages=4, fragment_buffering=True)),
    (PipelinedDmmaAlgorithm, (1, 512, 512, 512), ROW, COL, (2, 2), PipelinedDmmaSelection(fragment_buffering=False)),
    # Unpadded swizzled rows (OpenCL's 48 KiB rings): 16- and 8-byte copies into swizzled chunks.
    (PipelinedDmmaAlgorithm, (1, 4096, 4096, 4096), ROW, ROW, (2, 2), PipelinedDmmaSelection(smem_swizzle=True)),
    (PipelinedDmmaAlgorithm, (2, 4093, 4093, 4093), COL, COL, (1, 1), PipelinedDmmaSelection(smem_swizzle=True)),
]
#: sm_90 shapes other than auto's m16n8k8, compiled for sm_90a only.
SM90_COMPILE_CASES = [
    (PipelinedDmmaAlgorithm, (1, 4093, 4093, 4093), ROW, COL, (1, 1),
     PipelinedDmmaSelection(tile_m=16, tile_k=16, partition_m=4, partition_n=4, planes_m=2, planes_n=4)),
    (PipelinedDmmaAlgorithm, (1, 4096, 4096, 4096), COL, ROW, (2, 2),
     PipelinedDmmaSelection(tile_m=16, tile_k=4, partition_m=4, partition_n=4, planes_m=2, planes_n=4)),
]


def compile_case_jobs() -> list:
    jobs = []
    for i, (alg_cls, shape, lhs, rhs, align, sel) in enumerate(COMPILE_CASES):
        for arch, dialect in ((SM80_FLAG, SM80), (SM90A_FLAG, SM90)):
            alg = alg_cls(sel)
            cfg = alg.setup(problem(shape, lhs, rhs, align), dialect)
            jobs.append((f"{alg.name} case {i}", alg.render(cfg, dialect), arch))
    for i, (alg_cls, shape, lhs, rhs, align, sel) in enumerate(SM90_COMPILE_CASES):
        alg = alg_cls(sel)
        jobs.append((f"{alg.name} sm_90 case {i}", alg.render(alg.setup(problem(shape, lhs, rhs, align), SM90), SM90),
                     SM90A_FLAG))
    return jobs


@pytest.mark.nvcc
@prefetched(compile_case_jobs)
def test_compiles_without_spills():
    nvcc = nvcc_or_skip()
    jobs = compile_case_jobs()
    for name, src, arch in jobs:
        shapes = ("m8n8k4",) if arch == SM80_FLAG else ("m8n8k4", "m16n8k4", "m16n8k8", "m16n8k16")
        assert any(f"mma.sync.aligned.{s}.row.col.f64.f64.f64.f64" in src for s in shapes), (name, arch)
    problems = spill_problems_of(compile_jobs(jobs, nvcc))
    assert not problems, problems


# -- CUDA numerics ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cuda():
    return cuda_engine_or_skip((8, 0), "sm_80 (no DMMA)")


def _device_operand(cp, host, view):
    """host on the device as ``view``: "plain", "col" (a transposed view of a column-major copy),
    "odd" (a slice at an odd offset in a wider buffer: 8-byte alignment only)."""
    if view == "plain":
        return cp.asarray(host)
    if view == "col":
        return device_col_major(cp, host)
    wide = np.zeros(host.shape[:-1] + (host.shape[-1] + 2,), host.dtype)
    wide[..., 1:1 + host.shape[-1]] = host
    return cp.asarray(wide)[..., 1:1 + host.shape[-1]]


NUMERIC_CASES = [  # (shape (batch, m, n, k), lhs view, rhs view)
    ((1, 128, 128, 32), "plain", "plain"), ((1, 256, 384, 64), "plain", "plain"),
    ((1, 127, 129, 33), "plain", "plain"), ((1, 97, 61, 53), "plain", "col"),
    ((1, 1, 200, 77), "col", "plain"), ((1, 64, 1, 40), "col", "col"), ((1, 5, 7, 1), "plain", "plain"),
    ((3, 65, 130, 47), "plain", "plain"), ((2, 130, 300, 70), "col", "odd"),
    ((1, 300, 257, 40), "odd", "odd"), ((1, 129, 131, 95), "odd", "col"),
    ((1, 1000, 1000, 1000), "plain", "plain"), ((1, 2048, 2048, 512), "plain", "col"),
]


def test_opencl_rings_keep_their_stage_k_unpadded():
    """On NVIDIA's OpenCL driver (48 KiB) the padded 128 x 64 x 16 ring fits only at stage_k 8 in 2
    slots; its rows unpadded and swizzled (tile/swizzle.py's DMMA phases) keep stage_k 16. On CUDA
    every preset fits padded and stays as it was."""
    from gemm_engine.codegen.device import nominal_opencl_device
    from gemm_engine.selector.base import ring_bytes
    ocl = dialect_for(nominal_opencl_device("sm_90"))
    p = problem((1, 2048, 2048, 2048))
    sel = PipelinedDmmaAlgorithm().select(p, ocl)
    assert (sel["stage_k"], sel["stages"], sel.get("smem_swizzle")) == (16, 2, True)
    assert ring_bytes(p, 128, 64, 16, 2, 8, 0) <= ocl.device.max_shared_memory
    cfg = PipelinedDmmaAlgorithm(**sel).setup(p, ocl)
    assert cfg.batch.global_.stage.lhs_swizzle.reads == "dmma"
    assert not any(s.get("smem_swizzle") for s in PipelinedDmmaAlgorithm().tuning_space(p, SM90))


@pytest.mark.cuda
@pytest.mark.parametrize("sel", [dict(smem_swizzle=True), dict(smem_swizzle=True, stage_k=16, stages=2)],
                         ids=["carried", "two slots"])
@pytest.mark.parametrize("shape, lview, rview", [c for c in NUMERIC_CASES if c[0][1] > 64],
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else str(v))
def test_swizzled_rows_against_float64(cuda, sel, shape, lview, rview):
    """Unpadded swizzled rows (what NVIDIA's OpenCL driver runs) compute what padded ones do."""
    engine, cp = cuda
    *batch, m, n, k = shape
    batch = tuple(b for b in batch if b > 1)
    rng = np.random.default_rng(sum(shape) * 5 + len(lview))
    a, b = rng.standard_normal(batch + (m, k)), rng.standard_normal(batch + (k, n))
    alg = PipelinedDmmaAlgorithm(**sel)
    c = cp.asnumpy(engine.matmul(_device_operand(cp, a, lview), _device_operand(cp, b, rview), algorithm=alg))
    assert engine.last_choice[1].batch.global_.stage.smem_swizzle
    ref = np.matmul(a, b)
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-13


@pytest.mark.cuda
@pytest.mark.parametrize("alg_cls", ALGORITHMS, ids=lambda c: c.name)
@pytest.mark.parametrize("shape, lview, rview", NUMERIC_CASES, ids=lambda v: "x".join(map(str, v))
                         if isinstance(v, tuple) else str(v))
def test_numerics_against_float64(cuda, alg_cls, shape, lview, rview):
    engine, cp = cuda
    *batch, m, n, k = shape
    batch = tuple(b for b in batch if b > 1)
    rng = np.random.default_rng(sum(shape) * 7 + len(lview) + 3 * len(rview))
    a, b = rng.standard_normal(batch + (m, k)), rng.standard_normal(batch + (k, n))
    c = engine.matmul(_device_operand(cp, a, lview), _device_operand(cp, b, rview), algorithm=alg_cls.name)
    assert isinstance(engine.last_choice[0], alg_cls)
    c = cp.asnumpy(c)
    ref = np.matmul(a, b)
    err = np.linalg.norm(c - ref) / np.linalg.norm(ref)
    assert c.shape == ref.shape and c.dtype == np.float64 and err < 1e-13, \
        f"{alg_cls.name} {shape} {lview}/{rview}: relative error {err:.2e}"
