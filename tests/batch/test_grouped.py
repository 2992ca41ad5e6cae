"""The grouped batch levels (batch/grouped.py, batch/grouped_tma.py) and their walk
(batch/group_walk.py): the grid bound covers every routing, every composition that cannot run a
grouped problem says so by name, the kernels read extents only in device memory, the TMA level
stores through its map only tiles wholly inside their group, and every grouped source compiles with
nvcc (sm_80 and sm_90a) without spills."""
from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from renders import flat

from cuda_compile import SM80 as SM80_FLAG, SM90A as SM90A_FLAG, compile_jobs, nvcc_or_skip, prefetched, spill_problems_of
from gemm_engine.algorithms import REGISTRY, resolve
from gemm_engine.algorithms.grouped import grouped_variant
from gemm_engine.batch.group_walk import tile_bound
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.errors import SetupError
from gemm_engine.problem import Groups, Layout, MatmulProblem
from gemm_engine.tools.source import NOMINAL_OPENCL

SM80, SM90 = dialect_for(nominal_cuda_device(8, 0)), dialect_for(nominal_cuda_device(9, 0))
OPENCL = dialect_for(NOMINAL_OPENCL)
ROW, COL = Layout.ROW, Layout.COL


def grouped(layout="contiguous", dtype="bfloat16", groups=8, m=1000, n=512, k=256, layouts=(ROW, ROW), align=16,
            out=None, **epilogue) -> MatmulProblem:
    et = BY_NAME[dtype]
    return MatmulProblem(groups, m, n, k, et, et, BY_NAME[out or dtype], layouts[0], layouts[1], align, align,
                         epilogue=Epilogue(grouped=True, **epilogue), groups=Groups(layout))


def fp8(layout="contiguous", **more) -> MatmulProblem:
    return grouped(layout, "float8_e4m3fn", layouts=(ROW, COL), out="bfloat16", **more)


# -- the grid bound ---------------------------------------------------------------------------------
@pytest.mark.parametrize("stage_m", [1, 16, 64, 128])
def test_the_grid_bound_covers_every_routing(rng, stage_m):
    for _ in range(200):
        groups, tokens = int(rng.integers(1, 40)), int(rng.integers(0, 3000))
        cuts = np.sort(rng.integers(0, tokens + 1, groups - 1))
        counts = np.diff(np.concatenate([[0], cuts, [tokens]]))
        tiles = int(sum(-(-c // stage_m) for c in counts)) * 3
        problem = grouped(groups=groups, m=max(tokens, 1), n=3 * 128)
        assert tiles <= tile_bound(problem, stage_m, 128)
    # All tokens in one group but one each in the others: the bound is met, not exceeded.
    problem = grouped(groups=4, m=300, n=128)
    assert tile_bound(problem, 128, 128) == (297 // 128 + 1) + 3


def test_masked_and_k_grids_are_every_groups_tiles():
    assert tile_bound(grouped("masked", groups=5, m=200, n=300), 64, 128) == 5 * 4 * 3
    assert tile_bound(grouped("k", groups=5, m=200, n=300, k=9999), 64, 128) == 5 * 4 * 3


# -- refusals ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["simple_unit", "pipelined_mma", "specialized_wgmma", "split_k", "skinny",
                                  "double_buffering_unit"])
def test_dense_batch_levels_refuse_grouped_problems(name):
    with pytest.raises(SetupError) as refused:
        resolve(name).setup(grouped(dtype="float16"), SM90)
    assert "grouped" in str(refused.value) and "layout 'contiguous'" in str(refused.value)


@pytest.mark.parametrize("name", ["grouped_simple_unit", "grouped_pipelined_mma", "grouped_specialized_wgmma"])
def test_grouped_levels_refuse_dense_problems(name):
    dense = replace(grouped(dtype="float16"), groups=None, epilogue=Epilogue())
    with pytest.raises(SetupError, match="walks the groups of a grouped problem"):
        resolve(name).setup(dense, SM90)


@pytest.mark.parametrize("layout", ["k", "list"])
def test_the_tma_level_refuses_ragged_reductions(layout):
    with pytest.raises(SetupError, match="grouped_tma_batch.*walks \\['contiguous', 'masked'\\] only"):
        resolve("grouped_specialized_wgmma").setup(grouped(layout), SM90)
    # ... which the family runs on the cp.async wgmma ring instead
    cfg = resolve("grouped").setup(grouped(layout), SM90)
    assert cfg.algorithm.endswith("GroupedPipelinedWgmmaAlgorithm")


@pytest.mark.parametrize("knobs", [dict(cluster_m=2), dict(split_tail=2)])
def test_the_tma_level_refuses_host_planned_tiles(knobs):
    with pytest.raises(SetupError, match="plan tiles on the host"):
        REGISTRY["grouped_specialized_wgmma"](**knobs).setup(grouped(m=100000, k=16384), SM90)


def test_k_major_only_tiles_need_k_major_weights():
    with pytest.raises(SetupError, match="K-major only.*copies no operand"):
        resolve("grouped_specialized_wgmma").setup(grouped(dtype="float8_e4m3fn", out="bfloat16"), SM90)
    resolve("grouped_specialized_wgmma").setup(fp8(), SM90)


def test_block_scales_along_a_ragged_reduction_are_refused():
    problem = replace(fp8("k"), epilogue=Epilogue(grouped=True, lhs_scale="block", rhs_scale="block"))
    with pytest.raises(SetupError, match="block of 128 along K with the 'k' layout"):
        resolve("grouped_pipelined_wgmma").setup(problem, SM90)


def test_a_users_composition_gets_a_grouped_variant():
    cls = grouped_variant(REGISTRY["double_buffering_unit"])
    assert cls.name == "grouped_double_buffering_unit" and cls.batch.__name__ == "GroupedBatchMatmul"
    alg = cls()
    cfg = alg.setup(grouped(dtype="float32"), OPENCL)
    assert "gemm_engine_group_extent" in alg.render(cfg, OPENCL)


# -- what the kernels read ------------------------------------------------------------------------
def source(problem, name="grouped", dialect=SM90) -> str:
    alg = resolve(name)
    cfg = alg.setup(problem, dialect)
    return alg.chosen(cfg).render(cfg, dialect)


@pytest.mark.parametrize("layout", ["contiguous", "masked", "k", "list"])
def test_extents_are_read_on_the_device_and_clamped(layout):
    text = source(grouped(layout, "float32"), "grouped_simple_unit", OPENCL)
    extent = text[text.index("void gemm_engine_group_extent"):]
    extent = extent[:extent.index("}")]
    if layout in ("contiguous", "k"):
        assert "end < first ? first" in extent and "first > bound ? bound" in extent
    elif layout == "masked":
        assert "count < 0 ? 0 : (count > bound ? bound : count)" in extent
    assert "groups_base + groups_offset" in text
    # the walk's tile count is the group's (k: every group's tiles, its K the group's slice)
    assert ("group_k = group_hi - group_lo" in text) == (layout == "k")


def test_the_tma_level_stores_through_its_map_only_whole_tiles():
    text = source(grouped())
    stage_m = int(re.search(r"const i64 cube_m0 = group_lo \+ cube_row \* (\d+);", text).group(1))
    assert f"if ((out_tma && cube_m0 + {stage_m} <= group_hi)) {{" in text
    # contiguous: lhs and out where they lie (rows absolute), the weights moved to the group
    assert "const GLOBAL unsigned short* lhs = lhs_base + lhs_offset;" in text
    assert "rhs = rhs_base + rhs_offset + b * rhs_batch_stride;" in text
    # the token matrix's one map: rows absolute, batch coordinate 0; masked: the group's slab
    assert "&lhs_map, (ring_bars + 8u * (slot)), (int)(k0), (int)((int)cube_m0), (int)(0));" in flat(text)
    masked = source(grouped("masked"))
    assert "&lhs_map, (ring_bars + 8u * (slot)), (int)(k0), (int)((int)cube_m0), (int)((int)b));" in flat(masked)


def test_the_default_order_walks_down_a_weight_block_first():
    text = source(grouped("masked", "float32"), "grouped_simple_unit", OPENCL)
    assert "const i64 cube_row = dispatch_t % walk_cubes_m;" in text


# -- nvcc -----------------------------------------------------------------------------------------------
COMPILE_CASES = [  # (name, problem, dialect, arch)
    ("grouped", grouped(), SM90, SM90A_FLAG),                                            # TMA, 16-bit
    ("grouped", grouped("masked", bias=BY_NAME["bfloat16"], row_scale=True), SM90, SM90A_FLAG),
    ("grouped", fp8(lhs_scale="block", rhs_scale="block"), SM90, SM90A_FLAG),           # DeepGEMM's scales
    ("grouped", fp8("masked", m=64, lhs_scale="block", rhs_scale="block"), SM90, SM90A_FLAG),
    # the promoted tiles by rows per group: 64 x 128 (32), 128 x 128 (128), the dense rule's 192 x 128 (1024)
    ("grouped", fp8(groups=256, m=8192, n=4096, k=7168, lhs_scale="block", rhs_scale="block"), SM90, SM90A_FLAG),
    ("grouped", fp8(groups=256, m=32768, n=7168, k=2048, lhs_scale="block", rhs_scale="block"), SM90, SM90A_FLAG),
    ("grouped", fp8(groups=32, m=32768, n=4096, k=7168, lhs_scale="block", rhs_scale="block"), SM90, SM90A_FLAG),
    ("grouped", grouped(groups=256, m=8192, n=4096, k=7168), SM90, SM90A_FLAG),        # 64 x 128, bf16
    ("grouped", grouped("k", layouts=(COL, ROW)), SM90, SM90A_FLAG),                    # wgmma ring
    ("grouped", grouped("list", "float16", align=1), SM90, SM90A_FLAG),
    ("grouped_pipelined_mma", grouped("contiguous", "float16", layouts=(ROW, COL)), SM80, SM80_FLAG),
    ("grouped_pipelined_mma", grouped("k", "bfloat16", layouts=(COL, ROW), align=1, row_scale=True), SM80, SM80_FLAG),
    ("grouped_simple_unit", grouped("masked", "float64", bias=BY_NAME["float64"]), SM80, SM80_FLAG),
    ("grouped_simple_unit", grouped("list", "float32"), SM80, SM80_FLAG),
]


def compile_case_jobs() -> list:
    return [(f"case {i} {name} {p.groups.layout} {p.lhs.name}", source(p, name, dialect), arch)
            for i, (name, p, dialect, arch) in enumerate(COMPILE_CASES)]


@pytest.mark.nvcc
@prefetched(compile_case_jobs)
def test_grouped_sources_compile_without_spills():
    nvcc = nvcc_or_skip()
    problems = spill_problems_of(compile_jobs(compile_case_jobs(), nvcc))
    assert not problems, problems
