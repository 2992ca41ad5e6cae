"""Pipelined tensor-core algorithm (``pipelined_mma``): setup, shared-memory orientation, the chunk
loader's copy paths per alignment, nvcc compile checks (no spills) of every edge path, and CUDA
numerics over shapes and views that hit each path (K not a multiple of the stage, unaligned leading
dimensions and pointers, column-major operands, batches). The numerics need CuPy and an sm_80+ GPU
and skip otherwise; the compile checks need nvcc."""
from __future__ import annotations

import numpy as np
import pytest

from cuda_compile import SM80 as SM80_FLAG, SM90A as SM90A_FLAG, compile_jobs, nvcc_or_skip, prefetched, spill_problems_of
from gemm_engine.algorithms import REGISTRY
from gemm_engine.algorithms.pipelined import PipelinedMmaAlgorithm, PipelinedSelection
from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BFLOAT16, FLOAT16, FLOAT32
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem

SM80, SM90 = dialect_for(nominal_cuda_device(8, 0)), dialect_for(nominal_cuda_device(9, 0))
ROW, COL = Layout.ROW, Layout.COL


def problem(shape=(1, 256, 256, 64), lhs=ROW, rhs=ROW, align=(8, 8), et=FLOAT16, precision="default"):
    return MatmulProblem(*shape, et, et, et, lhs, rhs, *align, precision=precision)


def setup(p, sel=None, dialect=SM90):
    return PipelinedMmaAlgorithm(sel).setup(p, dialect).batch.global_


def test_registered_and_refuses_devices_without_cp_async():
    assert REGISTRY["pipelined_mma"] is PipelinedMmaAlgorithm
    ocl = dialect_for(DeviceInfo(backend="opencl", name="ocl", compute_units=8, max_shared_memory=65536,
                                 max_threads_per_cube=1024, plane_size=32))
    for dialect in (ocl, dialect_for(nominal_cuda_device(7, 5))):
        with pytest.raises(SetupError, match="sm_80"):
            setup(problem(), dialect=dialect)


@pytest.mark.parametrize("lhs, rhs", [(ROW, ROW), (ROW, COL), (COL, ROW), (COL, COL)])
def test_shared_memory_follows_the_global_layout(lhs, rhs):
    g = setup(problem(lhs=lhs, rhs=rhs))
    st = g.stage
    assert (st.lhs_k_contiguous, st.rhs_k_contiguous) == (lhs is ROW, rhs is COL)
    assert st.lhs_ld == (st.stage_k if lhs is ROW else st.stage_m) + 8
    assert g.lhs_loader.smem_bytes == st.lhs_smem_elems * 2 and g.rhs_loader.smem_bytes == st.rhs_smem_elems * 2
    assert g.dynamic_shared_bytes == g.stages * (g.lhs_loader.smem_bytes + g.rhs_loader.smem_bytes)


@pytest.mark.parametrize("align, piece, registers", [(8, 8, False), (4, 4, False), (2, 2, False), (1, 1, True)])
def test_copy_width_follows_alignment(align, piece, registers):
    g = setup(problem(align=(align, 8)))
    assert (g.lhs_loader.piece, g.lhs_loader.registers) == (piece, registers)
    assert (g.rhs_loader.piece, g.rhs_loader.registers) == (8, False)


def select_pipelined_tiling(p, dialect):
    """The selection the heuristic's preset gives pipelined_mma."""
    return PipelinedMmaAlgorithm().selection_for(p, dialect)


def test_tiling_rule_fills_the_device():
    big = select_pipelined_tiling(problem((1, 4096, 4096, 4096)), SM90)
    assert (big.stage_m, big.stage_n, big.stage_k) == (128, 256, 64)
    odd = select_pipelined_tiling(problem((1, 4093, 4093, 4093), align=(1, 1)), SM90)
    assert (odd.stage_m, odd.stage_n, odd.stage_k) == (128, 128, 32)
    narrow = select_pipelined_tiling(problem((1, 4094, 4094, 4094), align=(2, 8)), SM90)
    assert (narrow.stage_m, narrow.stage_n, narrow.stage_k) == (128, 128, 64)
    small = select_pipelined_tiling(problem((1, 1000, 1000, 1000)), SM90)
    assert -(-1000 // small.stage_m) * -(-1000 // small.stage_n) >= 132


def test_refuses_too_much_shared_memory_and_bad_rings():
    with pytest.raises(SetupError, match="shared"):
        setup(problem(), PipelinedSelection(partition_n=8, stage_k=64, stages=9))
    with pytest.raises(SetupError, match="at least 2"):
        setup(problem(), PipelinedSelection(stages=1))
    with pytest.raises(SetupError, match="tf32"):
        setup(problem(et=FLOAT32))


# -- nvcc -----------------------------------------------------------------------------------------
COMPILE_CASES = [  # (shape, lhs, rhs, align, et, selection): one per loader path and edge
    ((1, 4096, 4096, 4096), ROW, ROW, (8, 8), FLOAT16, None),              # 128 x 256, 16-byte copies
    ((1, 4093, 4093, 4093), ROW, ROW, (1, 1), FLOAT16, None),              # register path, all edges
    ((2, 4093, 4093, 4093), COL, COL, (1, 1), BFLOAT16, None),             # ... transposed, batched
    ((1, 4093, 4093, 4093), COL, ROW, (2, 4), BFLOAT16, None),             # 4- and 8-byte copies
    ((1, 1000, 1000, 1000), ROW, COL, (8, 8), FLOAT16, None),              # small stage, K edge
    ((3, 129, 67, 45), COL, COL, (1, 2), BFLOAT16, None),                  # batch, odd everything
    ((1, 300, 257, 40), ROW, ROW, (8, 1), FLOAT16, PipelinedSelection(planes_n=2, stages=4)),
    ((1, 512, 512, 96), ROW, COL, (4, 4), FLOAT32, None),                  # tf32: 4-byte words
]


def edge_path_jobs() -> list:
    jobs = []
    for i, (shape, lhs, rhs, align, et, sel) in enumerate(COMPILE_CASES):
        precision = "tf32" if et is FLOAT32 else "default"
        for arch, dialect in ((SM80_FLAG, SM80), (SM90A_FLAG, SM90)):
            alg = PipelinedMmaAlgorithm(sel)
            cfg = alg.setup(problem(shape, lhs, rhs, align, et, precision), dialect)
            jobs.append((f"case {i} {shape}", alg.render(cfg, dialect), arch))
    return jobs


@pytest.mark.nvcc
@prefetched(edge_path_jobs)
def test_edge_paths_compile_without_spills():
    nvcc = nvcc_or_skip()
    problems = spill_problems_of(compile_jobs(edge_path_jobs(), nvcc))
    assert not problems, problems


# -- CUDA numerics ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cuda():
    cp = pytest.importorskip("cupy", reason="the CUDA numerics test needs CuPy")
    from gemm_engine import Engine
    from gemm_engine.runtime.cuda import cuda_available
    if not cuda_available():
        pytest.skip("CuPy sees no CUDA GPU")
    engine = Engine("cuda")
    if not engine.dialect.supports("cp_async"):
        pytest.skip(f"{engine.device.name} is below sm_80")
    return engine, cp


def _device_operand(cp, host, view):
    """host (batch..., r, c) on the device as ``view``: "plain", "col" (a transposed view of a
    column-major copy), "odd" (a slice at an odd offset in a wider buffer: alignment 1), "even2"
    (offset 2, leading dimension + 2: alignment 2)."""
    if view == "plain":
        return cp.asarray(host)
    if view == "col":
        return cp.asarray(np.ascontiguousarray(np.swapaxes(host, -1, -2))).swapaxes(-1, -2)
    pad = {"odd": 1, "even2": 2}[view]
    wide = np.zeros(host.shape[:-1] + (host.shape[-1] + 2 * pad,), host.dtype)
    wide[..., pad:pad + host.shape[-1]] = host
    return cp.asarray(wide)[..., pad:pad + host.shape[-1]]


NUMERIC_CASES = [  # (shape (batch, m, n, k), lhs view, rhs view)
    ((1, 128, 256, 64), "plain", "plain"), ((1, 256, 512, 96), "plain", "plain"),
    ((1, 127, 129, 33), "plain", "plain"), ((1, 97, 61, 53), "plain", "col"),
    ((1, 1, 200, 77), "col", "plain"), ((1, 64, 1, 40), "col", "col"), ((1, 5, 7, 1), "plain", "plain"),
    ((3, 65, 130, 47), "plain", "plain"), ((2, 130, 300, 70), "col", "odd"),
    ((1, 300, 257, 40), "odd", "odd"), ((1, 200, 264, 72), "even2", "plain"),
    ((1, 129, 131, 95), "odd", "col"), ((1, 1000, 1000, 1000), "plain", "plain"),
    ((1, 509, 517, 521), "odd", "even2"),
]


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["f16", "bf16"])
@pytest.mark.parametrize("shape, lview, rview", NUMERIC_CASES, ids=lambda v: "x".join(map(str, v))
                         if isinstance(v, tuple) else str(v))
def test_numerics_against_float64(cuda, kind, shape, lview, rview):
    engine, cp = cuda
    *batch, m, n, k = shape
    batch = tuple(b for b in batch if b > 1)
    rng = np.random.default_rng(sum(shape) * 7 + len(lview) + 3 * len(rview))
    a = rng.standard_normal(batch + (m, k))
    b = rng.standard_normal(batch + (k, n))
    if kind == "bf16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
        try:
            cp.asarray(np.ones(2, dtype))
        except Exception:
            lview = rview = "host"          # CuPy without bfloat16: numpy inputs, still our kernel
    else:
        dtype = np.float16
    a, b = a.astype(dtype), b.astype(dtype)
    da = a if lview == "host" else _device_operand(cp, a, lview)
    db = b if rview == "host" else _device_operand(cp, b, rview)
    c = engine.matmul(da, db, algorithm="pipelined_mma")
    assert isinstance(engine.last_choice[0], PipelinedMmaAlgorithm)
    c = c if isinstance(c, np.ndarray) else cp.asnumpy(c)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    err = np.linalg.norm(c.astype(np.float64) - ref) / np.linalg.norm(ref)
    assert c.shape == ref.shape and err < 1e-2, f"{kind} {shape} {lview}/{rview}: relative error {err:.2e}"
