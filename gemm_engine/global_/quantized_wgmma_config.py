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
        return self.stages * self.slot_bytes + ATOM_BYTES      # + the alignment slack


__all__ = ["A_ROWS", "BLOCK_K", "QuantizedWgmmaConfig", "ROW_PAD", "WARPGROUP"]
