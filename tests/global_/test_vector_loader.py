"""The vector loader (16-byte global reads) and the strided unit partition: numerics on every
backend (PoCL here, CUDA on a GPU) against float64 numpy, the structure of the rendered source, the tiling rule, and nvcc
compile checks of the aligned kernels (tests/codegen/test_cuda_sources.py compiles unaligned problems only).
"""
from __future__ import annotations

import numpy as np
import pytest

from cases import LAYOUTS
from cuda_compile import compile_all, jobs_of, nvcc_or_skip, prefetched
from gemm_engine.algorithms import (DoubleBufferingUnitAlgorithm, OrderedAlgorithm, REGISTRY,
                                    SimpleUnitAlgorithm)
from gemm_engine.algorithms.simple import UnitSelection
from gemm_engine.selector.unit import select_unit_tiling
from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem
from helpers import assert_close, random
from device_runs import device_operand, poisoned_out

CUDA = nominal_cuda_device(9, 0)
OPENCL = DeviceInfo(backend="opencl", name="nominal opencl", compute_units=8,
                    max_shared_memory=64 * 1024, max_threads_per_cube=1024, plane_size=1)
#: The CUDA float32 shape at small size: strided 2 x 2 partition of 4 x 4 tiles, float4 loads.
STRIDED = UnitSelection(tile_m=4, tile_n=4, stage_m=64, stage_n=64, stage_k=16, partition_m=2,
                        partition_n=2, partition="strided", vector_width=4)
CONTIGUOUS = UnitSelection(tile_m=8, tile_n=8, stage_m=64, stage_n=64, stage_k=8, vector_width=4)
UNIT_ALGS = (SimpleUnitAlgorithm, DoubleBufferingUnitAlgorithm, REGISTRY["specialized_unit"], OrderedAlgorithm)


def problem(m, n, k, dtype="float32", layouts=("row", "row"), align=4, batch=1):
    et = BY_NAME[dtype]
    return MatmulProblem(batch, m, n, k, et, et, et, Layout(layouts[0]), Layout(layouts[1]),
                         lhs_align=align, rhs_align=align)


def render(alg_cls, selection, p, device=CUDA):
    alg = alg_cls(selection)
    dialect = dialect_for(device)
    cfg = alg.setup(p, dialect)
    return cfg, alg.render(cfg, dialect)


# -- structure of the rendered source ---------------------------------------------------------------
def test_aligned_row_major_loads_float4_and_stores_rhs_whole():
    cfg, src = render(SimpleUnitAlgorithm, STRIDED, problem(128, 128, 64))
    assert cfg.batch.global_.lhs_loader.width == 4
    assert "(*(const  float4*)(lhs + " in src.replace("GLOBAL", "") or "const GLOBAL float4*" in src
    # rhs row-major is n-contiguous like its k-major stage: one vector store; lhs is transposed.
    assert "float4*)(rhs_smem" in src and "float4*)(lhs_smem" not in src
    assert "gc + 3 <" not in src and "gr <" not in src, "the problem divides: no bounds checks"


def test_unaligned_or_converted_operands_load_scalars():
    for p in (problem(128, 128, 64, align=1), problem(128, 128, 64, "float16")):
        cfg, src = render(SimpleUnitAlgorithm, STRIDED, p)
        assert "float4" not in src and "v.x" not in src
    # float64: 16 bytes are two elements.
    cfg, src = render(SimpleUnitAlgorithm, STRIDED, problem(128, 128, 64, "float64", align=2))
    assert "double2" in src and cfg.batch.global_.rhs_loader.width == 2


def test_edges_clamp_reads_and_select_zero_without_branches():
    cfg, src = render(SimpleUnitAlgorithm, STRIDED, problem(100, 72, 52))
    assert "(gc < K ? gc : K - 4)" in src and "(gr < M ? gr : M - 1)" in src   # lhs row-major
    assert "(gc < N ? gc : N - 4)" in src and "(gr < K ? gr : K - 1)" in src   # rhs row-major
    assert "v.w = inside ? v.w : (float)0;" in src
    loads = src[src.index("for (i64 k0"):src.index("SYNC_CUBE();")]
    assert "if (gr" not in loads and "if (inside" not in loads, "no branch around a read"
    # A problem extent along the contiguous axis that 4 does not divide narrows the vector: no
    # vector ever straddles a bound (k = 50: lhs float2; n = 70: rhs float2).
    cfg, src = render(SimpleUnitAlgorithm, STRIDED, problem(100, 70, 50))
    g = cfg.batch.global_
    assert (g.lhs_loader.width, g.rhs_loader.width) == (2, 2) and "float2" in src


def test_strided_partition_origins():
    cfg, src = render(SimpleUnitAlgorithm, STRIDED, problem(64, 64, 32))
    stage = cfg.batch.global_.stage
    assert (stage.units_m, stage.units_n, stage.units, stage.strided) == (8, 8, 64, True)
    assert "part_n0 = (UNIT_ID % 8) * 4;" in src and "part_n0 + 32" in src   # 8 units x 4 apart
    assert "acc_1_1" in src and "rhs_frag1" in src
    # The default partition layout is unchanged: one contiguous tile, historical names.
    cfg, src = render(SimpleUnitAlgorithm, CONTIGUOUS, problem(64, 64, 32))
    assert "part_n0 = (UNIT_ID % 8) * 8;" in src and "acc_1_1" not in src and "acc[" in src


def test_partition_refusals():
    with pytest.raises(SetupError, match="does not divide"):
        render(SimpleUnitAlgorithm, UnitSelection(tile_m=4, tile_n=4, stage_m=64, stage_n=64, stage_k=16, partition_m=3), problem(64, 64, 32))
    # A value a knob does not take is refused when the selection is built, naming the knob.
    with pytest.raises(ValueError, match=r"UnitSelection\.partition: expected one of \('contiguous', 'strided'\)"):
        UnitSelection(partition="diagonal")
    with pytest.raises(SetupError, match="partition_m"):
        render(OrderedAlgorithm, STRIDED, problem(64, 64, 32))


def test_tiling_rule():
    d = dialect_for(CUDA)
    def select_unit(p, dialect):
        return UnitSelection().merged(select_unit_tiling(p, dialect))

    big = select_unit(problem(4096, 4096, 4096), d)
    assert (big.stage_m, big.stage_n, big.stage_k, big.partition) == (128, 64, 16, "strided")
    small = select_unit(problem(1024, 1024, 1024), d)
    assert small.stage_m * small.stage_n < 128 * 128      # more cubes than 64 on 132 SMs
    pocl = select_unit(problem(1024, 1024, 1024), dialect_for(OPENCL))
    assert (pocl.tile_m, pocl.tile_n, pocl.stage_m, pocl.stage_n, pocl.partition) == (4, 8, 32, 64, "contiguous")
    # ordered takes the same outputs per unit as one contiguous tile, lhs_regs <= 64 values.
    sel = OrderedAlgorithm().selection_for(problem(1024, 1024, 1024), d)
    assert sel.partition_m == 1 and sel.stage_k * sel.tile_m <= 64


# -- numerics (every backend) ----------------------------------------------------------------------------
@pytest.mark.parametrize("alg_cls", UNIT_ALGS, ids=lambda c: c.name)
@pytest.mark.parametrize("selection", [STRIDED, CONTIGUOUS], ids=["strided", "contiguous"])
def test_vector_numerics_edges(engine, rng, alg_cls, selection):
    if alg_cls is OrderedAlgorithm and selection is STRIDED:
        pytest.skip("the ordered stage refuses partition_m > 1 (test_partition_refusals)")
    # m, n, k not multiples of the stage, k and n multiples of 4: whole vectors and edge rows.
    a, b = random(rng, (100, 52), "float32"), random(rng, (52, 72), "float32")
    assert_close(engine.matmul(a, b, algorithm=alg_cls(selection)), a, b, "float32")
    assert engine.last_choice[1].batch.global_.rhs_loader.width == 4


@pytest.mark.parametrize("layouts", LAYOUTS, ids="-".join)
def test_vector_numerics_padded_views(engine, rng, layouts):
    # Padded device buffers (leading dimension 60 / 68, multiples of 4) viewed at 58 / 42 / 66
    # columns: aligned rows whose extents 4 does not divide (float2 reads, clamped at the edges).
    m, n, k = 66, 42, 58
    rt = engine.runtime

    def padded(rows, cols, layout):
        host = random(rng, (rows, cols), "float32")
        if layout == "row":
            buf = np.zeros((rows, 60 if cols < 60 else 68), np.float32)
            buf[:, :cols] = host
            return host, rt.to_device(buf)[:, :cols]
        buf = np.zeros((cols, 68), np.float32)
        buf[:, :rows] = host.T
        return host, rt.to_device(buf)[:, :rows].T

    (a, da), (b, db) = padded(m, k, layouts[0]), padded(k, n, layouts[1])
    out = poisoned_out(engine, (m, n), np.float32)
    engine.matmul(da, db, out=out, algorithm=DoubleBufferingUnitAlgorithm(STRIDED))
    ops = engine.last_choice[1].batch.global_
    assert (ops.lhs_loader.width, ops.rhs_loader.width) == (2, 2)
    assert_close(rt.to_host(out), a, b, "float32")


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_vector_numerics_other_dtypes(engine, rng, dtype):
    a, b = random(rng, (2, 70, 36), dtype), random(rng, (2, 36, 68), dtype)
    assert_close(engine.matmul(a, b, algorithm=SimpleUnitAlgorithm(STRIDED)), a, b, dtype)


def test_device_layouts_default_rule(engine, rng):
    # The default rule on transposed (column-major) device views: vector reads along m / k.
    a, b = random(rng, (64, 48), "float32"), random(rng, (48, 40), "float32")
    for layouts in LAYOUTS:
        da, db = device_operand(engine, a, layouts[0]), device_operand(engine, b, layouts[1])
        out = poisoned_out(engine, (64, 40), np.float32)
        engine.matmul(da, db, out=out, algorithm="double_buffering_unit")
        assert_close(engine.runtime.to_host(out), a, b, "float32")


# -- nvcc: the aligned kernels compile for sm_80 and sm_90a -----------------------------------------
def aligned_sources():
    shapes = [(1, 64, 64, 32), (1, 63, 65, 17), (1, 129, 63, 47), (3, 33, 47, 29), (1, 300, 257, 40),
              (1, 1000, 1000, 1000), (1, 4096, 4096, 4096)]
    sources = {}
    for alg_cls in UNIT_ALGS:
        alg = alg_cls()
        for shape in shapes:
            for dtype, align in (("float32", 4), ("float64", 2)):
                for layouts in (LAYOUTS if shape[1] < 1000 and dtype == "float32" else LAYOUTS[:1]):
                    p = problem(*shape[1:], dtype, layouts, align, batch=shape[0])
                    try:
                        cfg = alg.setup(p, dialect_for(CUDA))
                    except SetupError:
                        continue
                    sources.setdefault(cfg, (f"{alg.name} {p}", alg.render(cfg, dialect_for(CUDA))))
    return dict(sources.values())


@pytest.mark.nvcc
@prefetched(lambda: jobs_of(aligned_sources()))
def test_aligned_cuda_sources_compile():
    nvcc = nvcc_or_skip()
    sources = aligned_sources()
    assert any("float4" in s for s in sources.values())
    failures = compile_all(sources, nvcc)
    assert not failures, "\n\n".join(f"{k}:\n{v[-2000:]}" for k, v in list(failures.items())[:3])
