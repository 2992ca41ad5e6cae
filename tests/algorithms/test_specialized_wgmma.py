"""specialized_wgmma: the Hopper warp-specialized kernel (TMA producer, mbarrier ring, wgmma
consumers, persistent cubes). Structure and refusals on nominal devices; sm_90a compiles with nvcc;
numerics on an H100 / H200 (skipped elsewhere)."""
from __future__ import annotations

import numpy as np
import pytest

from cuda_compile import archs_for, compile_all, jobs_of, nvcc_or_skip, prefetched
from helpers import BF16, assert_close, np_dtype, random, rel_error
from renders import OPENCL_DEVICE, flat
from hopper_support import SM90, fp8_problem, padded, problem, setup, sm90_engine
from gemm_engine.algorithms.specialized_wgmma import SpecializedWgmmaAlgorithm
from gemm_engine.algorithms.wgmma import PipelinedWgmmaAlgorithm
from gemm_engine.batch import tma_persistent
from gemm_engine.batch.partitioned import PartitionedBatchMatmul
from gemm_engine.batch.tma_persistent import TmaPersistentBatchMatmul
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import cuda_target_arch, dialect_for
from gemm_engine.runtime.tensor_map import MAP_BYTES
from gemm_engine.dtypes import BY_NAME
from gemm_engine.errors import SetupError
from gemm_engine.global_.read.tma_loader import TmaLoader
from gemm_engine.global_.tma_specialized import TmaSpecializedGlobalMatmul
from gemm_engine.global_.write.tma_store_writer import TmaStoreWriter
from gemm_engine.global_.write.writers import PairedWriter
from gemm_engine.global_.wgmma_pipelined import WgmmaPipelinedGlobalMatmul
from gemm_engine.problem import Layout, MatmulProblem

HALF = ["float16"] + (["bfloat16"] if BF16 is not None else [])


# -- refusals --------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", [nominal_cuda_device(8, 0), OPENCL_DEVICE], ids=["sm80", "opencl"])
def test_refuses_devices_without_wgmma(device):
    with pytest.raises(SetupError, match="wgmma|CUDA only"):
        setup(problem(), dialect_for(device))


def test_operands_tma_cannot_address_are_copied_first():
    """Operands aligned to 8 bytes: the persistent level alone refuses them (TMA's 16-byte rule);
    the algorithm's batch level copies them into a K-major workspace with 16-byte rows first (a
    row-major lhs re-pitched by a row copy, 8-byte words as its alignment allows, a row-major rhs
    transposed), and the maps describe the copies. (Without ``copy_ragged``: the default copies
    these ragged rows to whole 128-byte lines, `test_default_copies_misaligned_rows_to_whole_lines`.)"""
    with pytest.raises(SetupError, match="16 bytes"):
        type("Plain", (SpecializedWgmmaAlgorithm,), {"name": "plain", "batch": TmaPersistentBatchMatmul})().setup(
            problem(align=4), SM90)
    p = problem(b=2, m=100, n=200, k=70, align=4)
    alg, cfg = setup(p, copy_ragged=False)
    batch = cfg.batch
    assert (batch.lhs_copy, batch.rhs_copy, batch.k_major_sources) == (True, True, ("lhs",))
    assert [launch.name for launch in alg.launches(cfg, p)] == [
        "gemm_engine_copy_lhs", "gemm_engine_k_major_rhs", "gemm_engine_kernel"]
    pitch = 72                                                  # K rounded up to 8 halves
    assert alg.workspace(cfg, p).count == 2 * (100 + 200) * pitch
    g = batch.global_
    assert g.lhs_loader.operand.layout is Layout.ROW and g.rhs_loader.operand.layout is Layout.COL
    src = alg.render(cfg, SM90)
    copy = src[src.index("void gemm_engine_copy_lhs("):src.index("void gemm_engine_k_major_rhs(")]
    assert "(cp_r + 0) * (lhs_ld)" in copy and "* (k_pitch)" in copy and "GLOBAL float2*" in copy   # re-pitched rows
    assert "tile[" not in copy
    assert "tile[i * 65 + tx] = src[k * rhs_ld + x];" in src              # transposed
    values = {"M": 100, "N": 200, "K": 70, "batch": 2, "workspace": 1 << 20,
              "lhs_base": 4096, "lhs_offset": 0, "lhs_ld": 70, "lhs_batch_stride": 7000,
              "rhs_base": 65536, "rhs_offset": 0, "rhs_ld": 200, "rhs_batch_stride": 0}
    assert batch_level(alg).map_source(batch, values, "lhs", 2) == (1 << 20, pitch, 100 * pitch)
    # The rhs region follows the lhs copies; a broadcast rhs's copy is broadcast (stride 0).
    assert batch_level(alg).map_source(batch, values, "rhs", 2) == ((1 << 20) + 2 * 2 * 100 * pitch, pitch, 0)


def test_default_copies_misaligned_rows_to_whole_lines():
    """The same operands by default (the selector's ``copy_ragged``: they are copied anyway, so the
    copies' rows are whole 128-byte lines): both row copies in their own layouts, no transpose (the
    tile reads a row-major b), rows of 64 halves."""
    p = problem(b=2, m=100, n=200, k=70, align=4)
    alg, cfg = setup(p)
    batch = cfg.batch
    assert cfg.selection.copy_ragged
    assert (batch.row_copies, batch.k_major_sources, batch.mn_major_copies) == (("lhs", "rhs"), ("lhs",), ("rhs",))
    assert [launch.name for launch in alg.launches(cfg, p)] == [
        "gemm_engine_copy_lhs", "gemm_engine_copy_rhs", "gemm_engine_kernel"]
    assert alg.workspace(cfg, p).count == 2 * (100 * 128 + 70 * 256)     # K and N rounded up to 64 halves
    assert batch.global_.rhs_loader.operand.layout is Layout.ROW
    values = {"M": 100, "N": 200, "K": 70, "batch": 2, "workspace": 1 << 20,
              "lhs_batch_stride": 7000, "rhs_batch_stride": 14000}
    assert batch_level(alg).map_source(batch, values, "lhs", 2) == (1 << 20, 128, 100 * 128)
    assert batch_level(alg).map_source(batch, values, "rhs", 2) == ((1 << 20) + 2 * 2 * 100 * 128, 256, 70 * 256)


def batch_level(alg):
    return alg.components


def test_fp8_with_a_row_major_b_runs_on_a_transposed_copy():
    e4m3 = BY_NAME["float8_e4m3fn"]
    p = MatmulProblem(1, 4096, 4096, 4096, e4m3, e4m3, BY_NAME["bfloat16"], Layout.ROW, Layout.ROW, 16, 16)
    _, cfg = setup(p)
    assert (cfg.batch.lhs_copy, cfg.batch.rhs_copy, cfg.batch.k_major_sources) == (False, True, ())


@pytest.mark.parametrize("swap", [
    dict(lhs_loader=TmaLoader, batch=PartitionedBatchMatmul),                   # maps need a batch level passing them
    dict(global_=TmaSpecializedGlobalMatmul, batch=PartitionedBatchMatmul),     # roles need the tile loop
    dict(global_=WgmmaPipelinedGlobalMatmul, writer=PairedWriter),              # the TMA batch needs a looping global
    dict(writer=TmaStoreWriter),                                                # no staging tile in the pipelined global
], ids=["loader-without-maps", "global-without-tile-loop", "batch-without-looping-global", "tma-store-without-staging"])
def test_mismatched_compositions_are_refused_naming_the_capability(swap):
    base = SpecializedWgmmaAlgorithm if "global_" in swap and swap.get("batch") is None else PipelinedWgmmaAlgorithm
    if swap.get("global_") is TmaSpecializedGlobalMatmul:
        base = SpecializedWgmmaAlgorithm
    alg = type("Swapped", (base,), {"name": "swapped", **swap})()
    with pytest.raises(SetupError) as info:
        alg.setup(problem(), SM90)
    assert any(w in str(info.value) for w in ("tensor map", "tile loop", "swizzled ring slot", "bulk stores")), str(info.value)


# -- structure -------------------------------------------------------------------------------------
def test_kernel_structure():
    alg, cfg = setup(problem(m=4096, n=4096, k=4096))
    src = alg.render(cfg, SM90)
    kernel = src[src.index("void gemm_engine_kernel("):]
    assert cuda_target_arch(SM90.device, src) == "sm_90a"
    assert cfg.units == 384 and cfg.batch.global_.consumers == 2          # two consumer warpgroups + a producer
    assert "LAUNCH_BOUNDS_MIN(384, 1) void gemm_engine_kernel(" in src                         # setmaxnreg needs the cap at entry
    assert kernel.count("__grid_constant__") == 3                         # lhs_map, rhs_map, out_map
    assert "ptx_setmaxnreg_dec_40()" in kernel and "ptx_setmaxnreg_inc_232()" in kernel
    assert "cp.async.bulk.tensor.3d" in src and "mbarrier.try_wait.parity" in src
    assert "cp.async.ca" not in src and "cp.async.cg" not in src          # no per-thread copies
    # One cube barrier (after the mbarrier initialization); the roles then meet only on mbarriers.
    assert kernel.count("SYNC_CUBE()") == 1
    # The tile loop is rendered once per role.
    assert kernel.count("for (i64 cube = CUBE_ID;") == 2
    # A 128 x 256 slot: lhs one 128-line box, rhs (row-major: MN-major) four 64-wide boxes.
    assert kernel.count("ptx_tma_load_3d(") == 5
    assert "49152u" in kernel                                              # the bytes a full barrier expects
    # The output leaves through a staging tile of half the tile (so the ring keeps 4 slots): per
    # half two 64-column TMA stores committed as one group, the staging tile waited for (read)
    # before it is refilled, everything waited for at the end.
    g = cfg.batch.global_
    assert g.writer.tma_store and g.writer.store_parts == 2 and g.staging == 128 * 256 and g.stages == 4
    assert kernel.count("ptx_tma_store_3d(") == 4 and kernel.count("ptx_bulk_commit()") == 2
    assert kernel.count("ptx_bulk_wait_read_0()") == 2 and kernel.count("ptx_bulk_wait_0()") == 1
    assert kernel.count("ptx_named_barrier(1u, 256u)") == 4 and "if (out_tma) {" in kernel
    assert cfg.batch.persistent_cubes == SM90.device.compute_units


def test_idle_warpgroups_skip_their_wgmma_where_the_kernel_does_not_promote():
    """A ragged M (3000 in 128 x 128 tiles: the last tile's second warpgroup has no rows) renders
    each consumer's main loop behind a check of its first row, the other branch only waiting for
    the slots (first warp) and releasing them, then meeting at its warpgroup's own barrier; wider
    tiles, promoting kernels and an aligned M keep the one loop unless asked."""
    narrow = dict(warpgroups_m=2, tile_n=128, store_parts=1)
    alg, cfg = setup(problem(m=3000, n=3000, k=3000, dtype="bfloat16"), **narrow)
    assert cfg.batch.global_.skip_idle
    kernel = alg.render(cfg, SM90)
    assert "if (wg_m0 < tile_rows) {" in kernel and "if (UNIT_ID % 128 < 32) {" in kernel
    assert "ptx_named_barrier((unsigned)(3 + UNIT_ID / 128), 128u);" in kernel
    off = setup(problem(m=3000, n=3000, k=3000, dtype="bfloat16"), idle_warpgroups="compute", **narrow)
    wide = setup(problem(m=3000, n=3000, k=3000, dtype="bfloat16"), warpgroups_m=2, tile_n=256, store_parts=2)
    aligned = setup(problem(m=4096, n=4096, k=4096, dtype="bfloat16"), **narrow)
    promoted = setup(fp8_problem(m=3000, n=3072, k=1024, scales="block"))
    assert not promoted[1].batch.global_.skip_idle
    for a, c in (off, wide, aligned, promoted):
        assert "tile_rows" not in a.render(c, SM90)
    asked = setup(fp8_problem(m=3000, n=3072, k=1024, scales="block"), idle_warpgroups="skip")
    assert "if (wg_m0 < tile_rows) {" in asked[0].render(asked[1], SM90)


@pytest.mark.parametrize("parts", [2, 4])
def test_output_tile_staged_in_column_parts(parts):
    """store_parts: the tile goes through a staging tile of one part, part after part (each waits
    for the last stores' reads, meets twice, and commits its own stores); the ring gets the rest."""
    alg, cfg = setup(problem(m=4096, n=4096, k=4096), store_parts=parts, stages=4)
    g = cfg.batch.global_
    assert g.staging == 128 * 256 * 2 // parts and g.stages == 4
    kernel = alg.render(cfg, SM90)
    kernel = kernel[kernel.index("void gemm_engine_kernel("):]
    assert kernel.count("ptx_tma_store_3d(") == 4 and kernel.count("ptx_bulk_commit()") == parts
    assert kernel.count("ptx_bulk_wait_read_0()") == parts and kernel.count("ptx_named_barrier(1u, 256u)") == 2 * parts
    # every part's stores start at its own first column
    for col in range(0, 256, 64):
        assert f"(int)(cube_n0 + {col})" in kernel


#: The wave rule's 192 x 192 tile (selector/specialized_wgmma.py `WAVE_TILES`): three consumer
#: warpgroups of 64 x 192, the staged tile in three 64-column parts beside four ring slots.
WIDE_192 = dict(warpgroups_m=3, tile_n=192, stages=4, store_parts=3)


def test_short_k_default_is_ping_pong_unless_the_caller_names_the_tile():
    """A caller naming the tile overrides the cooperative rule's choice (its ring and staging fit
    the tile), not short K's ping-pong one; naming the ping-pong schedule alone keeps the rule's."""
    short = problem(m=8192, n=8192, k=256)
    _, cfg = setup(short)
    assert cfg.batch.global_.schedule == "pingpong"
    for overrides, tile in ((dict(warpgroups_m=2, tile_n=256), (128, 256)), (dict(tile_n=256), (128, 256)),
                            (dict(schedule="cooperative"), (128, 256)), (dict(split_tail=2), (128, 256))):
        _, cfg = setup(short, **overrides)
        g = cfg.batch.global_
        assert (g.schedule, g.stage.stage_m, g.stage.stage_n) == ("cooperative", *tile), overrides
    _, cfg = setup(short, schedule="pingpong")
    assert cfg.batch.global_.schedule == "pingpong" and cfg.batch.global_.stage.stage_n == 128


def test_a_named_tile_gets_its_own_staging_and_ring():
    """Naming the tile's shape (not its staging) fits the output's staging, and the ring unless named,
    to that tile: the rule's 192 x 192 tile of 3000^3 stages in 3 parts, which a 128 x 128 tile cannot
    tell apart; 16 x 4096^2's 16 slots of 64 x 32 do not fit 64 x 64 tiles. Named staging stays as named."""
    cases = ((problem(1, 3000, 3000, 3000, "bfloat16"), dict(warpgroups_m=2, tile_n=128), (4, 1)),
             (problem(1, 16, 4096, 4096, "bfloat16", ("row", "col")), dict(tile_n=64), (13, 1)),
             (problem(1, 4096, 2176, 512, "float16"), dict(warpgroups_m=2, partition_m=1, tile_n=128, stages=6), (6, 1)))
    for p, knobs, (stages, parts) in cases:
        chosen = SpecializedWgmmaAlgorithm().selection_for(p, SM90)
        sel = setup(p, **knobs)[1].selection
        assert (sel.tile_n, sel.stages, sel.store_parts, sel.tma_store) == (knobs["tile_n"], stages, parts, True)
        assert (chosen.tile_n, chosen.stages, chosen.store_parts) != (sel.tile_n, sel.stages, sel.store_parts)
    with pytest.raises(SetupError, match="column part"):
        setup(problem(1, 3000, 3000, 3000, "bfloat16"), warpgroups_m=2, tile_n=128, store_parts=3)
    # The grouped variant too, after its own rule for small groups (32 rows an expert: 64 x 128, 8 slots).
    from dataclasses import replace
    from gemm_engine.algorithms import REGISTRY
    from gemm_engine.problem import Groups
    grouped = replace(problem(8, 256, 4096, 2048, "bfloat16", ("row", "col")), groups=Groups("contiguous"))
    sel = REGISTRY["grouped_specialized_wgmma"](tile_n=256).setup(grouped, SM90).selection
    assert (sel.tile_n, sel.stages, sel.store_parts) == (256, 4, 1)


@pytest.mark.parametrize("case, knobs", [
    ((1, 3000, 3000, 3000, ("row", "row"), 0), dict(warpgroups_m=2, tile_n=128)),
    ((1, 16, 4096, 4096, ("row", "col"), 0), dict(tile_n=64)),
    ((1, 4096, 2176, 512, ("row", "row"), 3), dict(warpgroups_m=2, partition_m=1, tile_n=128, stages=6)),
    ((2, 1000, 1001, 777, ("col", "row"), 5), dict(tile_n=192)),
], ids=["3000cube-128", "16rows-64", "4096x2176-stages6", "batch-192"])
def test_numerics_of_named_tiles(rng, case, knobs):
    """Tiles named by their shape alone, their staging and ring fitted to them (`fit_named_tile`):
    the products against float64 into NaN-poisoned outputs."""
    check_numerics(rng, "bfloat16", case, SpecializedWgmmaAlgorithm(**knobs))


def test_192_column_tiles_stage_three_parts():
    alg, cfg = setup(problem(m=3000, n=3000, k=3000, layouts=("row", "row")), **WIDE_192, cluster_m=1)
    g = cfg.batch.global_
    assert (g.stage.stage_m, g.stage.stage_n, g.consumers, g.stages) == (192, 192, 3, 4)
    assert g.staging == 192 * 64 * 2 and g.slot_bytes == (192 + 192) * 64 * 2
    kernel = alg.render(cfg, SM90)
    kernel = kernel[kernel.index("void gemm_engine_kernel("):]
    # a row-major rhs: three 64-wide boxes a slot; one store a part, each part its own commit
    assert kernel.count("ptx_tma_load_3d(") == 4
    assert kernel.count("ptx_tma_store_3d(") == 3 and kernel.count("ptx_bulk_commit()") == 3
    for col in (0, 64, 128):
        assert f"(int)(cube_n0 + {col})" in kernel
    with pytest.raises(SetupError, match="column part"):     # 96 columns: half a box
        setup(problem(m=3000, n=3000, k=3000), **dict(WIDE_192, store_parts=2, stages=3))


def _wide_sources() -> dict:
    """The 192 x 192 tile as the wave rule takes it: plain, and with the epilogues a model's layers
    fuse (bias and an activation, c, the gated pair of SwiGLU, accumulating into out)."""
    from dataclasses import replace
    from gemm_engine.epilogue.activations import resolve_activation
    from gemm_engine.epilogue.spec import Epilogue
    out = {}
    bf16 = BY_NAME["bfloat16"]
    epilogues = {"": Epilogue(), "-bias-gelu": Epilogue(bias=bf16, activation=resolve_activation("gelu")),
                 "-c": Epilogue(c=bf16, scaled=True), "-swiglu": Epilogue(activation=resolve_activation("swiglu")),
                 "-accumulate": Epilogue(c=bf16, accumulate=True)}
    for m, n, k, layouts, dtype in ((3000, 3000, 3000, ("row", "row"), "bfloat16"),
                                    (2335, 3542, 607, ("col", "col"), "float16"),
                                    (3008, 3008, 3008, ("row", "col"), "bfloat16")):
        for label, ep in (epilogues.items() if dtype == "bfloat16" and m == 3000 else [("", Epilogue())]):
            p = replace(problem(m=m, n=n, k=k, dtype=dtype, layouts=layouts), epilogue=ep)
            alg = SpecializedWgmmaAlgorithm()           # the rule's own choice: 192 x 192 for these
            cfg = alg.setup(p, SM90)
            # a gated epilogue's half-width output is not whole staging bands: not 192 x 192
            wide = (cfg.batch.global_.stage.stage_m, cfg.batch.global_.stage.stage_n) == (192, 192)
            assert wide != ep.paired, label
            out[f"wide192-{m}x{n}x{k}-{layouts[0]}{layouts[1]}-{dtype}{label}"] = alg.render(cfg, SM90)
    # The wave rule's 192 x 96 (a row-major rhs in the 64-byte swizzle, the output in 64-byte bands).
    for m, n, k, layouts, dtype in ((1536, 1536, 1536, ("row", "row"), "bfloat16"),
                                    (1536, 1536, 2048, ("col", "col"), "float16")):
        for label, ep in (epilogues.items() if dtype == "bfloat16" else [("", Epilogue())]):
            p = replace(problem(m=m, n=n, k=k, dtype=dtype, layouts=layouts), epilogue=ep)
            alg = SpecializedWgmmaAlgorithm()
            cfg = alg.setup(p, SM90)
            narrow = (cfg.batch.global_.stage.stage_m, cfg.batch.global_.stage.stage_n) == (192, 96)
            assert narrow != ep.paired, label
            out[f"narrow96-{m}x{n}x{k}-{layouts[0]}{layouts[1]}-{dtype}{label}"] = alg.render(cfg, SM90)
    # The short-K rule's ping-pong 128 x 128 with the same epilogues (a gated one stays cooperative).
    for b, layouts in ((1, ("row", "row")), (3, ("col", "col"))):
        for label, ep in epilogues.items():
            p = replace(problem(b=b, m=4096, n=4096, k=128, dtype="bfloat16", layouts=layouts), epilogue=ep)
            alg = SpecializedWgmmaAlgorithm()
            cfg = alg.setup(p, SM90)
            assert cfg.batch.global_.schedule == ("cooperative" if ep.paired else "pingpong"), label
            out[f"short-k-{b}x4096x4096x128-{layouts[0]}{layouts[1]}{label}"] = alg.render(cfg, SM90)
    return out


def _wide_jobs():
    return [(name, src, arch) for name, src in _wide_sources().items() for arch in archs_for("sm_90a")]


@pytest.mark.nvcc
@prefetched(_wide_jobs)
def test_192_column_tiles_compile_without_spills():
    """96 accumulators a consumer unit beside the ring's bookkeeping (and the short-K rule's
    ping-pong tiles): no spills, no serialized wgmma."""
    from cuda_compile import assert_no_spills
    assert_no_spills(_wide_jobs())


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("case", [(1, 3000, 3000, 3000, ("row", "row"), 0), (1, 385, 577, 129, ("col", "row"), 5),
                                  (2, 200, 190, 70, ("row", "col"), 3)], ids=lambda c: "x".join(map(str, c[:4])))
def test_numerics_of_192_column_tiles(rng, case, dtype):
    """Partial tiles along both edges (3000 = 15 x 192 + 120), a ragged K, a batch; NaN-poisoned out."""
    check_numerics(rng, dtype, case, SpecializedWgmmaAlgorithm(**WIDE_192))


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("case", [(1, 3000, 3000, 3000, ("row", "row"), 0), (1, 3100, 2990, 2500, ("row", "col"), 0),
                                  (2, 400, 190, 2100, ("col", "row"), 3)], ids=lambda c: "x".join(map(str, c[:4])))
def test_numerics_of_192_column_tiles_in_clusters(rng, case, dtype):
    """192 x 192 tiles in clusters of two sharing each rhs slot, as the rule takes them over ragged
    rows: 17 tile rows (3100: a cluster's second cube past the edge), a batch; NaN-poisoned out."""
    check_numerics(rng, dtype, case, SpecializedWgmmaAlgorithm(**WIDE_192, cluster_m=2))


NARROW_96 = dict(warpgroups_m=3, tile_n=96, stages=5)


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("variant", [{}, dict(cluster_m=2), dict(split_tail=2), dict(store_parts=3, stages=4),
                                     dict(tma_store=False), dict(warpgroups_m=1, warpgroups_n=2, stages=6)],
                         ids=["plain", "cluster", "split", "parts3", "direct", "wn2"])
@pytest.mark.parametrize("case", [(1, 1536, 1536, 1536, ("row", "row"), 0), (1, 1000, 1001, 777, ("row", "row"), 0),
                                  (2, 300, 190, 200, ("col", "row"), 3), (1, 517, 300, 1000, ("row", "col"), 0)],
                         ids=lambda c: "x".join(map(str, c[:4])) + "-" + "".join(x[0] for x in c[4]))
def test_numerics_of_96_column_tiles(rng, case, variant, dtype):
    """96-column tiles: a row-major rhs in the 64-byte swizzle (32-wide TMA boxes and atoms), the
    output staged in 64-byte bands; edges on both sides (1001 = 10 x 96 + 41), a batch, a column-major
    lhs, a K-major rhs; in clusters (the rhs's three boxes shared line by line), split along K, in
    three column parts, stored directly, two warpgroups side by side; NaN-poisoned out."""
    check_numerics(rng, dtype, case, SpecializedWgmmaAlgorithm(**{**NARROW_96, **variant}))


@pytest.mark.parametrize("terms", ["bias_gelu", "c", "accumulate"])
def test_epilogues_of_96_column_tiles(rng, terms):
    """The epilogue's arrays and the reducing stores through the 64-byte-swizzled output map."""
    engine = sm90_engine()
    m, n, k = 1000, 1001, 777
    a, b = random(rng, (m, k), "float16"), random(rng, (k, n), "float16")
    c = random(rng, (m, n), "float16")
    alg = SpecializedWgmmaAlgorithm(**NARROW_96)
    da, db = padded(engine, a, "row", 0), padded(engine, b, "row", 0)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if terms == "bias_gelu":
        bias = random(rng, (n,), "float16")
        got = engine.matmul(da, db, bias=engine.runtime.to_device(bias), activation="gelu", algorithm=alg)
        from gemm_engine.epilogue.activations import resolve_activation
        want, tol = resolve_activation("gelu").reference(ref + bias), 1e-2
    elif terms == "c":
        got = engine.matmul(da, db, c=engine.runtime.to_device(c), beta=0.5, algorithm=alg)
        want, tol = ref + 0.5 * c, 1e-2
    else:
        got = engine.runtime.to_device(c.copy())
        engine.matmul(da, db, out=got, c=got, beta=1.0, algorithm=alg)
        want, tol = ref + c, 1e-2
    host = engine.runtime.to_host(got).astype(np.float64)
    assert rel_error(host, want) < tol


@pytest.mark.parametrize("overrides, why", [
    (dict(store_parts=2, warpgroups_m=1, warpgroups_n=2, tile_n=128), "one warpgroup along n"),
    (dict(store_parts=4, tile_n=128), "column part"),           # 128 / 4 = 32 columns: half a 64-wide box
])
def test_column_parts_refused_where_they_cannot_be_told_apart(overrides, why):
    alg = SpecializedWgmmaAlgorithm(**overrides)
    with pytest.raises(SetupError, match=why):
        cfg = alg.setup(problem(m=4096, n=4096, k=4096), SM90)
        alg.render(cfg, SM90)


def test_signature_appends_tensor_maps_by_value():
    alg, cfg = setup(problem())
    sig = alg.signature(cfg)
    assert sig.names[-3:] == ("lhs_map", "rhs_map", "out_map")
    assert all(p.kind == "by_value" and p.size == MAP_BYTES and p.align == 64 for p in sig.params[-3:])
    direct = SpecializedWgmmaAlgorithm(tma_store=False)
    assert direct.signature(direct.setup(problem(), SM90)).names[-2:] == ("lhs_map", "rhs_map")


@pytest.mark.parametrize("layouts, lhs_box, rhs_box, lhs_copies, rhs_copies", [
    (("row", "row"), (64, 128), (64, 64), 1, 4),      # lhs K-major; rhs N contiguous: 64-wide atoms
    (("col", "col"), (64, 64), (64, 256), 2, 1),      # lhs M contiguous; rhs K-major
    (("row", "col"), (64, 128), (64, 256), 1, 1),
])
def test_boxes_follow_layouts(layouts, lhs_box, rhs_box, lhs_copies, rhs_copies):
    _, cfg = setup(problem(m=4096, n=4096, k=512, layouts=layouts))
    g = cfg.batch.global_
    assert (g.lhs_loader.box, g.rhs_loader.box) == (lhs_box, rhs_box)
    assert (g.lhs_loader.copies, g.rhs_loader.copies) == (lhs_copies, rhs_copies)
    assert g.slot_bytes == (128 + 256) * 64 * 2


@pytest.mark.parametrize("m, n, layouts", [(32, 4096, ("row", "col")), (20, 4096, ("row", "col")),
                                            (4096, 100, ("row", "col")), (32, 4096, ("col", "col")),
                                            (4096, 100, ("row", "row")), (200, 300, ("row", "col"))])
def test_slots_receive_only_the_lines_inside_the_problem(m, n, layouts):
    """K-major operands of a problem shorter than the tile (a decode batch, a few columns): the
    copies read the lines inside it, rounded to whole 8-line atoms; K and MN-major boxes stay."""
    _, cfg = setup(problem(m=m, n=n, k=512, layouts=layouts))
    g, st = cfg.batch.global_, cfg.batch.global_.stage
    lhs_lines = min(st.stage_m, -(-m // 8) * 8) if layouts[0] == "row" else 64
    rhs_lines = min(st.stage_n, -(-n // 8) * 8) if layouts[1] == "col" else 64
    assert (g.lhs_loader.box[1], g.rhs_loader.box[1]) == (lhs_lines, rhs_lines)
    assert g.slot_bytes == g.lhs_loader.slot_bytes + g.rhs_loader.slot_bytes
    assert g.lhs_loader.slot_bytes == g.lhs_loader.copies * 64 * lhs_lines * 2


def test_tensor_maps_derived_per_call(monkeypatch):
    """The maps are encoded from each call's addresses, extents, strides and batch; a broadcast
    operand's batch extent is 1 (its kernel coordinate is then 0)."""
    p = problem(b=3, m=100, n=200, k=72, layouts=("row", "col"))
    alg, cfg = setup(p)
    seen = []
    monkeypatch.setattr(tma_persistent.ENCODER, "encode",
                        lambda address, spec: seen.append((address, spec)) or bytes(MAP_BYTES))
    cv = alg.call_values(cfg, p)
    values = {"lhs_base": 4096, "lhs_offset": 8, "lhs_ld": 80, "lhs_batch_stride": 8000,
              "rhs_base": 65536, "rhs_offset": 0, "rhs_ld": 72, "rhs_batch_stride": 0,
              "out_base": 1 << 20, "out_offset": 16, "out_ld": 208, "out_batch_stride": 208 * 100,
              "M": 100, "N": 200, "K": 72, "batch": 3}
    out = cv.derive(values)
    assert set(out) == set(cv.names) == {"lhs_map", "rhs_map", "out_map"}
    (la, ls), (ra, rs), (oa, os_) = seen
    assert la == 4096 + 8 * 2 and ra == 65536 and oa == (1 << 20) + 16 * 2
    # 100 rows of a 128-row tile: the copies read 104 (whole 8-line atoms; rows past M are never stored).
    assert ls.dims == (72, 100, 3) and ls.strides == (160, 16000) and ls.box == (64, 104, 1)
    assert rs.dims == (72, 200, 1) and rs.strides == (144, 144 * 200) and rs.box == (64, cfg.batch.global_.stage.stage_n, 1)
    # The output: row-major, one box a 128-byte band of the tile's rows.
    assert os_.dims == (200, 100, 3) and os_.strides == (416, 416 * 100) and os_.box == (64, 128, 1)
    # An output TMA cannot address (leading dimension 201 halves: 402 bytes) gets no map: the
    # kernel's out_tma is false for it and it stores directly.
    seen.clear()
    assert cv.derive({**values, "out_ld": 201})["out_map"] == bytes(MAP_BYTES) and len(seen) == 2
    assert cv.derive({**values, "out_offset": 3})["out_map"] == bytes(MAP_BYTES)


def test_l2_promotion_follows_line_alignment(monkeypatch):
    """Operand maps fetch 256 bytes into L2 per request where their lines start on 128-byte
    boundaries and 128 where they do not (misaligned lines of 2000 bytes ran 10-15% slower with
    256: global_/read/tma_loader.py); the promotion reaches the encoder in the spec."""
    from gemm_engine.global_.read.tma_loader import l2_promotion
    assert [l2_promotion(x) for x in (128, 2048, 4096 * 2, 2000, 160, 144, 16)] == [256, 256, 256, 128, 128, 128, 128]
    p = problem(b=1, m=100, n=200, k=72, layouts=("row", "col"))
    alg, cfg = setup(p)
    seen = []
    monkeypatch.setattr(tma_persistent.ENCODER, "encode",
                        lambda address, spec: seen.append(spec) or bytes(MAP_BYTES))
    values = {"lhs_base": 4096, "lhs_offset": 0, "lhs_ld": 128, "lhs_batch_stride": 0,
              "rhs_base": 65536, "rhs_offset": 0, "rhs_ld": 1000, "rhs_batch_stride": 0,
              "out_base": 1 << 20, "out_offset": 0, "out_ld": 208, "out_batch_stride": 0,
              "M": 100, "N": 200, "K": 72, "batch": 1}
    alg.call_values(cfg, p).derive(values)
    lhs, rhs, _ = seen
    assert (lhs.strides[0], lhs.l2_promotion) == (256, 256)
    assert (rhs.strides[0], rhs.l2_promotion) == (2000, 128)


def test_kernel_decides_tma_stores_as_the_host_does():
    """The kernel's out_tma is the host's alignment rule on the same values (address, leading
    dimension, batch stride when there is a batch), written once each side."""
    from gemm_engine.batch.tma_persistent import out_usable
    alg, cfg = setup(problem(b=2))
    src = flat(alg.render(cfg, SM90))
    assert ("const bool out_tma = ((((unsigned long long)(out_base + out_offset)) | (unsigned long long)(out_ld * 2)"
            " | (unsigned long long)(batch > 1 ? out_batch_stride * 2 : 0)) & 15) == 0;") in src
    assert out_usable(4096, 8, 24, 2, 2) and not out_usable(4096, 9, 24, 2, 2)
    assert not out_usable(4096, 8, 20, 2, 2) and out_usable(4096, 8, 20, 1, 2) and not out_usable(4098, 8, 8, 1, 2)


def test_kernel_refuses_batch_level_without_tile_loop_at_render():
    g = TmaSpecializedGlobalMatmul()
    assert TmaPersistentBatchMatmul.provides & {r for req in g.requires for r in req.any_of}


# -- nvcc ------------------------------------------------------------------------------------------
COMPILE_CASES = {f"{dt}-{la}{lb}-{m}x{n}x{k}": problem(m=m, n=n, k=k, dtype=dt, layouts=(la, lb))
                 for dt in ("float16", "bfloat16") for la, lb in (("row", "row"), ("col", "col"))
                 for m, n, k in ((4096, 4096, 4096), (100, 300, 72))}


def compile_case_sources() -> dict:
    out = {}
    for name, p in COMPILE_CASES.items():
        alg, cfg = setup(p)
        out[name] = alg.render(cfg, SM90)
    return out


@pytest.mark.nvcc
@prefetched(lambda: jobs_of(compile_case_sources(), archs_for(SpecializedWgmmaAlgorithm.min_arch)))
def test_sources_compile_for_sm90a():
    nvcc = nvcc_or_skip()
    failures = compile_all(compile_case_sources(), nvcc, archs=archs_for(SpecializedWgmmaAlgorithm.min_arch))
    assert not failures, "\n\n".join(f"{k}:\n{v[-2000:]}" for k, v in list(failures.items())[:2])


# -- numerics on an H100 / H200 --------------------------------------------------------------------
NUMERIC_CASES = [  # (batch, m, n, k, layouts, ld pad)
    (1, 128, 256, 64, ("row", "row"), 0),
    (1, 129, 257, 65, ("row", "row"), 7),       # edges: TMA zero-fills, the stores are guarded
    (1, 127, 255, 63, ("col", "col"), 9),
    (1, 300, 200, 1000, ("row", "col"), 3),
    (1, 1000, 1000, 1000, ("col", "row"), 0),   # 128 x 128 tiles, several per cube
    (3, 67, 300, 200, ("row", "row"), 8),
    (1, 2, 3, 5, ("row", "row"), 11),
    (1, 200, 384, 300, ("row", "row"), 0),      # 64 x 128 tiles (small 16-bit problems), M edge
    (2, 100, 512, 130, ("col", "col"), 8),      # the same, batch
    (1, 2100, 2300, 200, ("row", "row"), 3),    # short K from a wave of tiles: ping-pong 128 x 128
    (1, 2049, 2111, 64, ("col", "row"), 0),
]


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("case", NUMERIC_CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}x{c[3]}-{''.join(x[0] for x in c[4])}")
def test_numerics(rng, dtype, case):
    check_numerics(rng, dtype, case, "specialized_wgmma")


def check_numerics(rng, dtype, case, algorithm):
    """``algorithm``'s product of fresh operands in ``case``'s layouts and pads into a NaN-poisoned
    output, against float64."""
    engine = sm90_engine()
    b, m, n, k, layouts, pad = case
    lead = (b,) if b > 1 else ()
    a, bb = random(rng, lead + (m, k), dtype), random(rng, lead + (k, n), dtype)
    da, db = padded(engine, a, layouts[0], pad), padded(engine, bb, layouts[1], pad)
    out = engine.runtime.to_device(np.full(lead + (m, n), np.nan, dtype=np_dtype(dtype)))
    engine.matmul(da, db, out=out, algorithm=algorithm)
    assert_close(engine.runtime.to_host(out), a, bb, dtype)


#: (batch, m, n, k, out leading dimension, out column offset): outputs TMA stores can address
#: (16-byte address and strides: edges clipped by the box, batch entries) and ones they cannot
#: (odd leading dimension, an address 2 bytes in), which take the direct stores in the same kernel.
OUTPUT_CASES = [(1, 129, 257, 65, 264, 0), (4, 67, 264, 200, 264, 0), (2, 300, 136, 72, 136, 0),
                (1, 129, 257, 65, 257, 0), (1, 200, 300, 64, 312, 1), (2, 300, 136, 72, 137, 0)]


@pytest.mark.parametrize("parts", [1, 2, 4])
@pytest.mark.parametrize("case", OUTPUT_CASES, ids=lambda c: "x".join(map(str, c)))
def test_numerics_of_each_output_path(rng, case, parts):
    engine = sm90_engine()
    b, m, n, k, ld, col0 = case
    alg = SpecializedWgmmaAlgorithm(tile_n=256, stages=3, store_parts=parts)
    lead = (b,) if b > 1 else ()
    a, bb = random(rng, lead + (m, k), "float16"), random(rng, lead + (k, n), "float16")
    buf = engine.runtime.to_device(np.full(lead + (m, ld + col0), np.nan, dtype=np.float16))
    out = buf[..., col0:col0 + n]
    engine.matmul(padded(engine, a, "row", 0), padded(engine, bb, "row", 0), out=out, algorithm=alg)
    host = engine.runtime.to_host(buf)
    assert_close(host[..., col0:col0 + n], a, bb, "float16")
    # Nothing outside the output was written (TMA clips its boxes at M and N).
    assert np.isnan(host[..., :col0]).all() and np.isnan(host[..., col0 + n:]).all()


@pytest.mark.parametrize("terms", ["bias", "bias_rows", "c", "mul"])
@pytest.mark.parametrize("case", [OUTPUT_CASES[0], OUTPUT_CASES[2], OUTPUT_CASES[3]], ids=lambda c: "x".join(map(str, c)))
def test_epilogue_arrays_on_tiles_past_the_edges(rng, case, terms):
    """The staging tile is filled past M and N without bounds tests, the epilogue's arrays read at
    the last row or column there (never stored); an output whose rows are not 16-byte multiples
    keeps the checked fill and its direct stores: each against float64, nothing outside written."""
    engine = sm90_engine()
    b, m, n, k, ld, _ = case
    lead = (b,) if b > 1 else ()
    a, bb = random(rng, lead + (m, k), "float16"), random(rng, lead + (k, n), "float16")
    ref = np.matmul(a.astype(np.float64), bb.astype(np.float64))
    kw = {}
    if terms.startswith("bias"):
        vec = random(rng, (m,) if terms == "bias_rows" else (n,), "float16")
        kw = {"bias": engine.runtime.to_device(vec), "bias_axis": 0 if terms == "bias_rows" else -1}
        ref = ref + (vec.astype(np.float64)[:, None] if terms == "bias_rows" else vec.astype(np.float64))
    else:
        arr = random(rng, lead + (m, n), "float16")
        kw = {"c": engine.runtime.to_device(arr), "beta": 0.5} if terms == "c" else {"mul": engine.runtime.to_device(arr)}
        ref = ref + 0.5 * arr if terms == "c" else ref * arr
    buf = engine.runtime.to_device(np.full(lead + (m, ld), np.nan, dtype=np.float16))
    engine.matmul(padded(engine, a, "row", 0), padded(engine, bb, "row", 0), out=buf[..., :n],
                  algorithm=SpecializedWgmmaAlgorithm(tile_n=256, stages=3, store_parts=2), **kw)
    host = engine.runtime.to_host(buf).astype(np.float64)
    assert rel_error(host[..., :n], ref) < 2e-3
    assert np.isnan(host[..., n:]).all()


#: (batch, m, n, k, layouts, broadcast b): contiguous operands with odd extents, which TMA cannot
#: address: copied into the K-major workspace first (re-pitched or transposed).
COPY_CASES = [(1, 131, 133, 75, ("row", "row"), False), (2, 67, 129, 33, ("col", "col"), False),
              (3, 65, 70, 45, ("row", "row"), True), (1, 300, 257, 1001, ("col", "row"), False)]


@pytest.mark.parametrize("case", COPY_CASES, ids=lambda c: "x".join(map(str, c[:4])) + "-" + "".join(x[0] for x in c[4]))
def test_numerics_of_copied_operands(rng, case):
    engine = sm90_engine()
    b, m, n, k, layouts, bcast = case
    lead = (b,) if b > 1 else ()
    a = random(rng, lead + (m, k), "float16")
    bb = random(rng, ((k, n) if bcast else lead + (k, n)), "float16")

    def on_device(x, layout):
        if layout == "row":
            return engine.runtime.to_device(x)
        return engine.runtime.to_device(np.ascontiguousarray(np.swapaxes(x, -1, -2))).swapaxes(-1, -2)
    out = engine.runtime.to_device(np.full(lead + (m, n), np.nan, dtype=np.float16))
    engine.matmul(on_device(a, layouts[0]), on_device(bb, layouts[1]), out=out, algorithm="specialized_wgmma")
    assert_close(engine.runtime.to_host(out), a, bb, "float16")


def test_dependent_calls_in_a_row(rng):
    """Each call reads the one before's result, the later ones through the direct launch (maps
    derived per address tuple): x @ P with P a permutation, exact in float16, six times."""
    engine = sm90_engine()
    n = 2048
    a = random(rng, (n, n), "float16")
    perm = rng.permutation(n)
    p = np.zeros((n, n), np.float16)
    p[np.arange(n), perm] = 1
    dp = engine.runtime.to_device(p)
    x = engine.runtime.to_device(a)
    want = a
    for _ in range(6):
        x = engine.matmul(x, dp, algorithm="specialized_wgmma")
        want = want[:, np.argsort(perm)]
    np.testing.assert_array_equal(engine.runtime.to_host(x), want)


def test_repeated_calls_derive_maps_once_per_address_pair():
    """The direct launch of a TMA plan derives its maps per (lhs, rhs, out) addresses, not per call."""
    from types import SimpleNamespace
    from gemm_engine.batch.base import CallValues
    from gemm_engine.call.launch import DirectLaunches
    alg, cfg = setup(problem())
    derived, launched = [], []

    def derive(values):
        derived.append((values["lhs_base"], values["rhs_base"], values["out_base"], values["lhs_ld"]))
        return {"lhs_map": b"L" * MAP_BYTES, "rhs_map": b"R" * MAP_BYTES, "out_map": b"O" * MAP_BYTES}
    plan = SimpleNamespace(call_values=CallValues(("lhs_map", "rhs_map", "out_map"), derive), signature=alg.signature(cfg),
                           workspace=None, kept=None)
    direct = DirectLaunches([lambda a, b, out, stream=None, structs=None: launched.append(structs) or True],
                            plan, {"lhs_ld": 192})
    # The output's map holds its address: a new output is a new derivation.
    for a, b, o in ((4096, 8192, 0), (4096, 8192, 0), (4096, 16384, 0), (4096, 16384, 512)):
        assert direct(a, b, o)
    assert derived == [(4096, 8192, 0, 192), (4096, 16384, 0, 192), (4096, 16384, 512, 192)]
    assert all(s == [b"L" * MAP_BYTES, b"R" * MAP_BYTES, b"O" * MAP_BYTES] for s in launched) and len(launched) == 4


def test_direct_launches_take_arrays_and_addresses_alike():
    """The short path (torch's addresses as ints) and the general one (runtime arrays) share the
    maps derived per address triple, and pass the launch the same values."""
    from types import SimpleNamespace
    from gemm_engine.batch.base import CallValues
    from gemm_engine.call.launch import DirectLaunches
    alg, cfg = setup(problem())
    derived, launched = [], []

    def derive(values):
        derived.append((values["lhs_base"], values["rhs_base"], values["out_base"]))
        return {"lhs_map": b"L" * MAP_BYTES, "rhs_map": b"R" * MAP_BYTES, "out_map": b"O" * MAP_BYTES}
    plan = SimpleNamespace(call_values=CallValues(("lhs_map", "rhs_map", "out_map"), derive), signature=alg.signature(cfg),
                           workspace=None, kept=None)
    direct = DirectLaunches([lambda a, b, out, *more, stream=None, structs=None: launched.append((a, more, stream))
                             or True], plan, {})
    array = lambda ptr: SimpleNamespace(data=SimpleNamespace(ptr=ptr))    # noqa: E731 -- a runtime array's address
    assert direct(4096, 8192, 0, 1.5, stream=3) and direct(array(4096), array(8192), array(0), stream=3)
    assert derived == [(4096, 8192, 0)]                      # one derivation for both forms
    assert launched[0] == (4096, (1.5,), 3) and launched[1][1:] == ((), 3)


@pytest.mark.parametrize("only_addresses", [True, False])
def test_maps_at_new_addresses_are_readdressed_once_seen_to_match(only_addresses):
    """A map holds its operand's address in its first 8 bytes: after a second address triple has
    shown that rewriting them gives what a full derivation gives, further triples are readdressed,
    not derived; where it did not (a map that depends on more than the address), every new triple
    is derived in full."""
    from types import SimpleNamespace
    from gemm_engine.batch.base import CallValues
    from gemm_engine.call.launch import DirectLaunches
    alg, cfg = setup(problem())
    derived, launched = [], []

    def encoded(address, tag):
        tail = tag * (MAP_BYTES - 8) if only_addresses else (tag + bytes([address >> 12 & 255])) * 60
        return address.to_bytes(8, "little") + tail

    def derive(values):
        derived.append((values["lhs_base"], values["rhs_base"], values["out_base"]))
        return {"lhs_map": encoded(values["lhs_base"], b"L"), "rhs_map": encoded(values["rhs_base"], b"R"),
                "out_map": encoded(values["out_base"], b"O")}
    plan = SimpleNamespace(call_values=CallValues(("lhs_map", "rhs_map", "out_map"), derive), signature=alg.signature(cfg),
                           workspace=None, kept=None)
    direct = DirectLaunches([lambda a, b, out, stream=None, structs=None: launched.append(structs) or True], plan, {})
    triples = [(4096 * i, 1 << 30, (1 << 31) + 8192 * i) for i in range(1, 7)]
    for a, b, o in triples:
        assert direct(a, b, o)
    assert derived == (triples[:2] if only_addresses else triples)
    for (a, b, o), got in zip(triples, launched):
        assert got == [encoded(a, b"L"), encoded(b, b"R"), encoded(o, b"O")]


def test_direct_launches_of_a_plan_with_copies_share_a_fresh_workspace():
    """A plan that copies operands first: every kernel gets the same fresh workspace (allocated on
    the call's stream), the maps derive with its address, and a refusal of the first launches
    nothing."""
    import contextlib
    from types import SimpleNamespace
    from gemm_engine.batch.base import CallValues, Workspace
    from gemm_engine.call.launch import DirectLaunches
    alg, cfg = setup(problem(align=4))
    seen, allocations = [], []

    class Scratch:
        def __init__(self, n):
            self.data = SimpleNamespace(ptr=1 << 30 | len(allocations) << 12)
            allocations.append(n)
    runtime = SimpleNamespace(on_stream=lambda stream: contextlib.nullcontext(), scratch=lambda count, dtype: Scratch(count))
    plan = SimpleNamespace(call_values=CallValues(("lhs_map", "rhs_map", "out_map"),
                                                  lambda v: seen.append(v["workspace"]) or dict.fromkeys(
                                                      ("lhs_map", "rhs_map", "out_map"), bytes(MAP_BYTES))),
                           signature=alg.signature(cfg), workspace=Workspace(BY_NAME["float16"], 4096), kept=None)
    got = []
    kernels = [lambda *xs, stream=None, structs=None, i=i: got.append((i, xs[-1].data.ptr)) or True for i in range(3)]
    assert DirectLaunches(kernels, plan, {}, runtime)(1, 2, 3, stream=7)
    assert allocations == [4096] and seen == [1 << 30] and got == [(0, 1 << 30), (1, 1 << 30), (2, 1 << 30)]
    refusing = [lambda *xs, stream=None, structs=None: False] + kernels
    got.clear()
    assert not DirectLaunches(refusing, plan, {}, runtime)(1, 2, 3) and got == []


def test_register_reallocation_fits_the_register_file():
    """setmaxnreg.inc blocks until the registers exist: the consumers' request plus the producer's
    keep must fit the file (3 consumers at 160 hung on the H100), in multiples of 8."""
    from gemm_engine.global_.tma_specialized_config import (CONSUMER_REGISTERS, PRODUCER_REGISTERS,
                                                            REGISTER_FILE)
    for consumers, regs in CONSUMER_REGISTERS.items():
        assert regs % 8 == 0 and regs <= 240
        assert (consumers * regs + PRODUCER_REGISTERS) * 128 <= REGISTER_FILE, consumers


@pytest.mark.parametrize("m, n, k, wm", [
    (1024, 1024, 4096, 1),   # 64 tiles of 128 x 128: under a wave, 64 x 128 tiles
    (1024, 1000, 4096, 2),   # rows of 2000 bytes from 2^32 operations: 64-row tiles would read b twice as often
    (1024, 1000, 1024, 1),   # ... below, one wave of them (clusters sharing b: selector/small_wave.py)
    (2048, 2048, 2048, 2),   # 128 x 256 tiles
    (128, 14336, 4096, 2),   # 112 tiles of 128 x 128: 224 of 64 x 128 would overflow a wave
])
def test_small_16_bit_problems_take_64_row_tiles(m, n, k, wm):
    sel = SpecializedWgmmaAlgorithm().selection_for(problem(m=m, n=n, k=k), SM90)
    assert sel.warpgroups_m * sel.partition_m == wm


def test_auto_takes_the_specialized_kernel_for_mid_size_16_bit_problems():
    from gemm_engine.algorithms import REGISTRY
    auto = REGISTRY["auto"]()
    # A long K over tiles that fill half the device once split along K (split_tail) runs in one
    # kernel; over fewer it still splits in two kernels; a small problem takes it where its 64 x 128
    # tiles fill a wave (selector/small_wave.py) and stays on the kernel cheaper to call below.
    for (m, n, k), name in {(1024, 1024, 4096): "specialized_wgmma", (1000, 1000, 1000): "specialized_wgmma",
                            (512, 512, 512): "pipelined_wgmma",
                            (512, 512, 65536): "specialized_wgmma", (256, 256, 16384): "split_k_wgmma"}.items():
        assert auto.chosen(auto.setup(problem(m=m, n=n, k=k), SM90)).name == name
