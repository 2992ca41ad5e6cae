"""Promotion: float32 sums of per-K-block partial products, for the wgmma global levels.

Two things need it. fp8 wgmma accumulates in fewer bits than float32 (the H100 keeps about 14 of the
sum's; DeepGEMM's account), so a long K loses accuracy: measured on the H100 at 4096^3, relative
error 1.3e-3 accumulating in the tensor cores against 1.3e-4 promoted, cuBLASLt's own (torch
._scaled_mm) 1.3e-4. And operand scales per block of 128 along K (``epilogue.scales.BLOCK``) change from one
block to the next, so they must multiply each block's partial product, not the final sum.

A promoting global level lets each ring slot's wgmma batch (fp8: one slot is exactly one block of
128 k) overwrite the accumulators (``fresh``), waits for it, and adds it into a second set of
float32 accumulators times the block's scales (`WarpgroupPartitionedStage.promote`); the write
stores the sums. The price: the wait after every slot, and a second accumulator set, which limits a
warpgroup to 64 x 128 (64 + 64 registers). ``precision="fast_accum"`` (cuBLASLt's fast
accumulation) skips it for fp8 without block scales.

``behind`` (the global level's ``promote_behind`` knob) hides the wait: slices alternate between
two partial sets, and a slice is added into the sums only after the next slice's batch was issued
(wgmma wait of 1, not 0), so a warpgroup's additions run under its own next batch instead of only
under the other warpgroups'. Three accumulator sets (64 x 128: 192 registers): two consumer
warpgroups at most.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import SetupError
from ..problem import MatmulProblem
from ..epilogue.scales import BLOCK

#: The wgmma kinds whose accumulation needs promotion (unless the caller opts out).
FP8_KINDS = ("e4m3", "e5m2")
#: Accumulator registers per unit of both sets (of a consumer's 232: the rest holds addresses).
MAX_PROMOTED_REGS = 160
#: The same for three sets (``behind``), which need a consumer's 232 registers (two warpgroups).
MAX_BEHIND_REGS, MIN_BEHIND_REGISTERS = 192, 232


@dataclass(frozen=True)
class Promotion:
    """A promoting global level's config part: which operands have scales per block of K."""

    lhs_block: bool = False
    rhs_block: bool = False
    behind: bool = False

    def factors(self, scope, step: str = "step"):
        """(row_scale, col_scale) for `WarpgroupPartitionedStage.promotion_factors`: slice
        ``step``'s block scale of a stage-relative row / 128-column block (0 past the edge), or
        None for an operand without block scales. The arrays are the epilogue's ``lhs_scale`` /
        ``rhs_scale`` parameters (epilogue/spec.py)."""
        row = col = None
        if self.lhs_block:
            def row(r):
                g = f"(({scope.m0}) + {r})"
                return f"({g} < {scope.m} ? lhs_scale[{g} * lhs_scale_stride + ({step})] : 0.0f)"
        if self.rhs_block:
            def col(c):
                g = f"(({scope.n0}) + {c})"
                return f"({g} < {scope.n} ? rhs_scale[({step}) * rhs_scale_stride + ({g} >> 7)] : 0.0f)"
        return row, col

    def step(self, stage, st, d, scope, release: str = "", step: str = "step", acc: str = "",
             pending: int = 0) -> list[str]:
        """After a slot's batch was issued (``fresh``): the scales' loads of slice ``step`` (in
        partial set ``acc`` of the stage's `WarpgroupFragments`, "": its ``acc``), the wait until
        at most ``pending`` batches run, ``release`` (the slot is free once its batch is done), the
        additions into the float32 sums."""
        row, col = self.factors(scope, step)
        return ["{", stage.promotion_factors(st, row, col), stage.wait(st, d, pending), stage.pin(st, d, acc),
                release, stage.promote(st, d, row is not None, col is not None, acc), "}"]

    def main_loop(self, stage, st, d, scope, batch, release, lo: str = "0", hi: str = "k_steps") -> list[str]:
        """A consumer's loop over slices ``lo`` .. ``hi`` of a tile (at least one), ``it`` counting them:
        ``batch(acc)`` issues slice ``it``'s batch into partial set ``acc`` (a name of the stage's
        `WarpgroupFragments`), ``release(i)`` frees slice ``i``'s slot. ``behind``: two slices an
        iteration, in sets ``acc`` and ``behind``, each added into the sums after the next one's
        batch was issued."""
        acc, accb = st.fragments.acc, st.fragments.behind
        if not self.behind:
            return [f"for (int step = {lo}; step < {hi}; ++step, ++it) {{", *batch(acc),
                    *self.step(stage, st, d, scope, release("it"), acc=acc), "}"]

        def behind(step, acc, pending):
            return self.step(stage, st, d, scope, release("it - 1u"), step, acc, pending)
        # Slice 0 first, then pairs (odd slice in accb, even in acc), each pair's first batch
        # issued before the slice before it is added; the tail adds what is left.
        return [*batch(acc), "++it;",
                "int step = 1;" if lo == "0" else f"int step = {lo} + 1;",
                f"for (; step + 1 < {hi}; step += 2) {{",
                *batch(accb), *behind("step - 1", acc, 1), "++it;",
                *batch(acc), *behind("step", accb, 1), "++it;",
                "}",
                f"if (step < {hi}) {{",           # an even count: the last slice, in set accb
                *batch(accb), *behind("step - 1", acc, 1), "++it;",
                *behind("step", accb, 0),
                "} else {",
                *behind("step - 1", acc, 0),
                "}"]


def wants_promotion(problem: MatmulProblem) -> bool:
    """Whether a wgmma kernel for ``problem`` must promote (before any tiling is chosen)."""
    fp8 = problem.lhs.storage in ("f8e4m3", "f8e5m2")
    return problem.epilogue.block_scales or (fp8 and problem.precision != "fast_accum")


def check_promotion(component: str, problem: MatmulProblem, stage, behind: bool = False,
                    registers: int = 0) -> Promotion | None:
    """How this stage (a `WarpgroupStageConfig`) promotes (None: not at all); SetupError where it
    must and cannot. ``behind``: asked for (``registers``: a consumer unit's after reallocation)."""
    if not wants_promotion(problem):
        return None
    if stage.tile.kind not in FP8_KINDS or stage.stage_k != BLOCK:
        raise SetupError(component, f"block scales (one per {BLOCK} of K) are applied per ring slot: they "
                                    f"need fp8 slots of {BLOCK} k, not {stage.stage_k} k of {stage.tile.kind}")
    regs = 2 * stage.partition_m * stage.tile.acc_regs
    if regs > MAX_PROMOTED_REGS:
        raise SetupError(component, f"promotion keeps two accumulator sets: partition_m={stage.partition_m} x "
                                    f"tile_n={stage.tile.tile_n} needs {regs} registers per unit (at most "
                                    f"{MAX_PROMOTED_REGS}; tile_n=128 fits)")
    tn = stage.tile.tile_n
    if problem.epilogue.rhs_scale == "block" and BLOCK % tn and tn % BLOCK:
        raise SetupError(component, f"rhs block scales are read once per {BLOCK}-column block of a warpgroup's "
                                    f"columns: tile_n={tn} tiles straddle blocks (tile_n=64 or 128)")
    if behind and (3 * regs // 2 > MAX_BEHIND_REGS or registers < MIN_BEHIND_REGISTERS):
        raise SetupError(component, f"promote_behind keeps three accumulator sets: {3 * regs // 2} registers "
                                    f"per unit of a consumer's {registers} (at most {MAX_BEHIND_REGS}, and "
                                    f"{MIN_BEHIND_REGISTERS} a consumer: two consumer warpgroups at most)")
    return Promotion(problem.epilogue.lhs_scale == "block", problem.epilogue.rhs_scale == "block", behind)

