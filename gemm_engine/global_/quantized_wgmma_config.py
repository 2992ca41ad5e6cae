"""The quantized wgmma global level's config (the level: quantized_wgmma.py): what a cube owns and
where a ring slot's pieces lie in shared memory."""
from __future__ import annotations

from dataclasses import dataclass

from ..tile.wgmma import ATOM_BYTES, SwizzledOperandLayout
from .base import GlobalConfig

#: Rows of K a ring slot holds by default: one 128-byte swizzle row of 16-bit activations (the
#: ``block_k`` knob: this or twice this).
BLOCK_K = 64
#: Units of a warpgroup, and the weight columns (rows of the transposed product) of one A tile.
WARPGROUP, A_ROWS = 128, 64
#: Units of the producer warpgroup (``producer``): they issue every copy, the consumer warpgroups only
#: convert and multiply. A whole warpgroup: ptxas budgets a wgmma kernel's registers for whole
#: warpgroups (288 units compiled to 168 registers, as 384 would), and ``setmaxnreg`` then moves
#: the producer's to the consumers.
PRODUCER_UNITS = 128
#: Registers a unit after ``setmaxnreg``: the producer's (at 40 its k_packed address arithmetic
#: spilled 120 bytes; ptxas sm_90a) and the two consumer warpgroups' (128 x 56 + 256 x 224 = 64512).
PRODUCER_REGISTERS, CONSUMER_REGISTERS = 56, 224
#: Bytes of one mbarrier (a slot's *full* and *empty* ones with a producer).
BARRIER_BYTES = 8
#: Words a slot's weight rows are padded by: 8-bit codes put lanes t and t + 2 on word rows one
#: apart, which the padding moves to other banks.
ROW_PAD = 8


@dataclass(frozen=True, kw_only=True)
class QuantizedWgmmaConfig(GlobalConfig):
    warpgroups: int          # consumer warpgroups of the cube (all of its units)
    a_tiles: int             # 64-column A tiles per warpgroup
    tokens: int              # rows of x per cube: the instruction's n
    stages: int              # ring slots
    a_buffers: int           # A register buffers (wgmma batches pending: a_buffers - 1)
    block_k: int             # rows of K a slot holds (64 or 128)
    k_split: int = 1         # warpgroups sharing each column tile, each taking block_k / k_split rows of a slot
    kind: str                # the activations' 16-bit PTX type: "f16" / "bf16"
    fast_pairs: bool         # codes dequantized by pairs (scales of x's type: dequant_words.py)
    x_layout: SwizzledOperandLayout
    producer: bool = False   # a producer warp issues the copies on mbarriers (global_/quantized_wgmma_roles.py)

    @property
    def consumer_units(self) -> int:
        """The warpgroups' units (the stage's): UNIT_ID below this."""
        return self.stage.units

    @property
    def units(self) -> int:
        return self.stage.units + (PRODUCER_UNITS if self.producer else 0)

    @property
    def occupancy(self) -> int:
        # setmaxnreg needs the register count fixed at entry: ptxas ignores it otherwise (C7508).
        return 1 if self.producer else 0

    @property
    def per_word(self) -> int:
        return self.weights.per_word

    @property
    def word_rows(self) -> int:
        """Word rows of the weight in one slot."""
        return self.block_k // self.per_word

    @property
    def row_words(self) -> int:
        """Words between a slot's consecutive weight word rows (the cube's columns, padded)."""
        return self.stage.stage_n + ROW_PAD

    @property
    def sub_k(self) -> int:
        """Rows of a slot one warpgroup multiplies (its part: ``k_split`` parts a slot)."""
        return self.block_k // self.k_split

    @property
    def x_bytes(self) -> int:
        return self.x_layout.smem_bytes

    @property
    def slot_bytes(self) -> int:
        """x's swizzled rows, then the weight's word rows; a multiple of the swizzle atom, so that
        every slot's x starts on one."""
        raw = self.x_bytes + 4 * self.word_rows * self.row_words
        return -(-raw // ATOM_BYTES) * ATOM_BYTES

    @property
    def scales_per(self) -> str:
        """How often a lane reloads its columns' scales: "once" (per column), "block" (a group
        spans whole parts of a slot, `sub_k` rows) or "step" (several groups a part: one per 16
        rows at least)."""
        g = self.weights.group_size
        return "once" if not g else "block" if g % self.sub_k == 0 else "step"

    @property
    def scale_rows(self) -> int:
        """Scale rows a warpgroup's part of a slot uses."""
        return self.sub_k // self.weights.group_size if self.scales_per == "step" else 1

    @property
    def shared_memory_bytes(self) -> int:
        return self.slot_bytes

    @property
    def dynamic_shared_bytes(self) -> int:
        bars = 2 * self.stages * BARRIER_BYTES if self.producer else 0      # a full and an empty one a slot
        return self.stages * self.slot_bytes + bars + ATOM_BYTES      # + the alignment slack


def default_tokens(m: int, multiple: int = 32) -> int:
    """Rows of x per cube for M rows: all of them up to 256 (each weight value dequantized once a
    cube serves them all), in ``multiple``s (32; a column-major x's atoms: 64); past 256, 256."""
    return min(256, max(multiple, -(-m // multiple) * multiple))


__all__ = ["A_ROWS", "BARRIER_BYTES", "BLOCK_K", "CONSUMER_REGISTERS", "PRODUCER_REGISTERS", "PRODUCER_UNITS", "QuantizedWgmmaConfig", "ROW_PAD", "WARPGROUP",
           "default_tokens"]
