"""Hopper Specialized algorithm: TMA producer, mbarrier ring, warp-specialized wgmma consumers,
persistent cubes.

``specialized_wgmma`` = `WgmmaTile` (64 x tile_n x 16 per consumer warpgroup) under
`WarpgroupPartitionedStage` under `TmaSpecializedGlobalMatmul` (one producer warpgroup issuing TMA
copies through `TmaLoader`s into a ring of mbarrier-guarded slots; ``setmaxnreg`` moves registers
from it to the consumers), `TmaStoreWriter` (each output tile staged in shared memory and stored by
TMA while the next one computes; direct paired stores where the call's output is not 16-byte
aligned), under `TmaKMajorBatchMatmul` (one cube per multiprocessor looping over tiles; tensor maps
encoded per call; an operand TMA cannot address, or one the tile reads only K-major in the other
layout, copied first into a K-major workspace). CUDA sm_90a: float16 / bfloat16 with float32
accumulation, fp8 and int8 (promoted / exact), every layout (16-bit: column-major lhs / row-major
rhs through wgmma's transpose bits), every shape (TMA zero-fills the edges).

Tiling rule: the cooperative 128 x 256 tile (two consumer warpgroups of 64 x 256, m64n256k16, 128
accumulators per unit) for large outputs; 128 x 128 where at most half a wave of 128 x 256 tiles
would leave multiprocessors idle (the 128 x 128 tiles then run in one wave). Ping-pong consumers
(``schedule="pingpong"``, `pingpong_preset`) are in the tuning space, not chosen: slower on every
row measured. fp8 and block scales promote (a second set of float32
accumulators, global_/promotion.py): 192 x 128 (three consumer warpgroups) from 8 waves, else
128 x 128, whose two warpgroups promote each slice behind their next batch. 16-bit problems under a
wave of 128 x 128 tiles take 64 x 128 (one consumer warpgroup). The output tile is staged in as
many column parts as leave room for the whole ring.
Long-K 16-bit problems of many tiles run in clusters of two cubes along M that share each rhs slot
(``cluster_m=2``: global_/tma_specialized.py). A last wave of at most half the device's cubes is
split along K into parts that fill it (``split_tail``: batch/split_tail.py).
"""
from __future__ import annotations

from ..batch.tma_k_major import TmaKMajorBatchMatmul
from ..global_.promotion import wants_promotion
from ..global_.read.tma_loader import TmaLoader
from ..global_.tma_specialized import TmaSpecializedGlobalMatmul
from ..global_.write.tma_store_writer import TmaStoreWriter
from ..stage.warpgroup_partitioned import WarpgroupPartitionedStage
from ..tile.wgmma import WgmmaTile
from .base import Algorithm, distinct, register

#: (warpgroups_m, warpgroups_n, partition_m, tile_n, stages), largest tile first.
_CANDIDATES = [
    (2, 1, 1, 256, 4),     # 128 x 256: 48 KiB a slot
    (2, 1, 1, 128, 6),     # 128 x 128: 32 KiB a slot
]
#: Room for the ring's barriers and its 1 KiB alignment; the fewest slots worth staging for.
_SLACK, _MIN_STAGES = 2048, 3
#: Promoting problems (fp8, block scales: two accumulator sets, 64 x 128 per warpgroup): three
#: consumer warpgroups where their tiles fill the device 8 times or more, as the larger tile reads
#: fewer bytes per flop, else two, whose tiles divide into waves more evenly. Kernel times on the
#: H100 with TMA stores (bench/results/h100_2026-11-25_kernel_durations_tiles_fp8_*.json): e4m3
#: 8192^3 bf16 out, 192 x 128 (21 waves) 0.766 ms against 0.936 for 128 x 128; 4096^3 (5.3 waves
#: of 192 x 128) 0.110 against 0.106, float32 out 0.128 against 0.113.
_PROMOTED = [
    (3, 1, 1, 128, 5),     # 192 x 128: 40 KiB a slot
    (2, 1, 1, 128, 6),
]
_PROMOTED_WAVES = 8
#: 16-bit problems with less than a wave of 128 x 128 tiles take 64 x 128 (one consumer warpgroup):
#: twice the tiles for as many multiprocessors. H100 kernel times, f16, b row-major (bench/results/
#: h100_2026-11-25_kernel_durations_small_specialized.json): 1024 x 1024 x 4096 14.4 us against 22.8
#: with 128 x 128 tiles (cuBLAS 15.1), 1000 x 1024 x 1024 5.6 against 8.2, 768^3 4.9 against 6.8,
#: 512^3 3.9 against 5.4. Not where a row of the output (and of a row-major b) is not a whole number
#: of 128-byte lines: 1024 x 1000 x 1024 10.3 against 9.1 (64-row tiles read b twice as often); nor
#: where the 64 x 128 tiles overflow a wave: bf16 128 x 14336 x 4096 (224 of them) 46.5 us against
#: 45.1 in 112 tiles of 128 x 128 (bench/results/h100_2026-11-25_kernel_durations_skinny_small_tile.json).
_SMALL = (1, 1, 1, 128, 6)
#: Two promoting consumer warpgroups add each slice behind their next batch (``promote_behind``,
#: global_/promotion.py; three sets do not fit three warpgroups' registers). H100 kernel times, e4m3,
#: b column-major, bf16 out, 128 x 128 tiles (bench/results/
#: h100_2026-11-25_kernel_durations_promote_behind_*.json): 4096^3 per-tensor 0.1044 ms against
#: 0.1087, rowwise 0.1048 against 0.1088, float32 out 0.1143 against 0.1165; 8192^3 0.807 against
#: 0.852, still behind 192 x 128 (0.782).
#: Block-scaled 192 x 128 tiles run faster on 3 slots than on 4 (H100 kernel times, e4m3, bf16 out:
#: 4096 x 7168 x 16384 1.015 ms against 1.073, 8192^3 1.105 against 1.133; per-tensor scales the
#: other way, 8192^3 0.831 against 0.804: bench/results/h100_2026-11-25_kernel_durations_fp8_stages.json).
_BLOCK_SCALED_STAGES = 3
#: Clusters of two cubes along M sharing each rhs slot by multicast (``cluster_m=2``) where K is at
#: least this long, for the 16-bit 128 x 256 tile with 4 waves of tiles or more. Kernel times on the
#: H100 against one cube (bench/results/h100_2026-11-25_kernel_durations_clusters_*.json): bf16 8192^3
#: 1.413 ms against 1.417-1.431, f16 8192 x 4096 x 11008 0.974 against 0.984-0.985; no different at
#: K = 4096 (4096^3 0.179 against 0.177, 8192 x 12288 x 4096 1.090 against 1.090), slower for fp8
#: (8192^3 0.865 against 0.801) and 128 x 128 tiles (2048^3 0.028 against 0.026).
_CLUSTER_MIN_K, _CLUSTER_MIN_WAVES = 8192, 4
#: The last, partial wave of tiles split along K (``split_tail``, batch/split_tail.py) where it is at
#: most half a wave: into as many parts as fill the device, at most 4, each at least 24 ring slots
#: long (a part's partial sums cost a few slots' time to store and add: f16 1000^3, 64 tiles of
#: 128 x 128 in 2 parts of 8 slots, 14.6 us against 11.6 whole; 1000 x 1000 x 2000, parts of 16,
#: 17.5-17.6 against 16.8; 1000 x 1000 x 4000, parts of 31-32, 27.0 against 27.8; 24 lies between:
#: bench/results/h100_2026-11-25_kernel_durations_f16_mid_sizes.json, _f16_mid_clusters.json). H100 kernel times
#: (bench/results/h100_2026-11-25_kernel_durations_split_tail_*.json): block-scaled fp8 4096 x 7168 x
#: 16384 (a tail of 44 tiles of 192 x 128 in 3 parts) 0.902 ms against 1.016; fp8 1024 x 1024 x 8192
#: (64 tiles in 2) 18.9 us against 36.8; bf16 1000 x 1000 x 4000 26.2 against split_k_wgmma's 50.0,
#: 512 x 1024 x 16384 42.4 against 59.3. The block-scaled 192 x 128 kernel takes it with a tail in
#: one part too: its loop over whole tiles then compiles without spills (8192^3 1.030 ms against 1.071).
_SPLIT_MAX, _SPLIT_MIN_SLICES = 4, 24


def split_parts(problem, sms: int, tiles: int) -> int:
    """The parts `select` splits each tile of the last wave into (1: none). The kernel takes the
    fewest of this, its grid over the tail and the tile's slices (batch/split_tail.py): the same
    where the grid is the device's multiprocessors, as the persistent grid is."""
    tail = tiles % sms
    slices = -(-problem.k * problem.lhs.itemsize // 128)     # ring slots of 128 bytes of K
    return min(_SPLIT_MAX, sms // tail, slices // _SPLIT_MIN_SLICES) if tail else 1


def tile_count(problem, tile_m: int, tile_n: int) -> int:
    """Output tiles of ``tile_m`` x ``tile_n`` over all batch entries."""
    return problem.batch * -(-problem.m // tile_m) * -(-problem.n // tile_n)


def selected_tiles(selection) -> tuple[int, int]:
    """(tile_m, tile_n) of a selection of this algorithm (a mapping, as `select` returns)."""
    return (selection["warpgroups_m"] * selection["partition_m"] * 64,
            selection["warpgroups_n"] * selection["tile_n"])


def _preset(wm, wn, pm, tn, stages, **more) -> dict:
    return dict(warpgroups_m=wm, warpgroups_n=wn, partition_m=pm, tile_n=tn, stages=stages, **more)


def _store(problem, dialect, tile_m: int, tile_n: int, stages: int, groups: int = 1) -> dict:
    """``stages``, ``tma_store`` and ``store_parts``: the output tile staged for TMA stores
    (TmaStoreWriter) in the fewest column parts (1, 2 or 4, each whole 128-byte bands) that leave
    room for all ``stages`` ring slots; failing that, whole, with as many slots as fit beside it, at
    least 3; else direct stores and all the slots. A slot holds 128 bytes of K for each of the
    tile's tile_m + tile_n lines, whatever the type.

    Measured on the H100 (kernel times, bench/results/h100_2026-11-25_kernel_durations_store_parts_*.json):
    int8 128 x 256 (int32 results, 128 KiB whole) 4 slots beside 4 parts 0.095 ms at 4096^3 against
    0.101-0.103 with direct stores (8192^3 0.657 against 0.689-0.699); tf32 0.343 against 0.349;
    bf16 128 x 256 4 slots beside 2 parts 0.174 against 0.175 beside the whole tile on 3; fp8 no
    different (0.804 against 0.802-0.811 at 8192^3)."""
    # ``groups`` staging tiles (ping-pong: one per copy of the stage).
    slot, whole = (tile_m + tile_n) * 128, tile_m * tile_n * problem.out.itemsize * groups
    band = 128 // problem.out.itemsize
    room = dialect.device.max_shared_memory - _SLACK
    for parts in (1, 2, 4):
        if (tile_n // parts) % band:
            break
        if (room - whole // parts) // slot >= stages:
            return dict(stages=stages, tma_store=True, store_parts=parts)
    fit = (room - whole) // slot
    if fit >= _MIN_STAGES:
        return dict(stages=min(stages, fit), tma_store=True, store_parts=1)
    return dict(stages=stages, tma_store=False, store_parts=1)


#: Ping-pong tiles, one consumer warpgroup each (partition_m, tile_n): 128 x 128, 64 x 256.
_PINGPONG = [(2, 128), (1, 256)]


def pingpong_preset(problem, dialect, partition_m: int, tile_n: int, stages: int = 6) -> dict:
    """A ping-pong selection: two one-warpgroup copies of a ``64 partition_m x tile_n`` stage
    taking tiles in turns, each with its staging tile, grouped order."""
    return _preset(1, 1, partition_m, tile_n, schedule="pingpong", dispatch="grouped", dispatch_width=8,
                   **_store(problem, dialect, 64 * partition_m, tile_n, stages, groups=2))


@register
class SpecializedWgmmaAlgorithm(Algorithm):
    name = "specialized_wgmma"
    selection_name = "SpecializedWgmmaSelection"
    min_arch = "sm_90a"
    tile = WgmmaTile
    stage = WarpgroupPartitionedStage
    global_ = TmaSpecializedGlobalMatmul
    lhs_loader = TmaLoader
    rhs_loader = TmaLoader
    writer = TmaStoreWriter
    batch = TmaKMajorBatchMatmul

    def select(self, problem, dialect):
        sms = max(1, dialect.device.compute_units)
        promoted = wants_promotion(problem)
        for wm, wn, pm, tn, stages in _PROMOTED if promoted else _CANDIDATES:
            tiles = tile_count(problem, wm * pm * 64, wn * tn)
            # 128 x 256 from more than half a wave: its one wave takes as long as two waves of
            # 128 x 128 tiles would, and the larger tile is the faster one (2048^3, 128 tiles on
            # 132 multiprocessors: 0.0246 ms against 0.0252, bench/results/
            # h100_2026-11-25_kernel_durations_pingpong_bf16.json, "co256"); at most half a wave,
            # 128 x 128 tiles fill the device in one.
            enough = (_PROMOTED_WAVES * sms if wm == 3 else sms) if promoted else sms // 2 + 1
            if tiles >= enough:
                break
        if (not promoted and (wm, tn) == (2, 128) and tiles < sms and problem.lhs.itemsize == 2
                and tile_count(problem, 64, _SMALL[3]) <= sms
                and problem.n * problem.out.itemsize % 128 == 0 and problem.n * problem.rhs.itemsize % 128 == 0):
            wm, wn, pm, tn, stages = _SMALL
            tiles = tile_count(problem, 64, tn)
        if problem.epilogue.block_scales and wm == 3:
            stages = _BLOCK_SCALED_STAGES
        # Grouped by 8 tile rows wherever there is more than a wave of tiles: the operand blocks
        # neighbouring cubes share stay in L2, which bounds these sizes. Measured on the H100
        # (bench/results/h100_2026-11-24_hopper_kernels.json), f16 kernel times, row-major -> grouped:
        # 4096^3 0.260 -> 0.242 ms, 8192^3 1.94 -> 1.62, 8192 x 12288 x 4096 1.61 -> 1.28, 2048^3
        # (128 x 128 tiles) 0.066 -> 0.063; swizzled and other widths measured no better.
        order = (dict(dispatch="grouped", dispatch_width=8)
                 if tiles >= sms or ((tn == 256 or wm * pm == 1) and 2 * tiles > sms)
                 else dict(dispatch="row_major"))
        cluster = (not promoted and tn == 256 and problem.k >= _CLUSTER_MIN_K
                   and tiles >= _CLUSTER_MIN_WAVES * sms)
        behind = dict(promote_behind=True) if promoted and wm * wn == 2 else {}
        parts = split_parts(problem, sms, tiles)
        if problem.epilogue.block_scales and wm == 3:
            parts = max(parts, 2)
        split = dict(split_tail=parts) if parts > 1 and not cluster else {}
        return _preset(wm, wn, pm, tn, **_store(problem, dialect, wm * pm * 64, wn * tn, stages), **order,
                       **(dict(cluster_m=2) if cluster else {}), **behind, **split)

    def yield_to(self, chosen, overrides):
        """Its split tail goes with clusters or ping-pong the caller asks for (a split part is one
        cube's, on all its consumers) and its clusters with a split the caller asks for; promotion
        behind goes with three consumer warpgroups (three accumulator sets do not fit their
        registers); unless the caller asked for both."""
        out = dict(chosen)
        knob = {**chosen, **overrides}.get
        if "split_tail" not in overrides and (knob("cluster_m", 1) > 1 or knob("schedule", "cooperative") != "cooperative"):
            out.pop("split_tail", None)
        if overrides.get("split_tail", 0) > 1:
            for name in ("cluster_m", "schedule"):
                if name not in overrides:
                    out.pop(name, None)
        if "promote_behind" not in overrides and knob("warpgroups_m", 2) * knob("warpgroups_n", 1) > 2:
            out.pop("promote_behind", None)
        return out

    def tuning_space(self, problem, dialect):
        first = self.select(problem, dialect)
        space = [first]
        for c in _PROMOTED if wants_promotion(problem) else _CANDIDATES + [_SMALL]:
            for order in ("row_major", "grouped", "swizzled"):
                space.append(_preset(*c, dispatch=order, dispatch_width=8))
            stored = _store(problem, dialect, c[0] * c[2] * 64, c[1] * c[3], c[4])
            for cluster_m in (1, 2):
                space.append(_preset(*c[:4], **stored, dispatch="grouped", dispatch_width=8, cluster_m=cluster_m))
            if wants_promotion(problem) and c[0] * c[1] == 2:   # three sets fit two consumers' registers
                space.append(_preset(*c[:4], **stored, dispatch="grouped", dispatch_width=8, promote_behind=True))
            for parts in (2, _SPLIT_MAX):
                space.append(_preset(*c[:4], **stored, dispatch="grouped", dispatch_width=8, split_tail=parts))
        for pm, tn in _PINGPONG:
            space.append(pingpong_preset(problem, dialect, pm, tn))
        return distinct(space)


#: The tiling of the Hopper Specialized pipeline: consumer warpgroups (warpgroups_m x warpgroups_n,
#: each partition_m tiles of 64 x tile_n), a ``stages``-slot ring, the order of a cube's tiles.
SpecializedWgmmaSelection = SpecializedWgmmaAlgorithm.selection_class
