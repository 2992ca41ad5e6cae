"""selector/cpu.py: when ``auto`` takes the CPU path, and the tilings it chooses (vector width from the
device, halved for f64, shrunk to fit a small problem)."""
from __future__ import annotations

from dataclasses import replace

from gemm_engine.codegen.device import nominal_cuda_device, nominal_opencl_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.selector.cpu import DEFAULT_WIDTH, STAGE_K, TILES, cpu_path, cpu_tuning_space, select_cpu_tiling

CPU = dialect_for(nominal_opencl_device("cpu"))


def problem(m=256, n=256, k=256, dtype="float32", rhs="row"):
    et = BY_NAME[dtype]
    return MatmulProblem(1, m, n, k, et, et, et, Layout.ROW, Layout(rhs))


def test_cpu_path_takes_cpu_row_major_rhs_only():
    assert cpu_path(problem(), CPU) is None
    assert "column-major" in cpu_path(problem(rhs="col"), CPU)
    assert "GPUs" in cpu_path(problem(), dialect_for(nominal_opencl_device("gpu")))
    assert "GPUs" in cpu_path(problem(), dialect_for(nominal_cuda_device(9, 0)))


def test_default_tiling_uses_device_width_and_first_tile():
    t = select_cpu_tiling(problem(), CPU)
    tile_m, vectors = TILES[0]
    assert t == dict(tile_m=tile_m, tile_n=vectors * 16, vector_width=16, stage_m=tile_m,
                     stage_n=vectors * 16, stage_k=STAGE_K)


def test_f64_halves_width_and_unknown_width_falls_back():
    assert select_cpu_tiling(problem(dtype="float64"), CPU)["vector_width"] == 8
    odd = dialect_for(replace(nominal_opencl_device("cpu"), vector_width=1))
    assert select_cpu_tiling(problem(), odd)["vector_width"] == DEFAULT_WIDTH


def test_small_problem_shrinks_tile_to_fit():
    t = select_cpu_tiling(problem(m=3, n=20), CPU)
    assert t["tile_m"] == 3 and t["stage_m"] == 3
    assert t["tile_n"] == 16            # one 16-wide vector: two would exceed n = 20


def test_tuning_space_first_then_distinct_tiles():
    first = select_cpu_tiling(problem(), CPU)
    space = cpu_tuning_space(problem(), CPU, first)
    assert space[0] == first
    assert len(space) == len({tuple(sorted(s.items())) for s in space}) == len(TILES)
    assert {(s["tile_m"], s["tile_n"] // 16) for s in space} == set(TILES)
