"""Tilings of the Hopper warp-specialized algorithm (specialized_wgmma): the consumer warpgroups'
tile, the ring's slots beside the staged output tile, the order of a cube's tiles, clusters, the
split of the last wave along K, and the alternatives the tuner times.

The cooperative 128 x 256 tile (two consumer warpgroups of 64 x 256, m64n256k16, 128 accumulators
per unit) for large outputs; 128 x 128 where at most half a wave of 128 x 256 tiles would leave
multiprocessors idle (the 128 x 128 tiles then run in one wave), unless K is long enough that 128
x 256 tiles split along K run shorter parts (selector/split_tail.py); 16-bit problems under a wave
of 128 x 128 tiles take 64 x 128 (one consumer warpgroup). fp8 and block scales promote (a second set
of float32 accumulators, global_/promotion.py): 192 x 128 (three consumer warpgroups) from 8
waves, else 128 x 128, whose two warpgroups promote each slice behind their next batch. The output
tile is staged in as many column parts as leave room for the whole ring. Long-K 16-bit problems of
many tiles run in clusters of two cubes along M that share each rhs slot (``cluster_m=2``), as do
tiles over rhs rows that are not whole 32-byte sectors (selector/ragged.py `sector_cluster`). A last
wave of at most half the device's cubes is split along K into parts that fill it (``split_tail``:
batch/split_tail.py). Ping-pong consumers (``schedule="pingpong"``: two one-warpgroup copies taking
tiles in turns) only for short K (`PINGPONG_MAX_K`), where a tile is mostly its epilogue; slower
elsewhere.

The measurements behind each choice: bench/SELECTION_NOTES.md, "specialized_wgmma tilings".
"""
from __future__ import annotations

from typing import Mapping

from ..batch.k_major import ragged_operands
from ..codegen.dialect import Dialect
from ..global_.promotion import wants_promotion
from ..global_.write.tma_store_writer import SWIZZLE, band_bytes
from ..problem import MatmulProblem
from .base import distinct, tile_count
from .ragged import ragged_copies, sector_cluster
from .small_wave import small_rows, small_wave_cluster
from .split_tail import SPLIT_MAX, long_k_wide, split_parts
from .waves import big_operand_bytes, compute_us, stream_us, streams_weights

#: (warpgroups_m, warpgroups_n, partition_m, tile_n, stages), largest tile first.
CANDIDATES = [
    (2, 1, 1, 256, 4),     # 128 x 256: 48 KiB a slot
    (2, 1, 1, 128, 6),     # 128 x 128: 32 KiB a slot
]
#: Room for the ring's barriers and its 1 KiB alignment; the fewest slots worth staging for.
SLACK, MIN_STAGES = 2048, 3
#: Promoting problems (fp8, block scales: two accumulator sets, 64 x 128 per warpgroup): three
#: consumer warpgroups from `PROMOTED_WAVES` waves of their tiles (fewer bytes read per flop), else two.
PROMOTED = [
    (3, 1, 1, 128, 5),     # 192 x 128: 40 KiB a slot
    (2, 1, 1, 128, 6),
]
PROMOTED_WAVES = 8
#: 16-bit problems under a wave of 128 x 128 tiles: 64 x 128 (one consumer warpgroup), twice the
#: tiles, where an output row (and a row-major b's) is whole 128-byte lines (any rows of the small dense
#: products of selector/small_wave.py) and they fit a wave; not from SMALL_MAX_K where 128 x 128 tiles
#: split along K still give more than half the multiprocessors a part (1024 x 1024 x 65536 in 64 x
#: 128: 646 TFLOP/s, cuBLAS 775; 128 x 256 in 4 parts now, split_tail.py `long_k_wide`;
#: bench/SELECTION_NOTES.md, "specialized_wgmma tilings"); 512 x 512 x 65536 keeps it.
SMALL = (1, 1, 1, 128, 6)
SMALL_MAX_K = 65536
BLOCK_SCALED_STAGES = 3       # block-scaled 192 x 128 tiles ran faster on 3 slots than on 4
#: Clusters of two cubes along M sharing each rhs slot: 16-bit 128 x 256 tiles, K from this, and
#: at least this many waves of tiles; and over rhs rows of ragged sectors (selector/ragged.py).
CLUSTER_MIN_K, CLUSTER_MIN_WAVES = 8192, 4
#: Ping-pong tiles, one consumer warpgroup each (partition_m, tile_n): 128 x 128, 64 x 256.
PINGPONG = [(2, 128), (1, 256)]
#: 16-bit products of at most this K and at least a wave of 128 x 128 tiles take ping-pong 128 x
#: 128: a tile of a few slots is mostly its epilogue, which one copy runs beside the other's main
#: loop (H200 kernels: 8192^2 x 256 65.2 us against 81.0, 5101 x 6008 x 64 42.0 against 45.6,
#: 4096^2 x 64 12.0 against 13.0; bench/SELECTION_NOTES.md, "Short K: ping-pong"). 16-bit outputs
#: without a gated epilogue only: a ping-pong copy's SwiGLU pairs spill (ptxas sm_90a: 96 bytes), and
#: a float32 output's with c (8).
PINGPONG_MAX_K = 256
#: Weight-streaming products (selector/waves.py): each tile split along K into up to this many
#: parts of at least this many ring slots where that makes the call faster (`decode_call_us`);
#: taken where at least half the device can stream (else split-K spreads it wider).
DECODE_SPLIT_MAX, DECODE_MIN_SLICES, DECODE_MIN_BUSY = 8, 8, 0.5
#: A split kernel's cubes wait for one another, so it is launched cooperatively: its whole calls
#: took at least SPLIT_CALL_US, and SPLIT_OVER_US over the kernel, where an unsplit call took
#: CALL_US over its kernel (bf16 decode rows: 12-13 us kernels in 17-20 us calls, 17.6 in 20.1,
#: 19.2 in 22.1; unsplit 16.5 in 17.7, 22.4 in 23.8: bench/SELECTION_NOTES.md, "decode_tiling").
SPLIT_CALL_US, SPLIT_OVER_US, CALL_US = 20.0, 2.5, 1.3
#: What adding each later part's partial tile costs, by the float32 partial's KiB (`partial_kib`):
#: 128 x 128 tiles (64 KiB) 2-4 us (M = 128, 4096^2: 2 parts 17.6 us, 4 parts 19.2 against 22.4
#: whole), 64 x 128 tiles (32 KiB) a few tenths (M = 64: 4 parts 12.2-12.9 us, 2 parts 14.2, whole
#: 16.5); a 64 KiB partial in 2 parts at most. 128 x 64 tiles are 32 KiB too: 72 x 2048 x 8192 in 4
#: parts (last arriver) 13.7 us against 19.7 in 2, 80 / 112 / 128 rows 13.7 / 13.6 / 17.5 against
#: 16.8 / 17.1 / 19.0 (bench/SELECTION_NOTES.md, "Short problems").
DECODE_FIXUP_US, DECODE_WIDE_SPLIT_MAX = {True: 0.3, False: 3.0}, 2
#: The partials `small_partial` calls small: up to a 64 x 128 (or 128 x 64) float32 tile's.
SMALL_PARTIAL_KIB = 32
#: The last-arriver fixup (``split_fixup="last"``: nothing waits, a plain launch) has no
#: co-resident launch's floor: its calls took LAST_OVER_US over the kernel (64 x 128 tiles, bf16:
#: 32 x 4096 x 4096 in 3-8 parts 15.5-15.8 us against 16.5-16.8 waiting for the owner and 19.2
#: unsplit; 32 x 4096 x 14336 in 4 parts 48.6 against 47.9: bench/SELECTION_NOTES.md,
#: "split_fixup"). 64 KiB partials (128 x 128) keep the owner: the last part re-reads its own sums.
LAST_OVER_US = 3.0
#: Weight-streaming 16-bit products whose 64-column tiles fit one wave: 64 columns a tile (twice
#: the streaming cubes of 128), the rows the problem's (64, or 128 for 65-128; the copies read only
#: the rows inside it, global_/read/tma_loader.py), a ring of this many slots (16 or 24 KiB each).
#: M = 80-128 of 4096 x 4096 in 128 x 64 tiles: 12.0-13.6 us kernels against 17.1-18.6 in 64 x 128
#: over two row blocks (bench/SELECTION_NOTES.md, "Short problems").
NARROW_STAGES = {1: 12, 2: 8}
#: Up to 64 rows, 32-column tiles (unsplit, 16 slots of 12 KiB) where they fill more than
THIN_STAGES, THIN_MIN_FILL = 16, 2 / 3     # of a wave (bench/SELECTION_NOTES.md, "32-column tiles")
#: 16-bit products of more than half a wave of 128 x 256 tiles: the tiles the waves choose from,
#: (warpgroups_m, warpgroups_n, partition_m, tile_n, stages) and each one's rate per operation
#: against 128 x 256's (128 x 128: 2048^3 in two waves 25.2 us against one of 128 x 256 in 24.6;
#: 192 x 128: not measured for 16-bit, taken as 128 x 128's; 192 x 192: 0.95-1.025 from 2560^3 to
#: 6144^3 on an H200, bench/SELECTION_NOTES.md "192 x 192 tiles"), and the margin a tile must beat
#: the first by to be taken instead.
#: 192 x 96: 0.87, H200 kernels against 192 x 128's in one wave each (bf16 1536^3 13.0 us against 15.5,
#: 1536^2 x 3072 22.6 against 27.6; cuBLAS 11.6, 22.1; bench/SELECTION_NOTES.md "192 x 96 tiles").
WIDE_TILE = (3, 1, 1, 192, 4)       # 192 x 192: three consumer warpgroups of 64 x 192
NARROW_TILE = (3, 1, 1, 96, 5)      # 192 x 96: three consumer warpgroups of 64 x 96
WAVE_TILES = [((2, 1, 1, 256, 4), 1.0), ((3, 1, 1, 128, 5), 0.975), ((2, 1, 1, 128, 6), 0.975), (WIDE_TILE, 1.0),
              (NARROW_TILE, 0.87)]
WAVE_MARGIN = 0.05
#: Tiles never split along K: beside 192 x 192's 96 accumulators a unit the split tail spills (ptxas).
UNSPLIT_TILES = {(192, 192)}


def selected_tiles(selection: Mapping) -> tuple[int, int]:
    """(tile_m, tile_n) of a selection of this algorithm (a mapping, as the rule returns)."""
    return (selection["warpgroups_m"] * selection["partition_m"] * 64,
            selection["warpgroups_n"] * selection["tile_n"])


def preset(wm, wn, pm, tn, stages, **more) -> dict:
    return dict(warpgroups_m=wm, warpgroups_n=wn, partition_m=pm, tile_n=tn, stages=stages, **more)


def store_plan(problem: MatmulProblem, dialect: Dialect, tile_m: int, tile_n: int, stages: int,
               groups: int = 1) -> dict:
    """``stages``, ``tma_store`` and ``store_parts``: the output tile staged for TMA stores in the
    fewest column parts (1 to 4, each whole bands: `band_bytes`) that leave room for all ``stages``
    ring slots; failing that, whole, with as many slots as fit beside it, at least `MIN_STAGES`;
    else direct stores and all the slots. A slot holds 128 bytes of K for each of the tile's
    tile_m + tile_n lines, whatever the type; ``groups`` staging tiles (ping-pong: one per copy)."""
    slot, whole = (tile_m + tile_n) * 128, tile_m * tile_n * problem.out.itemsize * groups
    band = band_bytes(tile_n, problem.out.itemsize) // problem.out.itemsize
    room = dialect.device.max_shared_memory - SLACK
    if problem.epilogue.paired:
        # A gated epilogue's one result a pair is staged at half the width, in one part
        # (TmaStoreWriter.write_paired; bench/SELECTION_NOTES.md "Paired stores"); two results a pair (the
        # gated derivative) are stored directly, and every slot stays.
        fit = (room - whole // 2) // slot
        if problem.epilogue.pair_outputs == 1 and (tile_n // 2) % (SWIZZLE // problem.out.itemsize) == 0 and fit >= MIN_STAGES:
            return dict(stages=min(stages, fit), tma_store=True, store_parts=1)
        return dict(stages=stages, tma_store=False, store_parts=1)
    for parts in (1, 2, 3, 4):
        if tile_n % (parts * band):
            continue        # not whole bands (a 192-column tile: 1 or 3 parts)
        if (room - whole // parts) // slot >= stages:
            return dict(stages=stages, tma_store=True, store_parts=parts)
    fit = (room - whole) // slot
    if fit >= MIN_STAGES:
        return dict(stages=min(stages, fit), tma_store=True, store_parts=1)
    return dict(stages=stages, tma_store=False, store_parts=1)


def pingpong_preset(problem: MatmulProblem, dialect: Dialect, partition_m: int, tile_n: int,
                    stages: int = 6) -> dict:
    """A ping-pong selection: two one-warpgroup copies of a ``64 partition_m x tile_n`` stage
    taking tiles in turns, each with its staging tile, grouped order."""
    return preset(1, 1, partition_m, tile_n, schedule="pingpong", dispatch="grouped", dispatch_width=8,
                  **store_plan(problem, dialect, 64 * partition_m, tile_n, stages, groups=2))


def decode_shapes(problem: MatmulProblem, dialect: Dialect, thin: bool = True) -> list[tuple]:
    """The tiles of a weight-streaming product, (warpgroups_m, warpgroups_n, partition_m, tile_n,
    stages), the rule's first: the short side 64 or 128 rows (M short) or columns (N short); the long
    side 32 (``thin``) or 64 where a 16-bit product's tiles fill a wave (`THIN_STAGES`, `NARROW_STAGES`),
    else 128; then 256 (two warpgroups side by side, or 256 rows) for the tuner only (slower on every
    row measured: bench/SELECTION_NOTES.md, "decode_tiling"). Promoting problems: 128."""
    promoted = wants_promotion(problem)
    if problem.m <= problem.n:
        wm = 1 if problem.m <= 64 else 2
        wide = [(wm, 1, 1, 128, 6)]
        narrow_fits = tile_count(problem, 64 * wm, 64) <= dialect.device.compute_units
        if not promoted and problem.lhs.itemsize == 2 and narrow_fits:
            wide = [(wm, 1, 1, 64, NARROW_STAGES[wm])] + wide
            if thin and wm == 1 and THIN_MIN_FILL < tile_count(problem, 64, 32) / dialect.device.compute_units <= 1:
                wide = [(1, 1, 1, 32, THIN_STAGES)] + wide
        # 256 columns as two warpgroups of 128 side by side: one warpgroup of 64 x 256 spills at 240 registers.
        return wide + ([] if promoted else [(wm, 2, 1, 128, 4)])
    tn = 64 if problem.n <= 64 else 128
    return [(2, 1, 1, tn, 6)] + ([] if promoted else [(2, 1, 2, tn, 4)])


def partial_kib(shape) -> int:
    """KiB of one float32 partial tile of ``shape`` (what a split part stores and the fixup adds)."""
    wm, wn, pm, tn, _ = shape
    return wm * pm * 64 * wn * tn * 4 // 1024


def small_partial(shape) -> bool:
    """Whether ``shape``'s partial is at most `SMALL_PARTIAL_KIB`: cheap to add (`DECODE_FIXUP_US`),
    split up to `DECODE_SPLIT_MAX` parts, the last-arriver fixup weighed."""
    return partial_kib(shape) <= SMALL_PARTIAL_KIB


def decode_parts_max(problem: MatmulProblem, dialect: Dialect, shape, wide_cap: bool = True) -> int:
    """The most parts `decode_tiling` splits a tile of ``shape`` into: its tiles' parts at most one a
    multiprocessor, each at least `DECODE_MIN_SLICES` ring slots, a tile whose partial is not
    `small_partial` in `DECODE_WIDE_SPLIT_MAX` (``wide_cap``)."""
    wm, wn, pm, tn, _ = shape
    sms = max(1, dialect.device.compute_units)
    tiles = tile_count(problem, wm * pm * 64, wn * tn)
    slices = -(-problem.k * problem.lhs.itemsize // 128)
    most = DECODE_WIDE_SPLIT_MAX if not small_partial(shape) and wide_cap else DECODE_SPLIT_MAX
    return max(1, min(most, sms // max(1, tiles), slices // DECODE_MIN_SLICES))


def decode_call_us(problem: MatmulProblem, dialect: Dialect, shape, parts: int, fixup: str = "owner") -> float:
    """Predicted microseconds of a call of ``shape``'s tiles each split in ``parts``: the stream of
    the big operand by its streaming cubes or the tiles' (padded) multiply-adds, whichever is longer
    (selector/waves.py), the owners' additions of the later parts, the call's time over the kernel
    (a split call whose owners wait: at least `SPLIT_CALL_US`; ``fixup="last"``: `LAST_OVER_US`)."""
    wm, wn, pm, tn, _ = shape
    tm, tn = wm * pm * 64, wn * tn
    tiles = tile_count(problem, tm, tn)
    cubes = min(tiles * parts, max(1, dialect.device.compute_units))
    nbytes = problem.batch * big_operand_bytes(problem)
    kernel = max(stream_us(nbytes, cubes), compute_us(2.0 * tiles * tm * tn * problem.k, cubes, problem.lhs.itemsize))
    if parts == 1:
        return kernel + CALL_US
    kernel += (parts - 1) * DECODE_FIXUP_US[small_partial(shape)]
    if fixup == "last":
        return kernel + LAST_OVER_US
    return max(SPLIT_CALL_US, kernel + SPLIT_OVER_US)


def decode_fixups(problem: MatmulProblem, shape) -> tuple[str, ...]:
    """The split fixups `decode_choice` weighs for ``shape``: the last-arriver one for partials of
    up to 32 KiB only (`LAST_OVER_US`)."""
    return ("owner", "last") if small_partial(shape) else ("owner",)


def decode_choice(problem: MatmulProblem, dialect: Dialect, thin: bool = True):
    """(predicted call microseconds, shape, parts, fixup) of a weight-streaming product's tiling
    (the first of `decode_shapes`, in the parts and split fixup `decode_call_us` predicts fastest,
    fewer parts and the owner on ties), or None where fewer than `DECODE_MIN_BUSY` of the device
    would stream (split-K spreads it wider)."""
    if problem.lhs.storage in ("i8", "f32"):
        return None     # int8 and tf32 tiles and stores were measured apart: their rules stay
    sms = max(1, dialect.device.compute_units)
    shape = decode_shapes(problem, dialect, thin)[0]
    wm, wn, pm, tn, _ = shape
    if tile_count(problem, wm * pm * 64, wn * tn) * decode_parts_max(problem, dialect, shape, False) < DECODE_MIN_BUSY * sms:
        return None
    most = decode_parts_max(problem, dialect, shape)
    options = [(decode_call_us(problem, dialect, shape, p, f), p, i, f)
               for p in range(1, most + 1) for i, f in enumerate(decode_fixups(problem, shape) if p > 1 else ("owner",))]
    us, parts, _, fixup = min(options)
    return us, shape, parts, fixup


def decode_tiling(problem: MatmulProblem, dialect: Dialect, thin: bool = True) -> dict | None:
    """A weight-streaming product's tiling (`decode_choice`): the tile's short side fit to the
    problem's (64 rows for a short side up to 64, else 128; along N, 64 or 128 columns), 32, 64 or
    128 long (`decode_shapes`), split along K into parts (``split_tail``: all tiles are the last wave)
    where the stream it saves outweighs a split call's cost."""
    choice = decode_choice(problem, dialect, thin)
    if choice is None:
        return None
    _, (wm, wn, pm, tn, stages), parts, fixup = choice
    # Two promoting consumer warpgroups add each slice behind the next (as the rule's 128 x 128 tiles).
    behind = dict(promote_behind=True) if wants_promotion(problem) and wm * wn == 2 else {}
    return preset(wm, wn, pm, tn, **store_plan(problem, dialect, wm * pm * 64, wn * tn, stages), dispatch="row_major",
                  **behind, **(dict(split_tail=parts) if parts > 1 else {}),
                  **(dict(split_fixup=fixup) if parts > 1 and fixup != "owner" else {}))


def wave_cost(problem: MatmulProblem, sms: int, shape, rate: float) -> float:
    """Time of a tiling in 128 x 256 tile times: its whole waves, then the last one split as the
    rule splits it (`split_parts`), each tile time scaled by its area and ``rate``."""
    wm, wn, pm, tn, _ = shape
    tiles = tile_count(problem, wm * pm * 64, wn * tn)
    tail = tiles % sms
    parts = 1 if (wm * pm * 64, wn * tn) in UNSPLIT_TILES else max(1, split_parts(problem, sms, tiles))
    return (tiles // sms + (1 / parts if tail else 0)) * (wm * pm * 64 * wn * tn) / (128 * 256) / rate


def wave_shape(problem: MatmulProblem, dialect: Dialect, wide: bool = True):
    """The tile of `WAVE_TILES` that takes the least time by `wave_cost`; the first unless another
    is `WAVE_MARGIN` faster (3000^3: 288 tiles of 128 x 256 fill 2.2 waves of 132, 256 of 192 x 192 1.9).
    192 x 192 and 192 x 96 only where ``wide`` and their output is staged beside all their slots, as
    they were measured (not a float32 output, not a gated one's half-width tile)."""
    sms = max(1, dialect.device.compute_units)

    def measured(shape) -> bool:
        if shape not in (WIDE_TILE, NARROW_TILE):
            return True
        plan = store_plan(problem, dialect, shape[0] * 64, shape[3], shape[4])
        parts = 3 if shape == WIDE_TILE else 1
        return wide and plan["tma_store"] and plan["stages"] == shape[4] and plan["store_parts"] == parts
    costs = [(wave_cost(problem, sms, shape, rate), shape) for shape, rate in WAVE_TILES if measured(shape)]
    cost, shape = min(costs, key=lambda c: c[0])
    return costs[0][1] if cost > (1 - WAVE_MARGIN) * costs[0][0] else shape


def select_specialized_tiling(problem: MatmulProblem, dialect: Dialect, dense_rules: bool = True,
                              short_k: bool = True) -> dict:
    """The rule's tiling. ``dense_rules``: the choices measured on plain dense products only (the
    192 x 192 wave tile, short K's ping-pong, long K's 128 x 256 split, clusters over ragged sectors,
    32-column decode tiles), which the grouped and converting callers' tilings were not; ``short_k``:
    the ping-pong one (off where a caller names the tile itself)."""
    sms = max(1, dialect.device.compute_units)
    promoted = wants_promotion(problem)
    if streams_weights(problem) and not problem.epilogue.block_scales:
        decode = decode_tiling(problem, dialect, dense_rules)    # 32-column tiles: measured dense only
        if decode is not None:
            return decode
    for wm, wn, pm, tn, stages in PROMOTED if promoted else CANDIDATES:
        tiles = tile_count(problem, wm * pm * 64, wn * tn)
        # 128 x 256 from more than half a wave (its one wave as long as two of 128 x 128).
        enough = (PROMOTED_WAVES * sms if wm == 3 else sms) if promoted else sms // 2 + 1
        if tiles >= enough:
            break
    if not promoted and problem.lhs.itemsize == 2 and (wm, tn) == (2, 256):
        # From half a wave of 128 x 256 tiles up, the tile whose waves fill the device best.
        wm, wn, pm, tn, stages = wave_shape(problem, dialect, dense_rules)
        tiles = tile_count(problem, wm * pm * 64, wn * tn)
    if (not promoted and (wm, tn) == (2, 128) and tiles < sms and problem.lhs.itemsize == 2
            and tile_count(problem, 64, SMALL[3]) <= sms
            and (problem.k < SMALL_MAX_K or tiles * split_parts(problem, sms, tiles) <= sms // 2)
            and small_rows(problem, dialect, dense_rules)):
        wm, wn, pm, tn, stages = SMALL
        tiles = tile_count(problem, 64, tn)
    long_parts = 0
    if (dense_rules and not promoted and problem.lhs.itemsize == 2 and (wm, tn) == (2, 128)
            and problem.k >= SMALL_MAX_K):
        long_parts = long_k_wide(problem, sms, tiles)       # 128 x 256 tiles in shorter parts
        if long_parts:
            wm, wn, pm, tn, stages = CANDIDATES[0]
            tiles = tile_count(problem, 128, 256)
    if (dense_rules and short_k and not promoted and problem.lhs.itemsize == 2 and problem.out.itemsize == 2
            and problem.k <= PINGPONG_MAX_K and not problem.epilogue.paired and tile_count(problem, 128, 128) >= sms):
        return {**pingpong_preset(problem, dialect, 2, 128),
                **(dict(copy_ragged=True) if ragged_copies(problem, (128, 128)) else {})}
    if problem.epilogue.block_scales and wm == 3:
        stages = BLOCK_SCALED_STAGES
    # Grouped by 8 tile rows from about a wave of tiles: neighbouring cubes' operands stay in L2.
    order = (dict(dispatch="grouped", dispatch_width=8)
             if tiles >= sms or ((tn == 256 or wm * pm == 1) and 2 * tiles > sms)
             else dict(dispatch="row_major"))
    tile = (wm * pm * 64, wn * tn)
    copy = ragged_copies(problem, tile)
    # (not over a long-K split: a cluster runs its tiles whole)
    sector = not promoted and dense_rules and not long_parts and (sector_cluster(problem, tile, copy)
                                                                   or small_wave_cluster(problem, dialect, tile))
    ragged = dict(copy_ragged=True) if copy and not sector else {}
    cluster = sector or (not promoted and tn == 256 and problem.k >= CLUSTER_MIN_K and tiles >= CLUSTER_MIN_WAVES * sms)
    behind = dict(promote_behind=True) if promoted and wm * wn == 2 else {}
    parts = 1 if tile in UNSPLIT_TILES else long_parts or split_parts(problem, sms, tiles)
    if problem.epilogue.block_scales and wm == 3:
        parts = max(parts, 2)     # its loop over whole tiles compiles without spills then
    split = dict(split_tail=parts) if parts > 1 and not cluster else {}
    return preset(wm, wn, pm, tn, **store_plan(problem, dialect, *tile, stages), **order,
                  **(dict(cluster_m=2) if cluster else {}), **behind, **split, **ragged)


def specialized_yield_to(chosen: Mapping, overrides: Mapping) -> dict:
    """The rule's split tail goes with clusters or ping-pong the caller asks for (a split part is one
    cube's, on all its consumers) and its clusters with a split the caller asks for; promotion
    behind goes with three consumer warpgroups (three accumulator sets do not fit their
    registers); unless the caller asked for both. (A caller naming the tile gets the rule without
    short K's ping-pong: `SpecializedWgmmaAlgorithm.select`.)"""
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


def specialized_tuning_space(problem: MatmulProblem, dialect: Dialect, first: Mapping) -> list:
    """``first``, then each candidate in every order, with and without clusters, promotion behind
    (two consumers), split tails of 2 and `SPLIT_MAX` parts; 16-bit: the 192 x 128, 192 x 192 and
    192 x 96 wave tiles, whole and split; weight streaming: the decode shapes in several parts
    (`decode_space`); last the ping-pong tilings."""
    space = [first]
    if ragged_operands(problem):     # whole 128-byte lines by a copy, or not
        space.append({**first, "copy_ragged": not first.get("copy_ragged", False)})
    promoted = wants_promotion(problem)
    for c in PROMOTED if promoted else CANDIDATES + [SMALL]:
        for order in ("row_major", "grouped", "swizzled"):
            space.append(preset(*c, dispatch=order, dispatch_width=8))
        stored = store_plan(problem, dialect, c[0] * c[2] * 64, c[1] * c[3], c[4])
        for cluster_m in (1, 2):
            space.append(preset(*c[:4], **stored, dispatch="grouped", dispatch_width=8, cluster_m=cluster_m))
        if promoted and c[0] * c[1] == 2:   # three sets fit two consumers' registers
            space.append(preset(*c[:4], **stored, dispatch="grouped", dispatch_width=8, promote_behind=True))
        for parts in (2, SPLIT_MAX):
            space.append(preset(*c[:4], **stored, dispatch="grouped", dispatch_width=8, split_tail=parts))
    if not promoted:        # the wave rule's others (192 x 96: 16-bit, its rows of 192 bytes)
        for shape in (WAVE_TILES[1][0], WIDE_TILE) + ((NARROW_TILE,) if problem.lhs.itemsize == 2 else ()):
            stored = store_plan(problem, dialect, shape[0] * 64, shape[3], shape[4])
            splits = ({},) if (shape[0] * 64, shape[3]) in UNSPLIT_TILES else \
                ({}, dict(split_tail=2), dict(split_tail=SPLIT_MAX))
            space += [preset(*shape[:4], **stored, dispatch="grouped", dispatch_width=8, **split) for split in splits]
    if streams_weights(problem):
        space += decode_space(problem, dialect)
    for pm, tn in PINGPONG:
        space.append(pingpong_preset(problem, dialect, pm, tn))
    return distinct(space)


def decode_space(problem: MatmulProblem, dialect: Dialect) -> list:
    """Every decode shape (`decode_tiling`'s) split in 1, 2, 4 and `DECODE_SPLIT_MAX` parts."""
    out = []
    for wm, wn, pm, tn, stages in decode_shapes(problem, dialect):
        stored = store_plan(problem, dialect, wm * pm * 64, wn * tn, stages)
        out += [preset(wm, wn, pm, tn, **stored, dispatch="row_major", **(dict(split_tail=p) if p > 1 else {}))
                for p in (1, 2, 4, DECODE_SPLIT_MAX)]
    return out
