"""selector/specialized_wgmma.py: the Hopper warp-specialized tilings (tile, ring beside the staged
output, order, clusters, split tail) and what a caller's overrides take back."""
from __future__ import annotations

from dataclasses import replace

from gemm_engine.call.prepare import dense_problem
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.dtypes import BFLOAT16, bfloat16_dtype
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.selector.ragged import ragged_copies
from gemm_engine.selector.split_tail import long_k_wide
from gemm_engine.selector.specialized_wgmma import (BLOCK_SCALED_STAGES, CLUSTER_MIN_K, MIN_STAGES, SPLIT_MAX, WAVE_TILES,
                                                    pingpong_preset, select_specialized_tiling, selected_tiles,
                                                    specialized_tuning_space, specialized_yield_to, split_parts,
                                                    store_plan, wave_cost)
from renders import any_problem

DEVICE = nominal_cuda_device(9, 0)
SM90 = dialect_for(DEVICE)
SMS = DEVICE.compute_units
FP8 = dict(epilogue=Epilogue(lhs_scale="vector", rhs_scale="vector"), out="bfloat16")


def test_tile_by_how_many_tiles_fill_the_device():
    assert selected_tiles(select_specialized_tiling(any_problem((1, 4096, 4096, 4096)), SM90)) == (128, 256)
    # 2048^2: 128 tiles of 128 x 256, more than half a wave of 132: still the large tile.
    assert selected_tiles(select_specialized_tiling(any_problem((1, 2048, 2048, 2048)), SM90)) == (128, 256)
    # 1024 x 2048: 64 tiles of 128 x 256 (at most half a wave), 128 of 128 x 128; 256 of 64 x 128
    # would overflow the wave.
    assert selected_tiles(select_specialized_tiling(any_problem((1, 1024, 2048, 2048)), SM90)) == (128, 128)
    # Under a wave of 128 x 128 tiles with whole 128-byte rows: 64 x 128, one consumer warpgroup.
    assert selected_tiles(select_specialized_tiling(any_problem((1, 1024, 1024, 4096)), SM90)) == (64, 128)
    # ... not with a ragged row of the output (1000 halves: 2000 bytes) from 2^32 operations; below, one
    # wave of them takes 64 x 128 whatever the rows (selector/small_wave.py).
    assert selected_tiles(select_specialized_tiling(any_problem((1, 1024, 1000, 4096)), SM90)) == (128, 128)
    assert selected_tiles(select_specialized_tiling(any_problem((1, 1024, 1000, 1024)), SM90)) == (64, 128)


def test_promoted_tiles_three_warpgroups_from_eight_waves():
    big = select_specialized_tiling(any_problem((1, 8192, 8192, 8192), "float8_e4m3fn", **FP8), SM90)
    assert selected_tiles(big) == (192, 128) and "promote_behind" not in big
    mid = select_specialized_tiling(any_problem((1, 4096, 4096, 4096), "float8_e4m3fn", **FP8), SM90)
    assert selected_tiles(mid) == (128, 128) and mid["promote_behind"] is True
    block = dict(epilogue=Epilogue(lhs_scale="block", rhs_scale="block"), out="bfloat16")
    blocked = select_specialized_tiling(any_problem((1, 8192, 8192, 8192), "float8_e4m3fn", **block), SM90)
    assert blocked["stages"] == BLOCK_SCALED_STAGES and blocked["split_tail"] >= 2


def test_clusters_on_long_k_16_bit_tiles_and_split_tails_on_a_short_last_wave():
    long_k = select_specialized_tiling(any_problem((1, 8192, 8192, CLUSTER_MIN_K)), SM90)
    assert long_k.get("cluster_m") == 2 and "split_tail" not in long_k
    assert "cluster_m" not in select_specialized_tiling(any_problem((1, 8192, 8192, CLUSTER_MIN_K // 2)), SM90)
    # fp8 1024 x 1024 x 8192: 64 tiles of 128 x 128 on 132 multiprocessors, split in two along K.
    tail = select_specialized_tiling(any_problem((1, 1024, 1024, 8192), "float8_e4m3fn", **FP8), SM90)
    assert tail["split_tail"] == 2


def test_split_parts():
    p = any_problem((1, 1024, 1024, 8192))
    assert split_parts(p, SMS, 2 * SMS) == 1                       # whole waves: nothing to split
    assert split_parts(p, SMS, 64) == 2                            # 132 // 64
    assert split_parts(p, SMS, 10) == SPLIT_MAX                    # at most SPLIT_MAX
    short = any_problem((1, 1024, 1024, 24 * 64 * 2 - 64))         # under 2 x 24 slots of 128 bytes
    assert split_parts(short, SMS, 10) == 1


def test_store_plan_parts_slots_and_direct_stores():
    p = any_problem((1, 4096, 4096, 4096))
    assert store_plan(p, SM90, 128, 256, 4) == dict(stages=4, tma_store=True, store_parts=2)
    int8 = any_problem((1, 4096, 4096, 4096), "int8")            # int32 results: 128 KiB whole
    assert store_plan(int8, SM90, 128, 256, 4) == dict(stages=4, tma_store=True, store_parts=4)
    tiny = dialect_for(replace(DEVICE, max_shared_memory=100 * 1024))
    plan = store_plan(int8, tiny, 128, 256, 4)
    assert plan["tma_store"] is False or plan["stages"] >= MIN_STAGES


def test_yield_to_drops_what_goes_with_a_knob_the_caller_overrides():
    chosen = dict(warpgroups_m=2, warpgroups_n=1, split_tail=2, promote_behind=True)
    assert "split_tail" not in specialized_yield_to(chosen, dict(cluster_m=2))
    assert "split_tail" not in specialized_yield_to(chosen, dict(schedule="pingpong"))
    assert specialized_yield_to(chosen, dict(split_tail=2, cluster_m=2))["split_tail"] == 2
    assert "cluster_m" not in specialized_yield_to(dict(chosen, cluster_m=2), dict(split_tail=3))
    assert "promote_behind" not in specialized_yield_to(chosen, dict(warpgroups_m=3))
    assert specialized_yield_to(chosen, {}) == chosen


def test_short_k_takes_ping_pong_from_a_wave_of_tiles():
    """K <= PINGPONG_MAX_K (a tile of a few slots: mostly its epilogue), 16-bit, at least a wave of
    128 x 128 tiles: ping-pong 128 x 128 (H200: 8192^2 x 256 67.1 us a call against 75.8, 16384 x
    4096 x 128 46.9 against 56.4; bench/SELECTION_NOTES.md "Short K: ping-pong")."""
    from gemm_engine.selector.specialized_wgmma import PINGPONG_MAX_K
    for shape in ((8192, 8192, 256), (5101, 6008, 64), (16384, 4096, PINGPONG_MAX_K // 2)):
        sel = select_specialized_tiling(any_problem((1, *shape), "bfloat16"), SM90)
        assert (sel["schedule"], sel["partition_m"], sel["tile_n"]) == ("pingpong", 2, 128), shape
    for shape, dtype in (((8192, 8192, PINGPONG_MAX_K + 64), "bfloat16"),    # a longer K: cooperative
                         ((1024, 1024, 64), "bfloat16"),                       # under a wave of tiles
                         ((8192, 8192, 256), "float8_e4m3fn")):               # promoted
        sel = select_specialized_tiling(any_problem((1, *shape), dtype, **(FP8 if dtype != "bfloat16" else {})), SM90)
        assert sel.get("schedule", "cooperative") == "cooperative", (shape, dtype)
    # Not a float32 output (with c its ping-pong copy spills), nor where the dense-only rules are off.
    wide_out = any_problem((1, 8192, 8192, 256), "bfloat16", out="float32")
    assert select_specialized_tiling(wide_out, SM90).get("schedule", "cooperative") == "cooperative"
    short = any_problem((1, 8192, 8192, 256), "bfloat16")
    assert "schedule" not in select_specialized_tiling(short, SM90, dense_rules=False)
    assert "schedule" not in select_specialized_tiling(short, SM90, short_k=False)


def test_tuning_space_and_pingpong():
    p = any_problem((1, 4096, 4096, 4096))
    first = select_specialized_tiling(p, SM90)
    space = specialized_tuning_space(p, SM90, first)
    assert space[0] == first and pingpong_preset(p, SM90, 2, 128) in space
    assert all(s.get("schedule", "cooperative") == "cooperative" for s in space[:-2])
    assert pingpong_preset(p, SM90, 1, 256)["schedule"] == "pingpong"


# -- weight streaming (decode batches) and waves --------------------------------------------------------
LINEAR = ("row", "col")      # x @ W.T, W as nn.Linear stores it


def test_decode_tiles_fit_the_short_side_and_split_only_where_the_call_gains():
    """A split kernel whose owners wait is launched cooperatively, and its calls took 17-20 us
    whatever its kernel; the last-arriver fixup's (64-row tiles) about 3 us over it
    (bench/SELECTION_NOTES.md, "decode_tiling", "split_fixup"): the tiles split only where the call
    gains. 16-bit tiles are 64 columns wide where those fit a wave ("Short problems"), 32 where
    those fill most of one ("32-column tiles")."""
    # 1-64 rows of a 4096 x 4096 weight: 128 tiles of 64 x 32, whole (test_thin_tiles_fill_a_wave...;
    # the copies read only the rows inside M).
    for rows in (2, 16, 64):
        sel = select_specialized_tiling(any_problem((1, rows, 4096, 4096), "bfloat16", LINEAR), SM90)
        assert selected_tiles(sel) == (64, 32) and "split_tail" not in sel and sel["stages"] == 16
        assert sel["dispatch"] == "row_major"
    # 65-128 rows: 128 x 64 tiles (80 rows: 12.0 us against 17.1 in 64 x 128 tiles over two row blocks).
    for rows in (80, 100, 128):
        sel = select_specialized_tiling(any_problem((1, rows, 4096, 4096), "bfloat16", LINEAR), SM90)
        assert selected_tiles(sel) == (128, 64) and "split_tail" not in sel and sel["stages"] == 8
    # 128 x 64 tiles hold 32 KiB partials, as 64 x 128 ones: up to 8 parts, the last arriver adding them
    # (72 x 2048 x 8192: 4 parts 13.7 us against 19.7 in 2); 64 KiB partials (128 x 128) stay at 2, the owner's.
    for rows in (72, 128):
        sel = select_specialized_tiling(any_problem((1, rows, 2048, 8192), "bfloat16", LINEAR), SM90)
        assert selected_tiles(sel) == (128, 64) and sel["split_tail"] == 4 and sel["split_fixup"] == "last"
    from gemm_engine.selector.specialized_wgmma import decode_fixups, decode_parts_max, partial_kib
    assert [partial_kib(s) for s in ((1, 1, 1, 64, 12), (2, 1, 1, 64, 8), (1, 1, 1, 128, 6), (2, 1, 1, 128, 6))] == \
        [16, 32, 32, 64]
    wide = any_problem((1, 100, 1024, 65536), "bfloat16", LINEAR)
    assert decode_fixups(wide, (2, 1, 1, 128, 6)) == ("owner",) and decode_parts_max(wide, SM90, (2, 1, 1, 128, 6)) == 2
    assert decode_fixups(wide, (2, 1, 1, 64, 8)) == ("owner", "last") and decode_parts_max(wide, SM90, (2, 1, 1, 64, 8)) == 8
    # A long K of 2560 columns streams on three times the cubes, the owner adding the parts (a long part's
    # fixup is a small share); 4096 columns take 128 whole tiles of 64 x 32.
    sel = select_specialized_tiling(any_problem((1, 16, 2560, 14336), "bfloat16", LINEAR), SM90)
    assert selected_tiles(sel) == (64, 64) and sel["split_tail"] == 3 and "split_fixup" not in sel
    # 14336 columns: 224 tiles of 64 columns would not fit a wave; 112 tiles of 64 x 128 already stream
    # on 112 multiprocessors, no split (as 128 x 14336 x 4096 ran at cuBLAS's speed in 112 tiles of 128 x 128).
    sel = select_specialized_tiling(any_problem((1, 64, 14336, 4096), "bfloat16", LINEAR), SM90)
    assert selected_tiles(sel) == (64, 128) and "split_tail" not in sel
    assert select_specialized_tiling(any_problem((1, 128, 14336, 4096), "bfloat16", LINEAR), SM90) == \
        dict(warpgroups_m=2, warpgroups_n=1, partition_m=1, tile_n=128, stages=6, tma_store=True, store_parts=1,
             dispatch="row_major")
    # 256 columns (two warpgroups side by side) only in the tuning space: slower on every row measured.
    sel = select_specialized_tiling(any_problem((1, 16, 16384, 4096), "bfloat16", LINEAR), SM90)
    assert selected_tiles(sel) == (64, 128)
    # N short (a weight times a few vectors): 128 x 64 tiles along M, split as M short ones are.
    sel = select_specialized_tiling(any_problem((1, 4096, 16, 4096), "bfloat16"), SM90)
    assert selected_tiles(sel) == (128, 64) and sel["split_tail"] == 4 and sel["split_fixup"] == "last"
    sel = select_specialized_tiling(any_problem((1, 14336, 16, 4096), "bfloat16"), SM90)
    assert selected_tiles(sel) == (128, 64) and "split_tail" not in sel
    # fp8 promotes: the tile whose two accumulator sets fit; a 16 MiB weight streams in 8 us whole.
    f8 = select_specialized_tiling(any_problem((1, 16, 4096, 4096), "float8_e4m3fn", LINEAR, **FP8), SM90)
    assert selected_tiles(f8) == (64, 128) and "split_tail" not in f8
    f8 = select_specialized_tiling(any_problem((1, 16, 8192, 16384), "float8_e4m3fn", LINEAR, **FP8), SM90)
    assert selected_tiles(f8) == (64, 128) and f8["split_tail"] == 2


def test_thin_tiles_fill_a_wave_where_64_columns_fill_half():
    """Up to 64 rows, 32-column tiles where they fill more than two thirds of a wave, whole, 16 slots
    (bench/SELECTION_NOTES.md, "32-column tiles": H200 kernels of weights read once, us, against the
    rule before: 8 x 4096 x 14336 31.0 / 34.8, 4 x 4096 x 11008 24.5 / 28.7, 16 x 3072 x 8192 18.0 /
    20.6); 64 columns split where they would leave more idle (48 x 2048 x 8192 17.4 against 12.5,
    56 x 2560 x 10240 22.4 against 21.9); not past 64 rows, nor for promoting problems."""
    from gemm_engine.selector.specialized_wgmma import THIN_MIN_FILL, THIN_STAGES
    assert (THIN_STAGES, THIN_MIN_FILL) == (16, 2 / 3)
    for shape, layout, dtype in (((8, 4096, 14336), LINEAR, "bfloat16"), ((4, 4096, 11008), LINEAR, "bfloat16"),
                                 ((16, 3072, 8192), LINEAR, "bfloat16"), ((40, 4000, 5120), LINEAR, "bfloat16"),
                                 ((12, 4096, 6144), ("row", "row"), "float16"), ((24, 4224, 4096), LINEAR, "float16")):
        sel = select_specialized_tiling(any_problem((1, *shape), dtype, layout), SM90)
        assert selected_tiles(sel) == (64, 32) and "split_tail" not in sel and sel["stages"] == 16, shape
    for shape, parts in (((48, 2048, 8192), 4), ((56, 2560, 10240), 3), ((64, 4352, 4096), 0)):
        sel = select_specialized_tiling(any_problem((1, *shape), "bfloat16", LINEAR), SM90)
        assert selected_tiles(sel) == (64, 64) and sel.get("split_tail", 0) == parts, shape
    assert selected_tiles(select_specialized_tiling(any_problem((1, 80, 4096, 4096), "bfloat16", LINEAR), SM90)) == (128, 64)
    f8 = select_specialized_tiling(any_problem((1, 16, 4096, 4096), "float8_e4m3fn", LINEAR, **FP8), SM90)
    assert selected_tiles(f8) == (64, 128)


def test_decode_call_model_reproduces_the_measured_calls():
    """The model behind the parts (selector/waves.py, `decode_call_us`) against the probe's whole
    calls (bench/results/h100/shape_probe_decode.md), within 10%."""
    from gemm_engine.selector.specialized_wgmma import decode_call_us
    measured = [((64, 4096, 4096), (1, 1, 1, 128, 6), 1, 17.7), ((128, 4096, 4096), (2, 1, 1, 128, 6), 1, 23.8),
                ((128, 4096, 4096), (2, 1, 1, 128, 6), 2, 20.1), ((8, 4096, 14336), (1, 1, 1, 128, 6), 4, 46.0),
                ((8, 4096, 14336), (1, 1, 1, 128, 6), 1, 62.7), ((8, 14336, 4096), (1, 1, 1, 128, 6), 1, 44.2),
                ((64, 4096, 4096), (1, 1, 1, 128, 6), 4, 20.1),
                # the last-arriver fixup (bench/SELECTION_NOTES.md, "split_fixup")
                ((32, 4096, 4096), (1, 1, 1, 128, 6), (4, "last"), 15.8),
                ((32, 4096, 14336), (1, 1, 1, 128, 6), (4, "last"), 48.6)]
    for (m, n, k), shape, parts, ms in measured:
        parts, fixup = parts if isinstance(parts, tuple) else (parts, "owner")
        got = decode_call_us(any_problem((1, m, n, k), "bfloat16", LINEAR), SM90, shape, parts, fixup)
        assert abs(got - ms) <= 0.1 * ms, (m, n, k, parts, got, ms)


def test_decode_leaves_tiny_outputs_to_split_k():
    from gemm_engine.selector.specialized_wgmma import decode_tiling
    assert decode_tiling(any_problem((1, 128, 128, 262144), "bfloat16", LINEAR), SM90) is None   # 1 tile
    assert decode_tiling(any_problem((1, 16, 4096, 4096), "bfloat16", LINEAR), SM90) is not None


def test_decode_space_offers_each_shape_in_several_parts():
    space = specialized_tuning_space(any_problem((1, 16, 4096, 4096), "bfloat16", LINEAR), SM90, {})
    decode = [s for s in space if s.get("dispatch") == "row_major" and s.get("warpgroups_m") == 1]
    assert {(s["tile_n"] * s["warpgroups_n"], s.get("split_tail", 1)) for s in decode} >= {(128, 1), (128, 4), (256, 8)}


def test_waves_take_192_x_96_where_it_fills_the_wave_192_x_128_leaves():
    """1536^3: 96 tiles of 192 x 128 (0.73 of a wave) against 128 of 192 x 96 (0.97): 0.5625 / 0.87
    against 0.75 / 0.975 tile times (H200 kernels 12.7 us against 15.3, both layouts; held out, every
    changed row measured faster: 384 x 6144 x 2048 15.9 / 19.3, 945 x 2339 x 4096 39.3 / 47.0, 4595 x
    1031 x 1024 36.1 / 42.3); staged whole beside five slots in 64-byte bands."""
    for layout in (("row", "row"), LINEAR):
        for dtype in ("bfloat16", "float16"):
            chosen = select_specialized_tiling(any_problem((1, 1536, 1536, 1536), dtype, layout), SM90)
            assert selected_tiles(chosen) == (192, 96)
            assert (chosen["stages"], chosen["store_parts"], chosen["tma_store"]) == (5, 1, True)
    for shape in ((1, 384, 6144, 2048), (1, 945, 2339, 4096), (1, 4595, 1031, 1024), (1, 2304, 1024, 2048)):
        assert selected_tiles(select_specialized_tiling(any_problem(shape, "bfloat16"), SM90)) == (192, 96)
    # Where its tiles spill into another wave the others do not: 1280 x 1920 (140 tiles; H200 30.9
    # us against 20.3 for 192 x 128), 2304^3 (47.1 against 41.2), 3072 x 1536^2 (192 x 192: 23.8 / 22.0).
    for shape, tile in (((1, 1280, 1920, 2048), (192, 128)), ((1, 2304, 2304, 2304), (192, 128)),
                        ((1, 3072, 1536, 1536), (192, 192))):
        assert selected_tiles(select_specialized_tiling(any_problem(shape, "bfloat16"), SM90)) == tile
    # Not for a float32 output (three parts then: not measured).
    f32 = select_specialized_tiling(any_problem((1, 1536, 1536, 1536), "bfloat16", out="float32"), SM90)
    assert selected_tiles(f32) != (192, 96)


def test_waves_choose_the_tile_past_half_a_wave():

    # 3000^3: 288 tiles of 128 x 256 fill 2.2 waves (3 tile times); 384 of 192 x 128 fill 2.9 (3 of
    # 0.75 / 0.975); 256 of 192 x 192 fill 1.9 (2 of 1.125): 192 x 192 (H200: 94.6 us against 106.1).
    p = any_problem((1, 3000, 3000, 3000), "bfloat16")
    assert wave_cost(p, SMS, WAVE_TILES[0][0], WAVE_TILES[0][1]) == 3.0
    assert wave_cost(p, SMS, WAVE_TILES[3][0], WAVE_TILES[3][1]) == 2.25
    chosen = select_specialized_tiling(p, SM90)
    assert selected_tiles(chosen) == (192, 192)
    # Four slots beside the staged tile in three 64-column parts; never split along K.
    assert (chosen["stages"], chosen["store_parts"], chosen["tma_store"]) == (4, 3, True)
    # ... timed whole even where a split would fill the last wave (2863 x 3869 x 3069: 315 tiles, a
    # last wave of 51 the rule would split in 2 for other tiles): three whole waves of 1.125.
    odd = any_problem((1, 2863, 3869, 3069), "bfloat16")
    assert split_parts(odd, SMS, 15 * 21) == 2 and wave_cost(odd, SMS, WAVE_TILES[3][0], 1.0) == 3 * 1.125
    # Only where its output is staged beside all four slots (as measured): not a float32 output.
    assert selected_tiles(select_specialized_tiling(any_problem((1, 3000, 3000, 3000), "bfloat16", out="float32"),
                                                    SM90)) != (192, 192)
    assert selected_tiles(select_specialized_tiling(p, SM90, dense_rules=False)) == (192, 128)
    assert selected_tiles(select_specialized_tiling(any_problem((1, 1536, 1536, 1536), "bfloat16"), SM90,
                                                    dense_rules=False)) == (192, 128)
    # The measured rows keep 128 x 256: full waves (4096^3, 2048^3, 8192^3, 8192 x 12288 x 4096, 8192 x
    # 4096 x 11008) and tails the other tiles fill no better by 5% (5120^3, 6144^3, 7168^3).
    for shape in ((4096, 4096, 4096), (2048, 2048, 2048), (8192, 8192, 8192), (8192, 12288, 4096),
                  (8192, 4096, 11008), (5120, 5120, 5120), (6144, 6144, 6144), (7168, 7168, 7168)):
        for dtype in ("bfloat16", "float16"):
            assert selected_tiles(select_specialized_tiling(any_problem((1, *shape), dtype), SM90)) == (128, 256)
    # Not for 32-bit or 8-bit operands (their tiles and stores were measured apart).
    assert selected_tiles(select_specialized_tiling(any_problem((1, 3000, 3000, 3000), "int8", LINEAR), SM90)) \
        == (128, 256)


def test_ragged_rows_are_copied_where_the_pass_costs_less_than_it_saves():
    """bf16 3000^3 in 192 x 128 tiles ran 0.133 ms against 3008^3's 0.085 (rows of whole 128-byte
    lines); a pass over an 18 MB operand costs about 16 us: copied from about 2100 cubed
    (bench/SELECTION_NOTES.md, "ragged_copies"). 192 x 192 tiles lose less to ragged rows than the
    passes cost: not copied."""
    assert ragged_copies(any_problem((1, 3000, 3000, 3000), "bfloat16"), (192, 128))
    assert not ragged_copies(any_problem((1, 3000, 3000, 3000), "bfloat16"), (192, 192))
    assert "copy_ragged" not in select_specialized_tiling(any_problem((1, 3000, 3000, 3000), "bfloat16"), SM90)
    # 128 x 256: copied where TMA needs a copy anyway (5000-byte rows), else clusters over its sectors
    assert select_specialized_tiling(dense_problem(1, 2500, 2500, 2500, bfloat16_dtype()), SM90)["copy_ragged"]
    sel = select_specialized_tiling(any_problem((1, 2500, 2500, 2500), "bfloat16"), SM90)
    assert "copy_ragged" not in sel and sel["cluster_m"] == 2
    assert "copy_ragged" not in select_specialized_tiling(any_problem((1, 3008, 3008, 3008), "bfloat16"), SM90)
    assert not ragged_copies(any_problem((1, 2000, 2000, 2000), "bfloat16"))        # 8 us of copies, 3 saved
    assert not ragged_copies(any_problem((1, 5101, 6008, 64), "bfloat16"))          # a short K: little to save
    # Copied anyway (TMA's 16 bytes): whole lines cost only the pitch.
    assert ragged_copies(any_problem((1, 1000, 1000, 1000), "bfloat16", align=(1, 1)))
    # Weight streaming keeps its decode tiling (a pass would double the bytes).
    assert "copy_ragged" not in select_specialized_tiling(any_problem((1, 64, 4100, 4100), "bfloat16", LINEAR), SM90)
    space = specialized_tuning_space(any_problem((1, 3000, 3000, 3000), "bfloat16"), SM90, {"copy_ragged": True})
    assert {"copy_ragged": False} in space


def test_long_k_under_a_wave_keeps_two_consumer_warpgroups():
    """1024 x 1024: 64 x 128 tiles (one consumer warpgroup) at K = 4096 and 16384, where they
    measured fastest; from K = 65536, 128 x 256 tiles in 4 parts along K, as many parts busy as 128
    x 128 tiles in 2 at the larger tile's rate (H200: 179 us against 186); 2048 x 1024 x 65536 in 2
    parts against 128 unsplit 128 x 128 tiles (339 against 361); not where the larger tiles would
    not be fewer (128 x 128 x 65536) or would leave most multiprocessors idle (512 x 512)."""
    sel = select_specialized_tiling(any_problem((1, 1024, 1024, 4096), "bfloat16"), SM90)
    assert selected_tiles(sel) == (64, 128)
    assert selected_tiles(select_specialized_tiling(any_problem((1, 1024, 1024, 16384), "bfloat16"), SM90)) == (64, 128)
    sel = select_specialized_tiling(any_problem((1, 1024, 1024, 65536), "bfloat16"), SM90)
    assert selected_tiles(sel) == (128, 256) and sel["split_tail"] == 4
    sel = select_specialized_tiling(any_problem((1, 2048, 1024, 65536), "float16"), SM90)
    assert selected_tiles(sel) == (128, 256) and sel["split_tail"] == 2
    assert selected_tiles(select_specialized_tiling(any_problem((1, 512, 512, 65536), "bfloat16"), SM90)) == (64, 128)
    assert selected_tiles(select_specialized_tiling(any_problem((1, 128, 128, 65536), "bfloat16"), SM90)) == (64, 128)


def test_long_k_splits_128_x_256_tiles_into_more_parts_where_more_are_busy():
    """From K = 65536 the 128 x 256 tiles split into up to 8 parts where that busies more
    multiprocessors than 128 x 128's parts (1024 x 768: 24 tiles in 5 parts, 120 busy against 96;
    768 x 768 x 131072 in 7, 126 against 108), not where as many are busy in more parts than
    SPLIT_MAX (1024 x 512: 16 tiles in 8 against 32 in 4, measured slower)."""
    for shape, parts in (((1, 1024, 768, 65536), 5), ((1, 768, 768, 131072), 7)):
        sel = select_specialized_tiling(any_problem(shape, "bfloat16"), SM90)
        assert selected_tiles(sel) == (128, 256) and sel["split_tail"] == parts, shape
    sel = select_specialized_tiling(any_problem((1, 1024, 512, 65536), "bfloat16"), SM90)
    assert selected_tiles(sel) == (128, 128) and sel["split_tail"] == SPLIT_MAX
    assert long_k_wide(any_problem((1, 1024, 512, 65536), "bfloat16"), SMS, 32) == 0
    # A part's work counts padded tiles: 384 or 640 columns leave a 128 x 256 tile half empty, so
    # more parts of them are not shorter (1536 x 384: 5 against 128 x 128's 3; 768 x 640: 7 against 4).
    for shape, tile, parts in (((1, 1536, 384, 65536), (128, 128), 3), ((1, 768, 640, 65536), (128, 128), 4),
                               ((1, 512, 640, 65536), (128, 128), 4), ((1, 384, 384, 65536), (64, 128), 4)):
        sel = select_specialized_tiling(any_problem(shape, "bfloat16"), SM90)
        assert (selected_tiles(sel), sel["split_tail"]) == (tile, parts), shape
    # Rows of ragged sectors keep the long-K split (a cluster would run the tiles whole).
    sel = select_specialized_tiling(dense_problem(1, 1000, 1000, 70000, bfloat16_dtype()), SM90)
    assert selected_tiles(sel) == (128, 256) and sel["split_tail"] == 4 and "cluster_m" not in sel
    # The grouped and converting callers' tilings were measured without it.
    sel = select_specialized_tiling(any_problem((1, 1024, 1024, 65536), "bfloat16"), SM90, dense_rules=False)
    assert selected_tiles(sel) == (128, 128) and sel["split_tail"] == 2


def test_rows_of_whole_64_byte_halves_are_not_copied_for_the_copys_sake():
    """The H100 measured 4000^3 bf16 (8000-byte rows) 17% slower with copy_ragged, 3000^3 (6000)
    14% faster (bench/SELECTION_NOTES.md, "Ragged rows")."""
    def square(n):
        return MatmulProblem(1, n, n, n, BFLOAT16, BFLOAT16, BFLOAT16, Layout.ROW, Layout.ROW, 8, 8)
    assert ragged_copies(square(3000)) and not ragged_copies(square(4000)) and not ragged_copies(square(4096))


def test_clusters_over_an_rhs_of_ragged_sectors():
    """192 x 192 tiles take clusters of two sharing each rhs slot where the rhs is left uncopied and
    its rows are not whole 32-byte sectors (3000^3: 6000-byte rows; H200 90.9 -> 77.8 us), K past
    2048; not over whole sectors (4000-byte rows of a column-major rhs measured 1.5% slower), nor
    where the rows are copied."""
    for shape, layout in (((1, 3000, 3000, 3000), "row"), ((1, 3000, 3000, 3000), "col"), ((1, 2990, 3010, 3000), "row")):
        sel = select_specialized_tiling(any_problem(shape, "bfloat16", ("row", layout)), SM90)
        assert selected_tiles(sel) == (192, 192) and sel.get("cluster_m") == 2, shape
    for shape, layout in (((1, 3000, 3000, 4064), "col"), ((1, 3000, 3000, 2048), "row"), ((1, 3000, 6000, 3000), "row")):
        sel = select_specialized_tiling(any_problem(shape, "bfloat16", ("row", layout)), SM90)
        # 8128- / 12000-byte rhs rows: whole sectors; K at 2048
        assert selected_tiles(sel) == (192, 192) and "cluster_m" not in sel, shape
    # 128 x 256 tiles only in place of copies, as measured: never-copied rows keep their kernel
    assert "cluster_m" not in select_specialized_tiling(dense_problem(1, 1000, 3000, 3000, bfloat16_dtype()), SM90)
    for shape in ((1, 2900, 2900, 2900), (1, 2335, 3542, 607), (1, 3129, 5917, 7677), (1, 3500, 3500, 3500)):
        sel = select_specialized_tiling(dense_problem(*shape, bfloat16_dtype()), SM90)     # rows copied
        assert sel.get("copy_ragged") and "cluster_m" not in sel, shape
    # 128 x 256 tiles: the cluster in place of copies made for the lines' sake alone (5000 x 3000 x
    # 3000 134.7 us against 160.1), not over whole sectors (6000^2 x 3000: 12000-byte rhs rows)
    for shape in ((1, 5000, 3000, 3000), (1, 7000, 5000, 3000)):
        sel = select_specialized_tiling(dense_problem(*shape, bfloat16_dtype()), SM90)
        assert selected_tiles(sel) == (128, 256) and "copy_ragged" not in sel and sel["cluster_m"] == 2, shape
    sel = select_specialized_tiling(dense_problem(1, 6000, 6000, 3000, bfloat16_dtype()), SM90)
    assert sel["copy_ragged"] and "cluster_m" not in sel
    # a c read beside the multicast spills: no cluster there
    c_read = replace(any_problem((1, 3000, 3000, 3000), "bfloat16"), epilogue=Epilogue(c=BFLOAT16, scaled=True))
    assert "cluster_m" not in select_specialized_tiling(c_read, SM90)
