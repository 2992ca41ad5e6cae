"""The conditions of the rule table (rules.py) and of the families' members (families.py): each
takes (problem, dialect) and returns None where its algorithm should be taken, else the reason it
should not (it could run: a refusal is its setup's SetupError, not a condition's).

The measurements behind each bound: bench/SELECTION_NOTES.md, "Rule conditions".
"""
from __future__ import annotations

from ..batch.dequantize_first import dense_view
from ..batch.tma_k_major import copies_needed
from ..codegen.dialect import Dialect
from ..problem import Layout, MatmulProblem
from ..tile.wgmma import WgmmaTile
from .base import tile_count
from .quantized_decode import one_launch_fills
from .quantized_wgmma import MAX_M as WGMMA_MAX_M, MIN_M as WGMMA_MIN_M, past_256_loses, past_512_loses
from .quantized_wgmma import split_worth_it as wgmma_one_launch_reason
from .skinny import MAX_ROWS, skinny_axis
from .small_wave import small_wave
from .specialized_wgmma import decode_choice, select_specialized_tiling, selected_tiles
from .waves import STREAM_MIN_BYTES, big_operand_bytes, short_side, streams_weights


def always(problem: MatmulProblem, dialect: Dialect) -> str | None:
    return None


def without_cp_async(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """The ring-less tensor-core kernels only where the ring cannot run: a device with mma.sync but
    no cp.async (an OpenCL driver whose probe refused it; every CUDA sm_80+ device has both)."""
    if dialect.supports("cp_async"):
        return "the device has cp.async: the pipelined kernels' ring is faster"
    return None


#: Rows (the short side) up to which auto takes the skinny kernel for a streamed operand contiguous
#: along K: 2 rows of a bf16 4096 x 4096 weight ran 11.8 us (4 outputs a unit) against 13.3 and
#: more for the tensor-core kernels; 8 rows 22.4 us against 14.5 (3 and 4 rows predicted;
#: bench/SELECTION_NOTES.md, "Weight streaming").
SKINNY_AUTO_ROWS = 4


def skinny_worth_it(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """skinny for M = 1 or N = 1 on every device (but one row of a 16-bit weight on Hopper where
    `one_row_streams`); for 2 to `SKINNY_AUTO_ROWS` rows on CUDA where
    it streams a big operand (`STREAM_MIN_BYTES`) contiguous along K (dot products: each staged
    vector serves four weight rows), except where the Hopper specialized kernel's decode tiling takes
    it (bf16 2 / 4 x 4096 x 4096: 9.8 us kernels against 11.6 / 16.0); a few rows against a weight
    contiguous along the outputs run on tensor cores (4 rows of a row-major 4096 x 14336: skinny
    65.7 us, skinny_split_k 48.0, the specialized kernel 43.9)."""
    rows = short_side(problem)
    if rows == 1 and one_row_streams(problem, dialect):
        return ("one row of a streamed 16-bit weight: the Hopper specialized kernel's decode tiles stream it "
                "faster")
    if rows <= 1 or rows > MAX_ROWS:
        return None   # one row: the bandwidth kernel; past MAX_ROWS its setup refuses
    if rows > SKINNY_AUTO_ROWS:
        return f"{rows} rows: more multiply-adds a weight element than register FMA runs at the read bandwidth"
    if dialect.backend != "cuda":
        return "several rows: taken on CUDA GPUs only (tiled kernels elsewhere)"
    if problem.m <= problem.n and _decode(problem, dialect) is not None:
        return (f"{rows} rows of a streamed weight: the Hopper specialized kernel's decode tiles, which read only "
                f"the rows inside the problem, stream it faster")
    if big_operand_bytes(problem) < STREAM_MIN_BYTES:
        return (f"the big operand's {big_operand_bytes(problem)} bytes are not a stream worth a kernel of its own "
                f"(from {STREAM_MIN_BYTES})")
    if not skinny_axis(problem)[1]:
        return (f"{rows} rows of a weight contiguous along the outputs: the tensor-core kernels stream it faster "
                f"than a sum per row of each output")
    return None


#: One row (M = 1) of a 16-bit weight contiguous along K takes the decode tiles from this size,
#: where they read it whole in at most one wave (bench/SELECTION_NOTES.md, "One-row products": H200
#: kernels, 1 x 4096 x 14336 30.7 us against skinny's 31.8, 1 x 5120 x 13824 38.2 against 51.0;
#: 1 x 3072 x 8192 18.3 against 15.9, so not below it); one contiguous along the outputs in up to
#: ONE_ROW_MAX_WAVES waves of tiles (measured to 224 tiles: 1 x 28672 x 4096 63.0 against 63.2).
ONE_ROW_MIN_BYTES, ONE_ROW_MAX_WAVES = 64 << 20, 2


def one_row_streams(problem: MatmulProblem, dialect: Dialect) -> bool:
    """Whether one row of a 16-bit weight streams faster on the specialized kernel's decode tiles
    than on the skinny kernels: where the weight is contiguous along the outputs (skinny_split_k's
    two launches) in up to `ONE_ROW_MAX_WAVES` waves of tiles, else from `ONE_ROW_MIN_BYTES` in at
    most a wave of unsplit tiles."""
    if (problem.m != 1 or problem.batch != 1 or problem.lhs.itemsize != 2 or problem.lhs != problem.rhs
            or problem.weights is not None):
        return False
    choice = _decode(problem, dialect)
    if choice is None:
        return False
    wm, wn, pm, tn, _ = choice[1]
    tiles, sms = tile_count(problem, 64 * wm * pm, wn * tn), dialect.device.compute_units
    if not skinny_axis(problem)[1]:
        return tiles <= ONE_ROW_MAX_WAVES * sms
    return choice[2] == 1 and tiles <= sms and big_operand_bytes(problem) >= ONE_ROW_MIN_BYTES


def quantized(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """The dequantizing compositions only for a quantized rhs (every other one refuses it)."""
    return None if problem.weights is not None else "the rhs is not a quantized weight"


def transposed_weights(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """The dequantizing pass by register FMA for a transposed quantized weight (``W.T``: the pass is
    its one reader, `TransposedQuantizedWeight`) where no tensor-core pass rule above took it."""
    if problem.weights is None or not problem.weights.transposed:
        return "the rhs is not a transposed quantized weight (the loaders read the others in place)"
    return None


#: Largest M the quantized decode kernel takes (its x rows live in registers: 8 tiles of 8).
DECODE_MAX_M = 64


def quantized_decode_worth_it(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """quantized_decode for quantized weights at decode sizes (M <= 64), on the hardware
    instruction only (the OpenCL emulation is for checking it: the register-FMA loader path is
    faster there)."""
    if problem.weights is None:
        return "the rhs is not a quantized weight"
    if problem.m > DECODE_MAX_M:
        return f"M = {problem.m} > {DECODE_MAX_M}: the tiled kernels reuse each dequantized weight more"
    if not dialect.plane_mma_native:
        return "the plane product is emulated on this device: the register-FMA path is faster"
    return None


def quantized_wgmma_worth_it(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """quantized_wgmma for quantized weights between the decode sizes and the prefill sizes where
    the dequantizing pass pays (selector/quantized_wgmma.py), on Hopper."""
    if problem.weights is None:
        return "the rhs is not a quantized weight"
    cc = dialect.device.compute_capability
    if dialect.backend != "cuda" or cc is None or cc[0] != 9:
        return "wgmma: CUDA sm_90 only"
    if not WGMMA_MIN_M <= problem.m <= WGMMA_MAX_M:
        return (f"M = {problem.m} outside {WGMMA_MIN_M}..{WGMMA_MAX_M}: the decode kernel (below) or the "
                f"dequantizing pass and the dense kernel (above) were measured faster")
    return past_512_loses(problem, dialect) or past_256_loses(problem, dialect)


def quantized_wgmma_split_worth_it(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """quantized_wgmma_split_k where quantized_wgmma's cubes cover under half the compute units."""
    return quantized_wgmma_worth_it(problem, dialect) or wgmma_one_launch_reason(problem, dialect)


def quantized_decode_split_worth_it(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """quantized_decode_split_k where one launch of quantized_decode's cubes (its tiling:
    selector/quantized_decode.py) leaves compute units idle: K is cut into ranges over more cubes,
    so that every multiprocessor streams."""
    why = quantized_decode_worth_it(problem, dialect)
    if why is not None:
        return why
    return one_launch_fills(problem, dialect)


#: What decides between the dequantizing pass + a dense tensor-core kernel and the dequantizing
#: loader under mma.sync: the loader's best rate (int4 4096 x 4096 x 4096 on the H100: 77 TFLOP/s;
#: 34-41 at M = 256), the dense 16-bit kernels' (about 600), the bandwidth the pass streams at.
LOADER_TFLOPS, DENSE_TFLOPS, PASS_TBPS = 80.0, 600.0, 3.0


def dequantize_first_seconds(problem: MatmulProblem) -> float:
    """The pass's time (predicted): the packed weight read, its values written in the activations'
    type (the dense kernel's read of them is its own)."""
    w = problem.weights
    return problem.n * problem.k * (w.bits / 8 + problem.rhs.itemsize) / (PASS_TBPS * 1e12)


def dequantize_first_worth_it(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """The dequantizing pass in front of a dense tensor-core kernel where its bytes cost less time
    than the dense kernel saves on the flops against the dequantizing loader: from about 40 rows
    of M (int4; 46 for 8-bit codes); the decode kernels (M <= 64) are ranked before it."""
    if problem.weights is None:
        return "the rhs is not a quantized weight"
    if problem.weights.transposed:
        return None          # the pass is its one reader (`TransposedQuantizedWeight`)
    saved = problem.flops * (1 / LOADER_TFLOPS - 1 / DENSE_TFLOPS) / 1e12
    spent = dequantize_first_seconds(problem)
    if spent >= saved:
        return (f"the pass ({spent * 1e6:.1f} us for the weight's {problem.k} x {problem.n} values) costs more "
                f"than the dense kernel saves on {problem.flops} operations ({saved * 1e6:.1f} us): the "
                f"dequantizing loader converts in the tiles")
    return None


def dequantized_specialized_worth_it(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """dequantized_specialized_wgmma where the pass pays (`dequantize_first_worth_it`) and the dense
    product after it is one specialized_wgmma would take (`specialized_worth_it`)."""
    return dequantize_first_worth_it(problem, dialect) or (
        specialized_worth_it(dense_view(problem), dialect) if problem.weights is not None else None)


#: Smallest big operand worth skinny_split_k's second kernel: below it one launch streams it.
SPLIT_SKINNY_MIN_BYTES = 16 << 20


def skinny_split_worth_it(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """skinny_split_k only on CUDA (where it was measured), where the big operand is large enough
    that a second launch is small against streaming it, and where K is at least the output extent
    (the one-launch kernel's cubes then walk a long K over short runs of each row); several rows
    where skinny would take them, and not one row the decode tiles take (`skinny_worth_it`)."""
    if dialect.backend != "cuda":
        return "measured on CUDA GPUs only; other devices take skinny"
    if short_side(problem) > MAX_ROWS:
        return None   # its setup refuses it
    several = skinny_worth_it(problem, dialect)
    if several is not None:
        return several
    big = problem.rhs if skinny_axis(problem)[0] else problem.lhs
    extent = max(problem.m, problem.n)
    size = problem.batch * problem.k * extent * big.itemsize
    if problem.k < extent:
        return f"K = {problem.k} is shorter than the {extent} outputs: one launch streams it faster"
    if size < SPLIT_SKINNY_MIN_BYTES:
        return f"the big operand's {size} bytes are streamed fast enough by one launch (split from {SPLIT_SKINNY_MIN_BYTES})"
    return None


def _decode(problem: MatmulProblem, dialect: Dialect):
    """The Hopper specialized kernel's decode choice (`decode_choice`) for a weight-streaming product
    (selector/waves.py) it reads as it is (16-bit or fp8, nothing to copy), else None."""
    if not streams_weights(problem) or problem.epilogue.block_scales or not _specialized_home(problem, dialect):
        return None
    if problem.lhs.storage == "i8" or copies_needed(problem, WgmmaTile().requires_k_major(problem)):
        return None
    return decode_choice(problem, dialect)


def streams_on_specialized(problem: MatmulProblem, dialect: Dialect) -> bool:
    """A weight-streaming product (selector/waves.py) that the Hopper specialized kernel takes with
    its decode tiling: 16-bit or fp8 operands it reads as they are, tiles whose split parts could
    keep at least half the device streaming."""
    return _decode(problem, dialect) is not None


def split_k_worth_it(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """split_k only where K is long against the output, so that the output tiles alone would leave
    compute units idle while each walks a long K: K >= 4 max(M, N) and K >= 1024, or a thin output
    (M or N at most 64) with K >= 2048, or exact float32 whose 64 x 64 tiles leave most compute
    units idle; not where the Hopper specialized kernel's tiles (or their parts split along K) fill
    half the device. The batch level still refuses when the tiles fill the device."""
    if streams_on_specialized(problem, dialect):
        return ("a weight-streaming product: the Hopper specialized kernel streams it with its decode tiling "
                "(its tiles split along K in one kernel where that pays)")
    long_k = problem.k >= max(1024, 4 * max(problem.m, problem.n))
    thin = min(problem.m, problem.n) <= 64 and problem.k >= 2048
    few_fma_tiles = (problem.lhs.name == "float32" and problem.precision == "default"
                     and problem.k >= 512 and 2 * tile_count(problem, 64, 64) < dialect.device.compute_units)
    if long_k and not thin and _specialized_home(problem, dialect):
        selection = select_specialized_tiling(problem, dialect)
        tm, tn = selected_tiles(selection)
        spec_tiles = tile_count(problem, tm, tn)
        parts = max(1, selection.get("split_tail", 1))
        if 2 * spec_tiles * parts > dialect.device.compute_units:
            split = f" (each split in {parts} along K)" if parts > 1 else ""
            return (f"{spec_tiles} tiles of {tm} x {tn}{split} fill half the device and more: the Hopper "
                    f"specialized kernel runs K = {problem.k} in one kernel faster")
    # The model's rate was measured on the H100, 16-bit operands of whole 16-byte rows, pipelined_wgmma.
    measured = (_specialized_home(problem, dialect) and problem.lhs.itemsize == 2 and problem.rhs.itemsize == 2
                and not copies_needed(problem, False))
    if (long_k or thin) and not few_fma_tiles and measured:
        unsplit = unsplit_kernel_us(problem, dialect)
        if unsplit < SPLIT_K_CALL_US:
            return (f"the unsplit kernel takes about {unsplit:.0f} us, under a split-K call's "
                    f"{SPLIT_K_CALL_US:.0f} us (two launches and a workspace)")
    if long_k or thin or few_fma_tiles:
        return None
    return (f"K = {problem.k} is not long against M = {problem.m}, N = {problem.n}: the output tiles "
            f"carry the parallelism")


#: A split-K call on the H100 (its two kernels and fresh workspace) took 49-75 us whole, kernels 6-13
#: us of it; a cube of 64 x 64 streamed its K at about 60 GB/s in the one-launch pipelined kernel
#: (48 x 512 x 6536 col/row: 26.4 us against 68.6 split; 24 x 520 x 2648 19.4 against 49.2; 2 x
#: 392 x 336 x 2080 24.3 against 75.0: bench/SELECTION_NOTES.md, "Held-out rows").
SPLIT_K_CALL_US, CUBE_STREAM_BPS = 50.0, 60e9


def unsplit_kernel_us(problem: MatmulProblem, dialect: Dialect) -> float:
    """Predicted microseconds of a one-launch kernel of 64 x 64 tiles: each cube streams its tile's
    lines of K (`CUBE_STREAM_BPS`), in as many waves as the tiles fill."""
    tiles = tile_count(problem, 64, 64)
    waves = -(-tiles // max(1, dialect.device.compute_units))
    return waves * problem.k * 128 * problem.lhs.itemsize / CUBE_STREAM_BPS * 1e6


#: int8 takes the specialized kernel on few tiles only where K is this many times the longer output
#: extent or more (int8's pipelined kernel runs twice the 16-bit rate, so the split pays later).
INT8_SPECIALIZED_MIN_K_RATIO = 8


def _specialized_home(problem: MatmulProblem, dialect: Dialect) -> bool:
    """16-bit or fp8 operands, or int8 with a long K (`INT8_SPECIALIZED_MIN_K_RATIO`), on an sm_90
    CUDA device: where the specialized wgmma kernel runs few tiles, split along K, faster."""
    cc = dialect.device.compute_capability
    if dialect.backend != "cuda" or cc is None or cc[0] != 9:
        return False
    if problem.lhs.storage == "i8":
        return problem.k >= INT8_SPECIALIZED_MIN_K_RATIO * max(problem.m, problem.n)
    return problem.lhs.itemsize == 2 or problem.lhs.storage in ("f8e4m3", "f8e5m2")


#: tf32 and int8 on wgmma transpose a non-K-major operand first (batch/k_major.py): worth its pass
#: once the other extent reaches this (int8 keeps tf32's bound: its pass is cheaper).
WGMMA_TRANSPOSE_MIN_EXTENT = 768


def wgmma_worth_it(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """pipelined_wgmma, except K-major-only kinds (tf32, int8) whose transposing pass costs more
    than wgmma gains over pipelined_mma (which reads any layout)."""
    if not WgmmaTile().requires_k_major(problem):
        return None
    kind = "tf32" if problem.lhs.storage == "f32" else problem.lhs.name
    copies = [("lhs", "N", problem.n)] if Layout(problem.lhs_layout) is not Layout.ROW else []
    copies += [("rhs", "M", problem.m)] if Layout(problem.rhs_layout) is not Layout.COL else []
    for op, other, extent in copies:
        if extent < WGMMA_TRANSPOSE_MIN_EXTENT:
            return (f"{other} = {extent}: transposing the {op} for {kind} wgmma costs more than it gains "
                    f"(auto wants {other} >= {WGMMA_TRANSPOSE_MIN_EXTENT})")
    return None


#: Where specialized_wgmma passes pipelined_wgmma, storing through TMA: from this many 128 x 256
#: tiles (about a third of a wave), or from `SPECIALIZED_MIN_FLOP` operations at any tile count for
#: 16-bit and fp8 operands (int8 with a long K), where its kernel takes longer than a call's host time.
SPECIALIZED_MIN_TILES = 48
SPECIALIZED_MIN_FLOP = 1 << 32
#: Storing directly (outputs whose tile and ring do not fit shared memory together: int8's int32
#: tiles), it was ahead only with this many tiles per multiprocessor and K from this.
SPECIALIZED_MIN_WAVES, SPECIALIZED_MIN_K = 2, 2048


def specialized_worth_it(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """specialized_wgmma where its persistent cubes have enough tiles to share: its fixed costs (a
    full ring to fill, one cube per multiprocessor) lose to pipelined_wgmma on a few; storing
    directly, its exposed stores also want long tiles, two per multiprocessor or more. An operand
    copied first (TMA's 16-byte rule or a K-major tile) costs its pass: worth it on a wave of tiles
    or more with the other extent past the pipelined kernels' bound for theirs."""
    if problem.epilogue.block_scales:
        return None     # the one kernel that applies scales per K block (others run dequantized)
    tiles = tile_count(problem, 128, 256)
    k_major = WgmmaTile().requires_k_major(problem)
    sms = max(1, dialect.device.compute_units)
    ragged = copies_needed(problem, False)
    flop = 2 * problem.batch * problem.m * problem.n * problem.k
    for op in copies_needed(problem, k_major):
        other, extent = ("N", problem.n) if op == "lhs" else ("M", problem.m)
        if op in ragged and not k_major:
            # Copied only for TMA's 16-byte rule: the pipelined kernel reads such an operand in
            # narrow pieces, so the copy pays from 2^32 operations whatever the tiles (982 x 1338 x
            # 6595 col/col: 98 us with the copies against 238; 3941 x 142 x 5010 82 against 179),
            # not below (1084 x 4317 x 48: 74 against 30; bench/SELECTION_NOTES.md, "Held-out rows").
            if flop < SPECIALIZED_MIN_FLOP:
                return (f"the {op} is copied first (TMA's 16-byte rule): on {flop:.3g} operations (< 2^32) "
                        f"the pass costs more than pipelined_wgmma's narrow loads")
            continue
        if extent < WGMMA_TRANSPOSE_MIN_EXTENT or tiles < sms:
            return (f"the {op} is copied first (TMA's 16-byte rule or a K-major tile); with {other} = {extent} "
                    f"and {tiles} tiles of 128 x 256 the pass costs more than it gains (auto wants {other} >= "
                    f"{WGMMA_TRANSPOSE_MIN_EXTENT} and a wave of tiles)")
    if streams_on_specialized(problem, dialect):
        return None       # weight streaming: its decode tiling (selector/specialized_wgmma.py)
    try:
        staged = select_specialized_tiling(problem, dialect)["tma_store"]
    except (KeyError, TypeError):
        staged = False
    if staged:
        if (tiles < SPECIALIZED_MIN_TILES and (flop < SPECIALIZED_MIN_FLOP or not _specialized_home(problem, dialect))
                and not small_wave(problem, dialect)):      # one wave of 64 x 128 tiles: selector/small_wave.py
            return (f"{tiles} tiles of 128 x 256 are fewer than {SPECIALIZED_MIN_TILES} and the problem is "
                    f"small (16-bit and fp8 from 2^32 operations, int8 also with K >= "
                    f"{INT8_SPECIALIZED_MIN_K_RATIO} max(M, N)): pipelined_wgmma is faster there")
        return None
    if tiles < SPECIALIZED_MIN_WAVES * sms:
        return (f"{tiles} tiles of 128 x 256 are fewer than {SPECIALIZED_MIN_WAVES} per multiprocessor "
                f"(its stores are direct for these outputs): pipelined_wgmma is faster there")
    if problem.k < SPECIALIZED_MIN_K:
        return (f"K = {problem.k} is short (from {SPECIALIZED_MIN_K} where its stores are direct): "
                f"pipelined_wgmma is faster there")
    return None
