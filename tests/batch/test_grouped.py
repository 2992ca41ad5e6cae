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
from gemm_engine.batch import split_tail
from gemm_engine.batch.group_walk import tile_bound
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.errors import SetupError
from gemm_engine.global_.read.vector_loader import VectorLoader
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


def test_the_tma_level_refuses_the_list_layout():
    with pytest.raises(SetupError, match="grouped_tma_batch.*walks \\['contiguous', 'k', 'masked'\\] only"):
        resolve("grouped_specialized_wgmma").setup(grouped("list"), SM90)
    # ... which the family runs on the cp.async wgmma ring instead
    cfg = resolve("grouped").setup(grouped("list"), SM90)
    assert cfg.algorithm.endswith("GroupedPipelinedWgmmaAlgorithm")


@pytest.mark.parametrize("layouts", [(COL, ROW), (ROW, COL), (ROW, ROW)])
def test_ragged_reductions_take_the_tma_level_with_maps_ending_at_each_group(layouts):
    # a weight gradient (x^T @ dy): its maps are the loading unit's, their K extent the group's end
    problem = grouped("k", layouts=layouts)
    cfg = resolve("grouped").setup(problem, SM90)
    assert cfg.algorithm.endswith("GroupedSpecializedWgmmaAlgorithm")
    text = source(problem, "grouped")
    # K is the lines of an MN-major operand (map dimension 1), the contiguous axis of a K-major one (0)
    dims = {op: 0 if layout is (ROW if op == "lhs" else COL) else 1 for op, layout in zip(("lhs", "rhs"), layouts)}
    assert f"ptx_tensor_map_extent_{dims['lhs']}((void*)(maps_at), (const void*)&lhs_map, (unsigned)(group_hi));" in text
    assert (f"ptx_tensor_map_extent_{dims['rhs']}((void*)(maps_at + 128), (const void*)&rhs_map, "
            "(unsigned)(group_hi));") in text
    assert "tensormap.replace.tile.global_dim.global.b1024.b32" in text
    assert "const int k0 = (int)(group_lo) + step * 64;" in text
    # the slices a tile reads are its group's, counted per tile; an empty group's tile releases no slot
    assert text.count("const int k_steps = (int)((group_k + 63) / 64);") == 2
    assert "if (k_steps > 0) {" in text
    # the map slots: more than the ring's stages, per cube, in the kept scratch after the split
    # tail's flags (the queue's buffer is shared: those stay zero), on whole 128-byte lines
    slots = cfg.batch.global_.stages + 1
    kept = resolve("grouped").chosen(cfg).components.kept_workspace(cfg.batch, problem)
    flags = split_tail.flag_words(cfg.batch.persistent_cubes)
    assert kept.zeroed >= flags and kept.zeroed % 32 == 0
    assert (kept.count - kept.zeroed) * 4 == cfg.batch.persistent_cubes * slots * 256
    assert f"(unsigned char*)(kept_scratch + {kept.zeroed})" in text
    # whole output tiles go through the map: a group's output is all of its (M, N)
    assert "out_tma && cube_m0" not in flat(text)


@pytest.mark.parametrize("knobs, why", [(dict(schedule="pingpong", warpgroups_m=1, warpgroups_n=1, partition_m=1,
                                              tile_n=128, stages=4), "one copy of the consumers"),
                                        (dict(promote_behind=True), "no promotion")])
def test_ragged_reductions_refuse_what_counts_slices_once_a_kernel(knobs, why):
    alg = REGISTRY["grouped_specialized_wgmma"](**knobs)
    problem = fp8("k", k=4096) if "promote_behind" in knobs else grouped("k", layouts=(COL, ROW))
    with pytest.raises(SetupError, match=f"'k' layout gives each tile its group's reduction.*{why}"):
        alg.setup(problem, SM90)


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


# -- the alignment contract of ragged axes ------------------------------------------------------------
#: Members and the dialects they run on, with the loaders that form element addresses.
ADDRESSING = [("grouped_simple_unit", OPENCL), ("grouped_simple_unit", SM90), ("grouped_pipelined_mma", SM80),
              ("grouped_pipelined_wgmma", SM90), ("grouped", SM90)]


def test_ragged_contiguous_axes_per_layout():
    # a group starts anywhere along: M (contiguous, masked rows), K (the weight gradient's tokens)
    expect = {("contiguous", COL, ROW): "lhs", ("contiguous", COL, COL): "lhs", ("masked", COL, ROW): "lhs",
              ("masked", COL, COL): "lhs", ("k", ROW, ROW): "lhs", ("k", COL, COL): "rhs", ("k", ROW, COL): "lhs rhs"}
    for layout in ("contiguous", "masked", "k", "list"):
        for lhs in (ROW, COL):
            for rhs in (ROW, COL):
                p = grouped(layout, layouts=(lhs, rhs))
                got = " ".join(side for side in ("lhs", "rhs") if p.ragged_contiguous(side))
                assert got == expect.get((layout, lhs, rhs), ""), (layout, lhs, rhs)
                assert [p.vector_align(side) for side in ("lhs", "rhs")] == [1 if side in got else 16
                                                                             for side in ("lhs", "rhs")]


@pytest.mark.parametrize("layout", ["contiguous", "masked", "k", "list"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float8_e4m3fn"])
def test_no_loader_reads_wider_than_every_group_is_aligned(layout, dtype):
    # Every composition's element-addressing reads are at most as wide as the groups' alignment:
    # one element along an axis a group starts anywhere on (a misaligned vector faults on CUDA).
    checked = 0
    for name, dialect in ADDRESSING:
        for lhs in (ROW, COL):
            for rhs in (ROW, COL):
                p = (fp8(layout) if dtype.startswith("float8") else grouped(layout, dtype))
                p = replace(p, lhs_layout=lhs, rhs_layout=rhs)
                try:
                    cfg = resolve(name).setup(p, dialect)
                except SetupError:
                    continue
                g = cfg.batch.global_
                for side, loader in (("lhs", g.lhs_loader), ("rhs", g.rhs_loader)):
                    width = loader.read_width
                    if width is not None:
                        checked += 1
                        assert width <= p.vector_align(side), (name, dialect.device.name, lhs, rhs, side, width)
                        assert not p.ragged_contiguous(side) or width == 1
    assert checked


def test_ragged_axes_keep_tma_and_the_other_operand_wide():
    # TMA boxes are addressed by coordinates: a column-major token matrix keeps the TMA pipeline
    cfg = resolve("grouped").setup(grouped(layouts=(COL, ROW)), SM90)
    assert cfg.algorithm.endswith("GroupedSpecializedWgmmaAlgorithm")
    # a weight gradient of x^T (M contiguous) and dy (N contiguous) on the cp.async ring: 16-byte chunks
    g = resolve("grouped_pipelined_wgmma").setup(grouped("k", layouts=(COL, ROW)), SM90).batch.global_
    assert (g.lhs_loader.piece, g.rhs_loader.piece) == (8, 8)


def test_each_loaders_read_width_is_what_its_source_reads():
    # the declared width the grouped levels check is the rendered one: float4 reads, 16-byte chunks
    text = source(grouped("contiguous", "float32", layouts=(ROW, ROW)), "grouped_simple_unit")
    cfg = resolve("grouped_simple_unit").setup(grouped("contiguous", "float32"), SM90).batch.global_
    assert cfg.lhs_loader.read_width == 4 and re.search(r"float4 v = .*\(lhs \+", flat(text))
    ring = resolve("grouped_pipelined_mma").setup(grouped(), SM80).batch.global_
    assert ring.lhs_loader.read_width == 8 and ring.lhs_loader.piece == 8
    tma = resolve("grouped").setup(grouped(layouts=(ROW, COL)), SM90).batch.global_
    assert tma.lhs_loader.read_width is None


def test_a_loader_reading_wider_than_the_groups_are_aligned_is_refused_by_name():
    # a user's loader that reads the memory's alignment along a ragged axis would fault on CUDA
    class MemoryWidthLoader(VectorLoader):
        name = "memory_width"

        @staticmethod
        def width(op, cap):
            return min(cap, op.align)

    unit = type("MemoryWidthUnit", (REGISTRY["simple_unit"],), {"name": "memory_width_unit",
                                                                 "lhs_loader": MemoryWidthLoader})
    alg = grouped_variant(unit)()
    alg.setup(grouped("k", "float32", layouts=(COL, ROW)), OPENCL)      # M contiguous: aligned groups
    with pytest.raises(SetupError, match=r"lhs loader \(memory_width\) reads 4 elements .* aligned to 1 "
                                         r"\(its contiguous axis is the groups' ragged one\)") as refused:
        alg.setup(grouped("k", "float32"), OPENCL)                      # K contiguous, a group starts anywhere
    assert refused.value.component == "grouped_batch"


def test_a_reduction_starting_anywhere_is_read_element_by_element():
    # a (K, T) row-major lhs of a weight gradient: its pointer moves by the group's first token
    text = source(grouped("k", "float32"), "grouped_simple_unit")
    assert "lhs = lhs_base + lhs_offset + group_lo * 1;" in text
    assert re.search(r"float v = \(float\)\(lhs\[", text) and not re.search(r"float\d v = .*\(lhs \+", text)
    ring = source(grouped("k", layouts=(ROW, COL)), "grouped_pipelined_wgmma")   # the ring: the register path
    assert "(const GLOBAL unsigned short*)(lhs_sw_src" in ring and "(const GLOBAL unsigned short*)(rhs_sw_src" in ring
    assert not re.search(r"ptx_cp_async\w*\([^;]*[lr]hs_sw_dst", flat(ring))


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
    ("grouped", grouped("k", layouts=(COL, ROW)), SM90, SM90A_FLAG),                    # TMA, maps per group
    ("grouped", grouped("k", layouts=(ROW, COL), bias=BY_NAME["bfloat16"]), SM90, SM90A_FLAG),
    ("grouped_pipelined_wgmma", grouped("k", layouts=(COL, ROW)), SM90, SM90A_FLAG),    # wgmma ring
    ("grouped", grouped("list", "float16", align=1), SM90, SM90A_FLAG),
    ("grouped_pipelined_mma", grouped("contiguous", "float16", layouts=(ROW, COL)), SM80, SM80_FLAG),
    ("grouped_pipelined_mma", grouped("k", "bfloat16", layouts=(COL, ROW), align=1, row_scale=True), SM80, SM80_FLAG),
    ("grouped_simple_unit", grouped("masked", "float64", bias=BY_NAME["float64"]), SM80, SM80_FLAG),
    ("grouped_simple_unit", grouped("list", "float32"), SM80, SM80_FLAG),
    # groups starting anywhere along a contiguous axis: element-by-element reads
    ("grouped_pipelined_wgmma", grouped("k", layouts=(ROW, COL)), SM90, SM90A_FLAG),    # wgmma ring, registers
    ("grouped_pipelined_mma", grouped("contiguous", "float16", layouts=(COL, COL)), SM80, SM80_FLAG),
    ("grouped_simple_unit", grouped("k", "float32"), SM90, SM90A_FLAG),
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
