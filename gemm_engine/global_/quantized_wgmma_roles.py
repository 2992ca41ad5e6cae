"""The quantized wgmma level (quantized_wgmma.py) with a producer warpgroup (``producer=1``): its
units issue every copy of the ring, the two consumer warpgroups only dequantize and multiply.

Why: in the level's own form every unit issues its share of each slot's ``cp.async`` copies (x's
swizzled chunks, the weight's word rows) and the cube meets on a barrier each slot. ncu at int4
14336 x 4096 M = 256 (an H200, two warpgroups of 256 rows of x) put the warps' stalls on that
work: the copies' address arithmetic (dispatch stalls), the barrier, and loads waited for where
they are first used, with 2 warps a scheduler and the tensor pipe about half busy. Here a
warpgroup of its own (units ``consumer_units`` on) runs ahead through the blocks of K, as the
warp-specialized dense kernel's producer does (tma_specialized.py), and the consumers meet it on
two mbarriers a slot instead of the cube's barrier. A whole warpgroup, not a warp: ptxas budgets a
wgmma kernel's registers for whole warpgroups, and ``setmaxnreg`` then gives the producer's to the
consumers (`PRODUCER_REGISTERS` / `CONSUMER_REGISTERS`, the register count fixed at entry by the
config's occupancy hint).

* producer, per block b (slot ``b % stages``, fill ``b / stages``): every unit waits until the
  slot is *empty* (parity ``(fill & 1) ^ 1``: a fresh barrier's phase before the first counts as
  complete), issues its copies of the block (x's chunks through the level's `SwizzledChunkLoader`,
  set up for the producer's units; the word rows' 16-byte chunks), then
  ``cp.async.mbarrier.arrive.noinc`` on the slot's *full* barrier, which so completes (an arrival
  a unit) when every unit's copies are done; no unit waits for its own copies but at the end.
* consumers, per block i: wait until slot ``i % stages`` is *full* (parity ``(i / stages) & 1``),
  a proxy fence (the copies wrote through the generic proxy, wgmma reads through the async one),
  then the level's block as before: the scales, the A buffer from the words, the next block's
  scale loads, the batch, ``wgmma.wait_group(a_buffers - 1)``; after that wait the batch of block
  ``i - a_buffers + 1`` is done (its A buffer and slot read), and each warpgroup's first unit
  releases that slot (one arrival each on its *empty* barrier).

The producer falls through to the end of the body with the others (a batch level's code after the
body, as the split-K fixup's cube barriers, runs in every unit); a listener's before-store code runs
in the consumers' units only (a listener that meets the whole cube there would wait for ever). Setup refuses it with one
warpgroup (no fixed register count at entry for the split), with ``k_split`` (its sums meet
through the ring at the end) and on x's register path (rows not 4-byte aligned: stored by the
copying unit itself).
"""
from __future__ import annotations

from ..codegen.dialect import Dialect
from ..errors import SetupError
from .quantized_wgmma_config import (BARRIER_BYTES, CONSUMER_REGISTERS, PRODUCER_REGISTERS, PRODUCER_UNITS, WARPGROUP,
                                     QuantizedWgmmaConfig)
from .tma_specialized_config import REGISTER_FILE


def check_register_split(name: str, cfg: QuantizedWgmmaConfig) -> None:
    """SetupError (naming level ``name``) unless the producer's registers given back cover what the
    consumers take: ``setmaxnreg.inc`` waits for ever for registers no warpgroup freed. At entry
    every unit holds the launch's share of the file (a multiple of 8, fixed by the occupancy hint)."""
    if not cfg.producer:
        return
    entry = (REGISTER_FILE // cfg.units) & ~7
    freed, taken = PRODUCER_UNITS * (entry - PRODUCER_REGISTERS), cfg.consumer_units * (CONSUMER_REGISTERS - entry)
    if freed < taken:
        raise SetupError(name, f"{cfg.units} units enter with {entry} registers each: the producer's "
                               f"{PRODUCER_REGISTERS} free {freed}, the consumers' {CONSUMER_REGISTERS} take {taken}")


def slot_full(slot: str) -> str:
    return f"(qw_bars + {BARRIER_BYTES}u * ({slot}))"


def slot_empty(cfg: QuantizedWgmmaConfig, slot: str) -> str:
    return f"(qw_bars + {BARRIER_BYTES}u * ({cfg.stages}u + ({slot})))"


def _word_copies(cfg: QuantizedWgmmaConfig, d: Dialect, scope, slot: str) -> list[str]:
    """Statements: the producer lane's 16-byte copies of the block's word rows (``qw_kw``: its first)
    into slot ``slot``: chunk ``qp_lane + PRODUCER_UNITS t`` of the slot's rows (``stage_n / 4`` chunks a row)."""
    per_row = cfg.stage.stage_n // 4
    total = cfg.word_rows * per_row
    lines = []
    for task in range(-(-total // PRODUCER_UNITS)):
        at = f"(qp_lane + {task * PRODUCER_UNITS})"
        row, chunk = f"({at} / {per_row})", f"({at} % {per_row})"
        col = f"{scope.n0} + 4 * {chunk}"
        valid = [f"qw_kw + {row} < qw_kwords"] + ([f"{col} < {scope.n}"] if cfg.check_n else [])
        src = f"{scope.rhs.ptr} + {cfg.weights.word_index(f'qw_kw + {row}', col, scope.rhs.ld)}"
        dst = f"{slot} + {cfg.x_bytes}u + (unsigned)({row} * {4 * cfg.row_words} + 16 * {chunk})"
        ok = " && ".join(valid)
        copy = d.cp_async("cg", 16, dst, f"({ok}) ? {src} : {scope.rhs.ptr}", f"({ok}) ? 16 : 0")
        lines.append(f"if ({at} < {total}) {copy}" if (task + 1) * PRODUCER_UNITS > total else copy)
    return lines


def _producer(level, cfg: QuantizedWgmmaConfig, d: Dialect, scope) -> list[str]:
    x, s = level.x_loader, cfg.stages
    slot = f"(qw_ring_base + qp_slot * {cfg.slot_bytes}u)"
    return [
        d.setmaxnreg(False, PRODUCER_REGISTERS),
        f"const int qp_lane = UNIT_ID - {cfg.consumer_units};",
        x.declare(cfg.lhs_loader, d, scope.lhs, scope.m0, "0", unit="qp_lane"),
        "for (i64 qp_b = 0; qp_b < qw_blocks; ++qp_b) {",
        f"const unsigned qp_slot = (unsigned)(qp_b % {s});",
        d.mbarrier_wait(slot_empty(cfg, "qp_slot"), f"((unsigned)(qp_b / {s}) & 1u) ^ 1u"),
        "{",
        f"const i64 qw_kw = qp_b * {cfg.word_rows};",
        x.issue(cfg.lhs_loader, d, scope.lhs, slot, scope.m0, f"qp_b * {cfg.block_k}", scope.m, scope.k),
        x.advance(cfg.lhs_loader, scope.lhs, cfg.block_k),
        *_word_copies(cfg, d, scope, slot),
        "}",
        d.cp_async_mbarrier_arrive(slot_full("qp_slot")),
        "}",
        d.cp_async_wait_all(),
    ]


def _block(level, cfg: QuantizedWgmmaConfig, d: Dialect, scope, block: str, buf: int) -> str:
    """The warpgroups' block ``block`` on A buffer ``buf`` (the level's `_block` without copies)."""
    s, nb = cfg.stages, cfg.a_buffers
    once = cfg.scales_per == "once"
    scales = [] if once else level.scale_loads(cfg, scope, f"{block} + 1", (buf + 1) % nb)
    done = f"({block}) - {nb - 1}"          # the block whose batch the wait below retires
    release = d.mbarrier_arrive(slot_empty(cfg, f"(unsigned)(({done}) % {s})"))
    return "\n".join([
        "{",
        d.mbarrier_wait(slot_full(f"(unsigned)(({block}) % {s})"), f"(unsigned)(({block}) / {s}) & 1u"),
        d.fence_proxy_async(),
        *([] if once else level.scale_values(cfg, d, buf)),
        *level.dequantize(cfg, d, block, buf),
        *scales,
        *level.wgmma_batch(cfg, d, block, buf),
        d.wgmma_wait(nb - 1),
        f"if ({done} >= 0 && UNIT_ID % {WARPGROUP} == 0) {release}",
        "}"])


def _consumers(level, cfg: QuantizedWgmmaConfig, d: Dialect, scope, listener) -> list[str]:
    accs = cfg.a_tiles * cfg.tokens // 2
    return [
        d.setmaxnreg(True, CONSUMER_REGISTERS),
        *level.lane_state(cfg, d, scope),
        *level.scale_state(cfg, d, scope),
        *level.block_runs(cfg, lambda block, buf: _block(level, cfg, d, scope, block, buf)),
        d.wgmma_wait(0),
        d.pin_registers("qw_acc", accs),
        *level.before_store(listener),
        *level.stores(cfg, d, scope),
    ]


def producer_body(level, cfg: QuantizedWgmmaConfig, d: Dialect, scope) -> str:
    """The kernel body of the level with a producer warpgroup (the module docstring)."""
    listener = level.chain()
    inits = "\n".join(d.mbarrier_init(slot_full(str(i)), PRODUCER_UNITS) + "\n"
                      + d.mbarrier_init(slot_empty(cfg, str(i)), cfg.warpgroups) for i in range(cfg.stages))
    return "\n".join([
        *level.kernel_start(listener),
        f"const i64 qw_kwords = ({scope.k} + {cfg.per_word - 1}) / {cfg.per_word};",
        f"const i64 qw_blocks = ({scope.k} + {cfg.block_k - 1}) / {cfg.block_k};",
        f"if (UNIT_ID == 0) {{\n{inits}\n{d.fence_mbarrier_init()}\n}}",
        "SYNC_CUBE();",
        f"if (UNIT_ID >= {cfg.consumer_units}) {{",
        *_producer(level, cfg, d, scope),
        "} else {",
        *_consumers(level, cfg, d, scope, listener),
        "}",
    ])


__all__ = ["check_register_split", "producer_body", "slot_empty", "slot_full"]
