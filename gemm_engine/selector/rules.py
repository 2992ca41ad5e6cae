"""The selection rules, in one place: which registered algorithm ``auto`` takes, when, and why.

`RULES` is ordered: ``auto`` takes the first rule whose condition holds for the problem and whose
algorithm sets up. Two different things can pass a rule by:

* *should not be chosen*: the rule's ``when`` returns a reason (skinny_split_k on an output too
  short to be worth a second launch): the algorithm could run, auto prefers what comes after;
* *cannot run*: its setup raises `SetupError` (wgmma on a device without it).

`UNRANKED` names every other built-in algorithm with the reason auto never takes it (and whether
the tuner times it anyway). From these two tables derive ``auto`` (algorithms/auto.py), the
explanation of a choice (explain.py), the tuner's candidates (tuning/space.py) and the tests'
expectations; nothing else keeps a list of names.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..codegen.dialect import Dialect
from .skinny import skinny_axis
from ..problem import Layout, MatmulProblem
from ..tile.wgmma import WgmmaTile


def always(problem: MatmulProblem, dialect: Dialect) -> str | None:
    return None


@dataclass(frozen=True)
class Rule:
    """Take ``algorithm`` (a registered name) when ``when`` returns None; ``why`` says why it sits
    where it does in the order (explain quotes it)."""

    algorithm: str
    why: str
    when: Callable[[MatmulProblem, Dialect], str | None] = field(default=always, compare=False)
    #: The tuner times it (a family: each member), whatever ``when`` says.
    tune: bool = True


@dataclass(frozen=True)
class Unranked:
    """A registered built-in ``auto`` never takes, and why; ``tune``: the tuner times it anyway."""

    algorithm: str
    why: str
    tune: bool = False


# -- the conditions -----------------------------------------------------------------------------------
#: Smallest big operand worth skinny_split_k's second kernel: below it one launch streams it.
SPLIT_SKINNY_MIN_BYTES = 16 << 20


def skinny_split_worth_it(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """skinny_split_k only on CUDA (where it was measured), where the big operand is large enough
    (16 MiB) that a second launch is small against streaming it, and where K is at least the output
    extent: each of the one-launch kernel's cubes then walks a long K over short runs of each row.
    On the H100 (bench/results/h100_2026-11-21_special_cases_skinny_split_k.md), bf16 1 x 8192 x 8192: split 0.0509
    ms, one launch 0.0532; 1 x 14336 x 4096: split 0.0455, one launch 0.0429."""
    if dialect.backend != "cuda":
        return "measured on CUDA GPUs only; other devices take skinny"
    if problem.m != 1 and problem.n != 1:
        return None   # its setup refuses it
    big = problem.rhs if skinny_axis(problem)[0] else problem.lhs
    extent = max(problem.m, problem.n)
    size = problem.batch * problem.k * extent * big.itemsize
    if problem.k < extent:
        return f"K = {problem.k} is shorter than the {extent} outputs: one launch streams it faster"
    if size < SPLIT_SKINNY_MIN_BYTES:
        return f"the big operand's {size} bytes are streamed fast enough by one launch (split from {SPLIT_SKINNY_MIN_BYTES})"
    return None


def split_k_worth_it(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """split_k only where K is long against the output, so that the output tiles alone would leave
    compute units idle while each walks a long K: K >= 4 max(M, N) and K >= 1024, or a thin output
    (M or N at most 64) with K >= 2048 (16 x 8192 x 8192 f16 on the H100: 0.076 ms split against
    0.096 unsplit), or exact float32 whose 64 x 64 tiles leave most compute units idle (512^3 f32:
    0.030 ms split in 4, 0.061 unsplit). The batch level still refuses when the tiles fill the device."""
    long_k = problem.k >= max(1024, 4 * max(problem.m, problem.n))
    thin = min(problem.m, problem.n) <= 64 and problem.k >= 2048
    tiles = problem.batch * -(-problem.m // 64) * -(-problem.n // 64)
    few_fma_tiles = (problem.lhs.name == "float32" and problem.precision == "default"
                     and problem.k >= 512 and 2 * tiles < dialect.device.compute_units)
    if long_k and not thin and _specialized_home(problem, dialect):
        # Where the specialized kernel's tiles (64 x 128 for these sizes), or the parts it splits
        # them into along K (split_tail), fill half a wave and more, it runs in one kernel faster:
        # 1024 x 1024 x 4096 f16 on the H100 14.4 us against split_k_wgmma's 34.3 (26.9 + 7.3 to
        # reduce; bench/results/h100_2026-11-25_kernel_durations_small_{default,specialized}.json);
        # bf16 1000 x 1000 x 4000 26.2 against 50.0, 512 x 1024 x 16384 42.4 against 59.3
        # (bench/results/h100_2026-11-25_kernel_durations_split_tail_bf16.json); fp8 per-tensor bf16
        # 2048 x 2048 x 8192 50.6 against 113.5, 1024 x 1024 x 8192 19.1 against 36.4, 1024 x 2048 x
        # 16384 51.1 against 104.2 (bench/results/h100_2026-11-25_kernel_durations_fp8_long_k_*.json).
        from ..algorithms.specialized_wgmma import SpecializedWgmmaAlgorithm, selected_tiles, tile_count
        selection = SpecializedWgmmaAlgorithm().select(problem, dialect)
        tm, tn = selected_tiles(selection)
        spec_tiles = tile_count(problem, tm, tn)
        parts = max(1, selection.get("split_tail", 1))
        if 2 * spec_tiles * parts > dialect.device.compute_units:
            split = f" (each split in {parts} along K)" if parts > 1 else ""
            return (f"{spec_tiles} tiles of {tm} x {tn}{split} fill half the device and more: the Hopper "
                    f"specialized kernel runs K = {problem.k} in one kernel faster")
    if long_k or thin or few_fma_tiles:
        return None
    return (f"K = {problem.k} is not long against M = {problem.m}, N = {problem.n}: the output tiles "
            f"carry the parallelism")


#: int8 takes the specialized kernel on few tiles only where K is this many times the longer output
#: extent or more. H100 kernel times, b column-major, default (its tail split) against
#: pipelined_wgmma (bench/results/h100_2026-11-25_kernel_durations_int8_long_k.md): 512 x 512 x
#: 32768 29.8-30.8 us against 83.9, 256 x 256 x 65536 47.4-48.2 against 168, 1024 x 1024 x 8192
#: 18.7-19.3 against 19.8; but 1024 x 1024 x 4096 13.7-14.3 against 11.0, 2048 x 512 x 4096 13.6
#: against 10.2, 1024 x 1024 x 2048 11.2-11.6 against 6.8 (int8's pipelined kernel runs twice the
#: 16-bit rate, so the split pays later).
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


#: tf32 and int8 on wgmma transpose a non-K-major operand first (batch/k_major.py): 8 bytes moved
#: per element of it for tf32 (2 for int8), small against 2 M N K operations once the other extent
#: reaches this. Measured on the H100, tf32 with a row-major b: 512^3 wgmma + pass 0.024 ms against
#: mma.sync's 0.014; 1000^3 0.027-0.041 against 0.036; 2048^3 0.082-0.108 against 0.150-0.165
#: (bench/results/h100_2026-11-21_tf32*.md). int8 keeps tf32's bound (its pass is cheaper).
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


#: Where specialized_wgmma passes pipelined_wgmma. Storing through TMA (TmaStoreWriter: the tile's
#: stores run on under the next tile's main loop), on the H100 against cuBLAS in one run
#: (bench/results/h100_2026-11-25_hopper_gemm_tma_store_old_rule.md, both forced): bf16
#: 2048^3 0.81x against 0.72, 128 x 14336 x 4096 0.97 against 0.92, f16 64 x 512^3 batched 1.01
#: against 0.89, relu(a@b+bias) 8192 x 8192 x 64 2.02 against 1.57, bf16 4096^3 0.94 against 0.81;
#: behind only with a few tiles (f16 1000^3: 32 tiles of 128 x 256, 0.81 against 1.02). Storing
#: directly (outputs whose tile and ring do not fit shared memory together: int8's int32 tiles), it
#: was measured ahead only with two tiles per multiprocessor or more and K from 2048
#: (bench/results/h100_2026-11-24_hopper_gemm.md).
#: An operand TMA cannot address or the tile cannot read in its layout is copied first
#: (batch/tma_k_major.py), one pass over it: f16 4093^3 0.043 + 0.054 ms of copies and a 0.251 ms
#: kernel against pipelined_wgmma's 0.826 and cuBLAS's 0.880; fp8 / int8 4096^3 with a row-major b
#: 0.038 + 0.112 / 0.102; tf32 4096^3 0.052 + 0.350 against cuBLAS 0.338
#: (bench/results/h100_2026-11-25_kernel_durations_copies.json).
SPECIALIZED_MIN_TILES = 48
#: ... and from this many operations at any tile count, for 16-bit and fp8 operands (int8 with a long
#: K: `INT8_SPECIALIZED_MIN_K_RATIO`): its kernel then takes
#: longer than a call's host time (about 20 us), and with 64 x 128 tiles below a wave of 128 x 128
#: it runs 1.4-2.4x faster than pipelined_wgmma. H100 kernel times, f16, b row-major (bench/results/
#: h100_2026-11-25_kernel_durations_small_{default,specialized}.json): 1024 x 1024 x 4096 14.4 us
#: against 34.3 (cuBLAS 15.1), 1024 x 1024 x 1000 6.7 against 9.7. Smaller problems keep
#: pipelined_wgmma, whose calls cost less host time where host time is the call. fp8 alike: per-tensor
#: 1024 x 1024 x 8192 18.9 us with its tail split in two, against 36.8 in split_k_wgmma
#: (bench/results/h100_2026-11-25_kernel_durations_split_tail_fp8.json).
SPECIALIZED_MIN_FLOP = 1 << 32
SPECIALIZED_MIN_WAVES, SPECIALIZED_MIN_K = 2, 2048


def specialized_worth_it(problem: MatmulProblem, dialect: Dialect) -> str | None:
    """specialized_wgmma where its persistent cubes have enough tiles to share: its fixed costs (a
    full ring to fill, one cube per multiprocessor) lose to pipelined_wgmma on a few; storing
    directly, its exposed stores also want long tiles, two per multiprocessor or more."""
    from ..batch.tma_k_major import copies_needed
    from ..algorithms.specialized_wgmma import SpecializedWgmmaAlgorithm, tile_count
    if problem.epilogue.block_scales:
        return None     # the one kernel that applies scales per K block (others run dequantized)
    tiles = tile_count(problem, 128, 256)
    copies = copies_needed(problem, WgmmaTile().requires_k_major(problem))
    # A copied operand (transposed for the tile, or re-pitched for TMA) costs its pass: worth it on
    # a wave of tiles or more with the other extent past the pipelined kernels' bound for theirs.
    sms = max(1, dialect.device.compute_units)
    for op in copies:
        other, extent = ("N", problem.n) if op == "lhs" else ("M", problem.m)
        if extent < WGMMA_TRANSPOSE_MIN_EXTENT or tiles < sms:
            return (f"the {op} is copied first (TMA's 16-byte rule or a K-major tile); with {other} = {extent} "
                    f"and {tiles} tiles of 128 x 256 the pass costs more than it gains (auto wants {other} >= "
                    f"{WGMMA_TRANSPOSE_MIN_EXTENT} and a wave of tiles)")
    try:
        staged = SpecializedWgmmaAlgorithm().select(problem, dialect)["tma_store"]
    except (KeyError, TypeError):
        staged = False
    if staged:
        flop = 2 * problem.batch * problem.m * problem.n * problem.k
        if tiles < SPECIALIZED_MIN_TILES and (flop < SPECIALIZED_MIN_FLOP or not _specialized_home(problem, dialect)):
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


# -- the tables ---------------------------------------------------------------------------------------
RULES: tuple[Rule, ...] = (
    Rule("skinny_split_k", "first: M = 1 or N = 1 with a big operand (16 MiB up) contiguous along the "
                           "outputs: K split over a wave of cubes, each reading long runs of rows "
                           "(bf16 1x8192x8192: 0.051 ms against 0.053 in one launch)", skinny_split_worth_it),
    Rule("skinny", "for M = 1 or N = 1 a bandwidth kernel beats any tiled one (one tile row used)"),
    Rule("split_k", "before the tiled kernels: with a long K against a small output, the output tiles "
                    "alone leave compute units idle (64x64x65536 f32: 99x unsplit)", split_k_worth_it),
    Rule("specialized_wgmma", "the Hopper warp-specialized TMA kernel with TMA stores, ahead of "
                              "pipelined_wgmma from a third of a wave of tiles or, 16-bit and fp8 "
                              "(int8 with K >= 8 max(M, N)), 2^32 operations (bf16 4096^3: 0.94x "
                              "cuBLAS against 0.81; relu(a@b+bias) 8192 x 8192 x 64: 2.0x torch "
                              "against 1.6), "
                              "operands TMA cannot address or the tile cannot read copied first (f16 "
                              "4093^3: 2.5x cuBLAS); a small problem passes it by", specialized_worth_it),
    Rule("pipelined_wgmma", "the fastest tensor-core kernel on Hopper (f16 4096^3: 0.85x cuBLAS, against "
                            "0.40-0.45 for mma.sync; tf32 4096^3: 0.80x with its transposing pass, "
                            "against 0.36; the pass only from M, N >= 768)", wgmma_worth_it),
    Rule("pipelined_mma", "tensor cores with a cp.async ring on sm_80+ (behind wgmma where wgmma runs)"),
    Rule("pipelined_dmma", "float64 tensor cores on sm_80+ (m16n8k8 on sm_90: 0.9x cuBLAS, 4.8x register FMA on the H100)"),
    Rule("simple_unit", "register FMA, every backend and dtype: the fallback (f32 4096^3: 0.89x cuBLAS, "
                        "ahead of double_buffering_unit's 0.81)"),
)

UNRANKED: tuple[Unranked, ...] = (
    Unranked("double_buffering_unit", "measured behind simple_unit (f32 4096^3 on the H100: 0.81 vs "
                                      "0.89x cuBLAS)", tune=True),
    Unranked("simple_mma", "tensor cores without the cp.async ring: pipelined_mma / pipelined_wgmma are faster"),
    Unranked("double_buffering_mma", "tensor cores without the cp.async ring: pipelined_mma / "
                                     "pipelined_wgmma are faster"),
    Unranked("simple_wmma", "the WMMA API's fragments: pipelined_mma's mma.sync with ldmatrix is faster"),
    Unranked("simple_dmma", "pipelined_dmma's cp.async ring is faster for float64"),
    Unranked("ordered", "a composition of the algorithm family, slower than simple_unit in the H100 sweeps"),
    Unranked("specialized", "a composition of the algorithm family, slower than simple_unit in the H100 sweeps"),
)

#: Registered families that are aliases choosing among their members (listed on their own).
FAMILY_NOTE = "a family: chooses among its members, which are listed on their own"


def rule_for(name: str) -> Rule | None:
    return next((r for r in RULES if r.algorithm == name), None)


def unranked_reason(name: str) -> str:
    found = next((u for u in UNRANKED if u.algorithm == name), None)
    return found.why if found else "not one of auto's rules: run only when named"
