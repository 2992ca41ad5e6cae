"""global_/skinny.py with several rows (M or N from 2 to 16: a decode batch's activations times a
weight, a weight times a few vectors): numerics against float64 on every backend (each reduction
shape and orientation, odd extents, unaligned and strided operands, a broadcast batch, fewer lanes
than a unit's outputs), bitwise reruns, the fused epilogue, skinny_split_k's split over cubes, the
refusals, auto's choice on nominal devices, and the CUDA sources compiling with nvcc.

The single-row kernel's own tests: tests/algorithms/test_skinny.py."""
from __future__ import annotations

import numpy as np
import pytest

from cuda_compile import compile_jobs, jobs_of, nvcc_or_skip, prefetched, spill_problems_of
from device_runs import run_device
from gemm_engine.algorithms import resolve
from gemm_engine.algorithms.skinny import SkinnyAlgorithm, SkinnySelection
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem
from helpers import DTYPES, TOLERANCE, assert_close, random, reference, rel_error
from renders import OPENCL_DEVICE
from skinny_runs import run_raw

H100 = dialect_for(nominal_cuda_device(9, 0))


def problem(m, n, k, dtype="bfloat16", lhs="row", rhs="row", align=None, batch=1):
    et = BY_NAME[dtype]
    align = 16 // et.itemsize if align is None else align
    return MatmulProblem(batch, m, n, k, et, et, et, Layout(lhs), Layout(rhs), align, align)


# -- numerics: (batch, M, N, K, layouts, dtype, pad), each a kernel of its own ------------------------
#: M short with the weight contiguous along K (nn.Linear's x @ W.T: dot) or along N (x @ W: split-K),
#: N short likewise, both short; pad 1 leaves every vector unaligned and the small operand strided.
CASES = [
    (1, 2, 1000, 1000, ("row", "col"), "float32", 0),     # dot, 2 rows: one output a unit
    (2, 3, 257, 513, ("col", "row"), "float32", 1),       # split-K, broadcast batch, strided rows
    (1, 5, 130, 96, ("row", "col"), "float16", 0),        # dot, 5 rows: four outputs a unit
    (1, 8, 1000, 300, ("row", "row"), "float16", 0),      # split-K, 8 rows x 8 outputs: 64 sums
    (1, 333, 4, 777, ("row", "row"), "float32", 1),       # N short, dot (W @ x with a row-major W)
    (1, 100, 6, 129, ("col", "col"), "float64", 0),       # N short, split-K
    (1, 16, 100, 64, ("row", "col"), "float32", 0),       # dot, 16 rows x 4 outputs: 64 sums
    (1, 16, 65, 200, ("col", "row"), "float32", 1),       # split-K, 16 rows of 4 outputs, odd N
    (1, 6, 37, 7, ("row", "col"), "float32", 0),          # dot, K = 7: one lane, more outputs than units
    (1, 3, 5, 1001, ("row", "col"), "float32", 0),        # both short: the rows are M's
    (1, 4, 520, 1024, ("row", "col"), "bfloat16", 0),     # bf16 dot (the decode case)
    (3, 7, 300, 250, ("row", "row"), "bfloat16", 1),      # bf16 split-K, unaligned, batched
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}x{c[3]}-{'/'.join(c[4])}-{c[5]}")
def test_rows_against_float64(engine, rng, case):
    batch, m, n, k, layouts, dtype, pad = case
    if dtype not in DTYPES:
        pytest.skip(f"no {dtype} here")
    a = random(rng, (batch, m, k), dtype)
    b = random(rng, (1 if pad else batch, k, n), dtype)
    result, cfg = run_raw(engine, a, b, layouts, pad)
    assert cfg.rows == min(m, n) and cfg.along_n == (m <= n)
    assert cfg.dot == ((layouts[1] == "col") if cfg.along_n else (layouts[0] == "row"))
    assert np.isfinite(result.astype(np.float64)).all(), "an output was not written"
    assert_close(result, a, b, dtype)


def test_more_outputs_a_unit_than_lanes_reduces_every_output(engine, rng):
    """Dot products with K = 7: one lane a group, four outputs a unit, so the cube has four times more
    outputs than units and each unit sums several (the reduction's loop)."""
    a, b = random(rng, (1, 6, 7), "float32"), random(rng, (1, 7, 37), "float32")
    result, cfg = run_raw(engine, a, b, ("row", "col"), selection=SkinnySelection(unit_outputs=4))
    assert cfg.lanes == 1 and cfg.unit_outputs == 4 and cfg.outputs > cfg.stage.units
    assert_close(result, a, b, "float32")


def test_reruns_are_bitwise_equal(engine, rng):
    a, b = random(rng, (1, 5, 2000), "float32"), random(rng, (1, 2000, 300), "float32")
    first, cfg = run_raw(engine, a, b, ("row", "col"))
    second, _ = run_raw(engine, a, b, ("row", "col"))
    assert cfg.lanes > 1 and first.tobytes() == second.tobytes()


def test_fused_epilogue(engine, rng):
    x, w = random(rng, (4, 1000), "float32"), random(rng, (1000, 33), "float32")
    bias, c = random(rng, (33,), "float32"), random(rng, (4, 33), "float32")
    result = engine.matmul(x, w, bias=bias, c=c, alpha=0.5, beta=2.0, activation="relu", algorithm="skinny")
    assert engine.last_choice[0].name == "skinny"
    ref = np.maximum(0.5 * reference(x, w) + 2.0 * c + bias, 0)
    assert rel_error(result, ref) <= TOLERANCE["float32"]


def test_split_over_cubes_with_rows(engine, rng):
    a, b = random(rng, (5, 3000), "float32"), random(rng, (3000, 520), "float32")
    result = run_device(engine, a, b, ("row", "row"), "skinny_split_k")
    assert engine.last_choice[1].batch.splits >= 2 and engine.last_choice[1].batch.global_.rows == 5
    assert_close(result, a, b, "float32")


# -- setup (no device) ---------------------------------------------------------------------------------
def test_tiling_by_rows():
    """Dot products of several rows: the cube one output a unit would make (8 outputs of 32 lanes,
    256 units: 512 cubes of a 4096-wide weight), each unit taking 4 of its outputs and a quarter
    of each row (128 lanes an output): the 2-row tiling measured fastest (11.8 us against 14.7 at
    one output a unit, bench/results/h100/shape_probe_decode.md). One row keeps one output a unit."""
    g = SkinnyAlgorithm().setup(problem(2, 4096, 4096, rhs="col"), H100).batch.global_
    assert (g.dot, g.rows, g.unit_outputs, g.big.width, g.lanes, g.outputs, g.stage.units) == (True, 2, 4, 8, 128, 8, 256)
    g = SkinnyAlgorithm().setup(problem(8, 4096, 4096, rhs="col"), H100).batch.global_
    assert (g.dot, g.rows, g.unit_outputs, g.big.width, g.lanes) == (True, 8, 4, 8, 128)
    assert g.chunk * g.rows * 4 <= 32 * 1024 and g.shared_memory_bytes <= 48 * 1024
    g = SkinnyAlgorithm().setup(problem(1, 4096, 4096, rhs="col"), H100).batch.global_
    assert (g.unit_outputs, g.lanes, g.outputs) == (1, 16, 16)        # `test_one_row_takes_16_lanes_an_output`
    g = SkinnyAlgorithm(SkinnySelection(unit_outputs=1)).setup(problem(2, 4096, 4096, rhs="col"), H100).batch.global_
    assert (g.unit_outputs, g.lanes, g.outputs) == (1, 32, 8)        # the tuner's alternative: the old tiling
    g = SkinnyAlgorithm().setup(problem(8, 4096, 4096), H100).batch.global_
    assert (g.dot, g.rows, g.per_unit) == (False, 8, 8)


def test_one_row_takes_16_lanes_an_output_where_its_cubes_fill_the_device():
    """One row against a 16-bit weight contiguous along K, on CUDA: 16 lanes an output, 16 outputs a
    cube of 256 units, where the cubes still give every multiprocessor one (4096 outputs: 256 cubes),
    else 32 lanes and 8 outputs (1024 outputs: 64 cubes); float32 weights and OpenCL devices keep
    32 (not measured); a short K keeps its fewer lanes; a caller's outputs or units are kept."""
    def tiling(p, dialect=H100, **knobs):
        g = SkinnyAlgorithm(SkinnySelection(**knobs)).setup(p, dialect).batch.global_
        return g.lanes, g.outputs, g.stage.units
    assert tiling(problem(1, 4096, 4096, rhs="col")) == (16, 16, 256)
    assert tiling(problem(1, 14336, 4096, "float16", rhs="col")) == (16, 16, 256)
    assert tiling(problem(1, 1024, 4096, rhs="col")) == (32, 8, 256)
    assert tiling(problem(1, 4096, 4096, "float32", rhs="col")) == (32, 8, 256)
    assert tiling(problem(1, 4096, 1024, rhs="col")) == (16, 16, 256)
    assert tiling(problem(1, 4096, 4096, rhs="col"), outputs=8) == (32, 8, 256)
    assert tiling(problem(1, 4096, 4096, rhs="col"), units=512) == (64, 8, 512)
    assert tiling(problem(1, 4096, 4096, rhs="col"), dialect_for(OPENCL_DEVICE))[0] != 16


def test_chunk_is_whole_loads_and_whole_steps_of_the_units():
    """The failing CUDA case (5 x 130 x 96 f16, dot, then the default's four outputs a unit): 2
    units, and 6 elements a unit and row made a chunk of 12, which a load of 8 elements straddles;
    the tiling now rounds the chunk to whole loads and whole units' steps (here 8)."""
    p = problem(5, 130, 96, "float16", rhs="col")
    g = SkinnyAlgorithm(SkinnySelection(unit_outputs=4)).setup(p, H100).batch.global_
    assert (g.stage.units, g.big.width, g.chunk) == (2, 8, 8)
    g = SkinnyAlgorithm().setup(p, H100).batch.global_
    assert g.chunk % g.big.width == 0 and g.chunk % g.stage.units == 0


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_every_row_count_and_short_k_sets_up(dtype):
    """Setup never refuses its own tiling: every row count, dot and split-K, short and odd K and
    outputs (each chunk a multiple of the units and of the load width)."""
    for rows in range(1, 17):
        for n in (5, 130, 4096):
            for k in (7, 8, 24, 96, 100, 1000):
                for rhs in ("col", "row"):
                    p = problem(rows, n, k, dtype, rhs=rhs)
                    try:
                        g = SkinnyAlgorithm().setup(p, H100).batch.global_
                    except SetupError as exc:
                        assert "sums a unit" in str(exc), f"{p}: {exc}"    # the one refusal: too many sums
                        continue
                    assert g.chunk % g.stage.units == 0 and (not g.dot or g.chunk % g.big.width == 0), p


@pytest.mark.parametrize("p, match", [
    (problem(9, 4096, 4096), "sums a unit"),                 # bf16 split-K: 9 rows x 8 outputs
    (problem(17, 4096, 4096, rhs="col"), "at most 16"),
    (problem(4096, 17, 4096), "at most 16"),
])
def test_refusals(p, match):
    with pytest.raises(SetupError, match=match):
        SkinnyAlgorithm().setup(p, H100)
    with pytest.raises(SetupError, match="outputs"):
        SkinnyAlgorithm(SkinnySelection(unit_outputs=3, outputs=16)).setup(problem(4, 4096, 4096, rhs="col"), H100)


def test_auto_takes_several_rows_only_streaming_a_big_operand_on_cuda():
    """2 to 4 rows of a weight contiguous along K (dot products) streaming 8 MiB up, on CUDA; on
    Hopper the specialized kernel's decode tiles take them (bench/SELECTION_NOTES.md, "Short
    problems"); 8 rows and a weight contiguous along the outputs go to tensor cores
    (bench/results/h100/shape_probe_decode.md)."""
    auto = resolve("auto")
    a100 = dialect_for(nominal_cuda_device(8, 0))
    assert auto.chosen(auto.setup(problem(4, 4096, 4096, rhs="col"), a100)).name == "skinny"
    assert auto.chosen(auto.setup(problem(2, 14336, 4096, rhs="col"), a100)).name == "skinny"
    for rows in (2, 4, 8):
        assert auto.chosen(auto.setup(problem(rows, 4096, 4096, rhs="col"), H100)).name == "specialized_wgmma"
    assert auto.chosen(auto.setup(problem(1, 4096, 4096, rhs="col"), H100)).name == "skinny"
    assert auto.chosen(auto.setup(problem(4096, 4, 4096), H100)).name == "skinny"               # W @ x
    assert auto.chosen(auto.setup(problem(4, 512, 512, rhs="col"), H100)).name != "skinny"    # 0.5 MiB
    assert auto.chosen(auto.setup(problem(8, 4096, 14336, rhs="col"), H100)).name == "specialized_wgmma"
    assert auto.chosen(auto.setup(problem(4096, 8, 4096), H100)).name == "specialized_wgmma"
    opencl = dialect_for(OPENCL_DEVICE)
    assert auto.chosen(auto.setup(problem(4, 4096, 4096, "float32", rhs="col"), opencl)).name != "skinny"
    # A row-major weight (contiguous along the outputs): tensor cores from one row on Hopper (skinny_split_k's
    # two launches cost its calls 34-65 us: selector/conditions.py `one_row_streams`), K split over cubes on sm_80.
    for rows in (1, 2, 4):
        assert auto.chosen(auto.setup(problem(rows, 4096, 14336), H100)).name == "specialized_wgmma"
    assert auto.chosen(auto.setup(problem(1, 4096, 14336), a100)).name == "skinny_split_k"


def rows_sources() -> dict:
    alg, sources = SkinnyAlgorithm(), {}
    for dtype in ("bfloat16", "float16", "float32"):
        for m, n, lhs, rhs in ((2, 4096, "row", "col"), (8, 4096, "row", "col"), (16, 4096, "row", "col"),
                               (8, 4096, "row", "row"), (4096, 4, "row", "row"), (4096, 8, "col", "row")):
            p = problem(m, n, 4096, dtype, lhs, rhs)
            try:
                cfg = alg.setup(p, H100)
            except SetupError:
                continue
            sources[f"{p}"] = alg.render(cfg, H100)
    return sources


@pytest.mark.nvcc
@prefetched(lambda: jobs_of(rows_sources()))
def test_cuda_sources_compile_without_spills():
    """Every row count's sums and loads in flight stay in registers (up to 211 at 16 rows x 4 outputs
    a unit on sm_90a: one cube of 256 units a multiprocessor, as the level's occupancy asks)."""
    problems = spill_problems_of(compile_jobs(jobs_of(rows_sources()), nvcc_or_skip()))
    assert not problems, "\n\n".join(f"{k}:\n{str(v)[-2000:]}" for k, v in list(problems.items())[:3])
