"""batch/k_major.py and batch/tma_k_major.py, with batch/repitch.py's row copies: which operands are
copied into a pitched workspace before the kernel (the ones a K-major tile cannot read, the ones TMA
cannot address, and with ``copy_ragged`` the ones whose rows are not whole 128-byte lines), how (a
row copy in the source's own layout, or a transpose), the workspace and the tensor maps; numerics
against float64 on every backend through a register-FMA composition (PoCL runs it), on an sm_90 GPU
through specialized_wgmma; the CUDA sources compiling with nvcc without spills."""
from __future__ import annotations

import numpy as np
import pytest

from cuda_compile import archs_for, compile_jobs, failures_of, jobs_of, nvcc_or_skip, prefetched, spill_problems_of
from device_runs import run_device
from gemm_engine.algorithms.simple import SimpleUnitAlgorithm
from gemm_engine.algorithms.specialized_wgmma import SpecializedWgmmaAlgorithm
from gemm_engine.batch import repitch
from gemm_engine.batch.base import BatchConfig
from gemm_engine.batch.k_major import KMajorBatchConfig, KMajorBatchMatmul, k_pitch, ragged_operands
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME, FLOAT16, FLOAT32
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.tile.register import RegisterTile
from helpers import DTYPES, assert_close, cl_run, random
from hopper_support import SM90, problem, sm90_engine

SM80 = dialect_for(nominal_cuda_device(8, 0))

#: Register FMA over the K-major batch level: the copies on every backend (PoCL included).
RaggedUnit = type("RaggedUnit", (SimpleUnitAlgorithm,), {"name": "ragged_unit_test", "batch": KMajorBatchMatmul})


def test_ragged_operands_are_the_rows_not_whole_lines():
    assert ragged_operands(problem(1, 3000, 3000, 3000, "bfloat16")) == ("lhs", "rhs")      # 6000-byte rows
    assert ragged_operands(problem(1, 3008, 3000, 3008, "bfloat16")) == ("rhs",)             # b's rows: N
    assert ragged_operands(problem(1, 3000, 3000, 3008, "bfloat16", ("row", "col"))) == ()   # both along K
    assert ragged_operands(problem(1, 3000, 3000, 4096, "float16", ("col", "row"))) == ("lhs", "rhs")
    assert ragged_operands(problem(1, 96, 96, 32, "float32", ("row", "col"))) == ()          # 128 bytes


def test_copies_only_when_asked_and_keep_the_layout_the_tile_reads():
    p = problem(2, 3000, 3000, 3000, "bfloat16")
    alg = SpecializedWgmmaAlgorithm(copy_ragged=False)
    assert type(alg.setup(p, SM90).batch) is BatchConfig                     # whole 16-byte rows: no copy
    alg = SpecializedWgmmaAlgorithm(copy_ragged=True)
    cfg = alg.setup(p, SM90)
    b = cfg.batch
    assert (b.copies, b.row_copies, b.k_major_sources, b.mn_major_copies) == (("lhs", "rhs"),) * 2 + (("lhs",), ("rhs",))
    assert b.pitch_align == 64 and dict(b.copy_widths) == {"lhs": 8, "rhs": 8}          # 128 bytes; 16-byte words
    g = b.global_
    assert g.lhs_loader.operand.layout is Layout.ROW and g.rhs_loader.operand.layout is Layout.ROW
    assert [(launch.name, launch.cubes) for launch in alg.launches(cfg, p)][:2] == [
        ("gemm_engine_copy_lhs", 2 * 188 * 6), ("gemm_engine_copy_rhs", 2 * 188 * 6)]   # 16 rows x 64 vectors a cube
    assert alg.workspace(cfg, p).count == 2 * 2 * 3000 * 3008
    values = {"M": 3000, "N": 3000, "K": 3000, "batch": 2, "workspace": 1 << 20,
              "lhs_batch_stride": 9_000_000, "rhs_batch_stride": 0}
    level = alg.components
    assert level.map_source(b, values, "lhs", 2) == (1 << 20, 3008, 3000 * 3008)
    # The rhs region follows both lhs entries; a broadcast rhs's copy is broadcast (stride 0).
    assert level.map_source(b, values, "rhs", 2) == ((1 << 20) + 2 * 2 * 3000 * 3008, 3008, 0)
    src = alg.render(cfg, SM90)
    assert "const i64 rhs_pitch = (N + 63) & ~(i64)63;" in src and "GLOBAL float4*" in src


def test_a_k_major_tile_transposes_and_pitches_to_whole_lines():
    """tf32 wgmma reads only K-major: a row-major b is transposed as before, into rows of a 128-byte
    pitch with ``copy_ragged``; a row-major a whose rows are ragged is re-pitched by a row copy."""
    f32 = BY_NAME["float32"]
    p = MatmulProblem(1, 300, 300, 300, f32, f32, f32, Layout.ROW, Layout.ROW, 4, 4, precision="tf32")
    alg = SpecializedWgmmaAlgorithm(copy_ragged=True)
    cfg = alg.setup(p, SM90)
    b = cfg.batch
    assert (b.copies, b.row_copies, b.mn_major_copies, b.pitch_align) == (("lhs", "rhs"), ("lhs",), (), 32)
    assert [launch.name for launch in alg.launches(cfg, p)] == [
        "gemm_engine_copy_lhs", "gemm_engine_k_major_rhs", "gemm_engine_kernel"]


def test_row_copy_grid_and_widths():
    assert repitch.copy_width(BY_NAME["bfloat16"], 8) == 8 and repitch.copy_width(BY_NAME["float16"], 2) == 2
    assert repitch.copy_width(BY_NAME["float16"], 1) == 1 and repitch.copy_width(BY_NAME["float64"], 1) == 1
    assert repitch.copy_width(BY_NAME["float32"], 2) == 2 and repitch.copy_width(BY_NAME["int8"], 16) == 16
    assert repitch.cubes(1, 3000, 3000, 8) == 188 * 6 and repitch.cubes(3, 1, 1, 1) == 3


# -- numerics: (batch of a, batch of b, m, n, k, layouts, dtype), every backend --------------------------
CASES = [
    (1, 1, 37, 45, 70, ("row", "row"), "float32"),      # a re-pitched (280-byte rows), b kept row-major
    (3, 3, 20, 30, 40, ("col", "col"), "float16"),      # a kept column-major (40-byte rows), b along K
    (2, 2, 33, 17, 9, ("row", "col"), "float64"),       # K = 9: 8-byte words, each row's last alone
    (4, 4, 70, 130, 3, ("col", "row"), "bfloat16"),     # K = 3: both kept MN-major, rows of K
    (3, 1, 50, 60, 70, ("row", "row"), "float32"),      # a broadcast b: copied once
    (1, 1, 37, 45, 70, ("col", "row"), "float16"),      # odd extents: element copies of 2 bytes
    (1, 1, 64, 64, 64, ("row", "row"), "float32"),      # whole lines: nothing copied
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}x{c[2]}x{c[3]}x{c[4]}-{'/'.join(c[5])}-{c[6]}")
def test_ragged_copies_against_float64(engine, rng, case):
    ba, bb, m, n, k, layouts, dtype = case
    if dtype not in DTYPES:
        pytest.skip(f"no {dtype} here")
    if dtype == "float64" and not engine.dialect.supports("fp64"):
        pytest.skip("no float64 on this device")
    a = random(rng, ((ba,) if ba > 1 else ()) + (m, k), dtype)
    b = random(rng, ((bb,) if bb > 1 else ()) + (k, n), dtype)
    result = run_device(engine, a, b, layouts, RaggedUnit(copy_ragged=True))
    cfg = engine.last_choice[1].batch
    itemsize = a.dtype.itemsize
    rows = {"lhs": k if layouts[0] == "row" else m, "rhs": n if layouts[1] == "row" else k}
    assert set(getattr(cfg, "copies", ())) == {op for op, r in rows.items() if r * itemsize % 128}
    assert set(getattr(cfg, "mn_major_copies", ())) <= {op for op, lay in zip(("lhs", "rhs"), layouts)
                                                          if lay == ("col" if op == "lhs" else "row")}
    assert_close(result, a, b, dtype)


# -- on an sm_90 GPU: the Hopper kernel reading the copies through its tensor maps ---------------------------
@pytest.mark.parametrize("case", [(1, 300, 500, 700, ("row", "row"), "bfloat16"),
                                  (2, 257, 130, 1000, ("col", "col"), "float16"),
                                  (3, 200, 300, 100, ("row", "col"), "bfloat16")], ids=str)
def test_specialized_wgmma_on_ragged_copies(rng, case):
    engine = sm90_engine()
    b, m, n, k, layouts, dtype = case
    lead = (b,) if b > 1 else ()
    a, bb = random(rng, lead + (m, k), dtype), random(rng, lead + (k, n), dtype)
    results = [run_device(engine, a, bb, layouts, SpecializedWgmmaAlgorithm(copy_ragged=True)) for _ in range(2)]
    assert engine.last_choice[1].batch.copies
    assert_close(results[0], a, bb, dtype)
    np.testing.assert_array_equal(results[0].view(np.uint16), results[1].view(np.uint16))


# -- nvcc ---------------------------------------------------------------------------------------------
def copy_sources() -> dict:
    out = {}
    for m, n, k, dtype, layouts in ((3000, 3000, 3000, "bfloat16", ("row", "row")),
                                    (2500, 2500, 2500, "float16", ("col", "col")),
                                    (3000, 3000, 3000, "float16", ("row", "col"))):
        p = problem(2, m, n, k, dtype, layouts)
        alg = SpecializedWgmmaAlgorithm(copy_ragged=True)
        out[f"specialized-{m}-{dtype}-{'/'.join(layouts)}"] = alg.render(alg.setup(p, SM90), SM90)
    unit = RaggedUnit(copy_ragged=True)
    for dtype, align in (("float16", 1), ("float32", 2)):
        p = problem(1, 37, 45, 70, dtype, ("col", "row"), align=align)
        out[f"unit-{dtype}-{align}"] = unit.render(unit.setup(p, SM80), SM80)
    return out


@pytest.mark.nvcc
@prefetched(lambda: jobs_of(copy_sources(), archs_for("sm_90a")))
def test_copy_sources_compile_without_spills():
    results = compile_jobs(jobs_of(copy_sources(), archs_for("sm_90a")), nvcc_or_skip())
    assert not failures_of(results)
    assert not spill_problems_of(results)


# -- the K-major level's own copies (a tile that reads only K-major) --------------------------------
class _KMajorTile(RegisterTile):
    def requires_k_major(self, problem):
        return True


class _KMajorUnit(SimpleUnitAlgorithm):
    """A portable composition under the K-major level: its copy kernels run on PoCL."""
    name = "k_major_unit_test"
    tile = _KMajorTile
    batch = KMajorBatchMatmul


class _PlainUnit(SimpleUnitAlgorithm):
    name = "k_major_plain_test"
    batch = KMajorBatchMatmul


def _p(lhs=Layout.ROW, rhs=Layout.COL, m=37, n=45, k=29, batch=2, et=FLOAT32):
    return MatmulProblem(batch, m, n, k, et, et, et, lhs, rhs)


@pytest.mark.parametrize("k, align, pitch", [(29, 4, 32), (32, 4, 32), (1, 8, 8), (4093, 8, 4096)])
def test_k_pitch(k, align, pitch):
    assert k_pitch(k, align) == pitch


@pytest.mark.parametrize("lhs, rhs, copies", [(Layout.ROW, Layout.COL, ()), (Layout.COL, Layout.COL, ("lhs",)),
                                              (Layout.ROW, Layout.ROW, ("rhs",)),
                                              (Layout.COL, Layout.ROW, ("lhs", "rhs"))])
def test_copies_only_what_the_tile_cannot_read(opencl_engine, lhs, rhs, copies):
    d = opencl_engine.dialect
    alg = _KMajorUnit()
    problem = _p(lhs, rhs)
    cfg = alg.setup(problem, d).batch
    level = alg.build()
    assert (cfg.copies if isinstance(cfg, KMajorBatchConfig) else ()) == copies
    launches = level.launches(cfg, problem)
    assert [l.name for l in launches] == [f"gemm_engine_k_major_{op}" for op in copies] + ["gemm_engine_kernel"]
    ws = level.workspace(cfg, problem)
    if copies:
        rows = sum({"lhs": 37, "rhs": 45}[op] for op in copies)
        assert ws.count == 2 * rows * k_pitch(29, 4) and "workspace" in level.signature(cfg).names
        # The main kernel reads the copies K-major.
        g = cfg.global_
        assert g.lhs_loader.operand.layout is Layout.ROW and g.rhs_loader.operand.layout is Layout.COL
    else:
        assert ws is None and "workspace" not in level.signature(cfg).names
    # A tile that reads any layout: nothing is copied.
    assert not isinstance(_PlainUnit().setup(problem, d).batch, KMajorBatchConfig)


def test_half_precision_pitch_is_eight_elements(opencl_engine):
    cfg = _KMajorUnit().setup(_p(Layout.COL, et=FLOAT16), opencl_engine.dialect).batch
    assert cfg.pitch_align == 8 and cfg.global_.lhs_loader.operand.align == 8


def test_transposing_copy_alone_on_pocl(opencl_engine, rng):
    batch, m, n, k = 1, 37, 45, 29
    problem = _p(rhs=Layout.ROW, m=m, n=n, k=k, batch=batch)
    alg = _KMajorUnit()
    cfg = alg.setup(problem, opencl_engine.dialect)
    source = alg.render(cfg, opencl_engine.dialect)
    b = rng.standard_normal((k, n)).astype(np.float32)
    pitch = k_pitch(k, 4)
    guard = 4096
    ws = np.full(n * pitch + guard, 3.0, np.float32)
    i64 = np.int64
    args = [np.zeros((m, k), np.float32), i64(0), i64(k), i64(0), b, i64(0), i64(n), i64(0),
            np.zeros(m * n, np.float32), i64(0), i64(n), i64(0), i64(m), i64(n), i64(k), i64(batch), ws]
    [launch, _] = alg.launches(cfg, problem)
    got = cl_run(opencl_engine, source, "gemm_engine_k_major_rhs", args, launch.cubes * launch.units,
                 local=launch.units, out=-1)
    assert (got[n * pitch:] == 3.0).all(), "written past the copy's region"
    np.testing.assert_array_equal(got[:n * pitch].reshape(n, pitch)[:, :k], b.T)
