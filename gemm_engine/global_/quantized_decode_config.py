"""The quantized decode global level's config and default tiling (the level: quantized_decode.py):
what a cube owns, how many steps of 4 word rows each block holds, which scales path it takes."""
from __future__ import annotations

from dataclasses import dataclass

from .base import GlobalConfig
from .read.loaders import OperandTile

PLANE = 32
#: Word rows per step: one per lane t of a lane group (the four t of mma.sync's layout).
STEP_WORDS = 4
#: Most 8-row x tiles (M <= 64): the decode regime; larger M runs the tiled kernels.
MAX_M_TILES = 8
#: Activation dtypes the decode kernel multiplies, by their PTX kind.
KINDS = {"float16": "f16", "bfloat16": "bf16"}


@dataclass(frozen=True)
class DecodeTiling:
    """A cube's share in the names the batch level reads (``stage_m`` x ``stage_n`` outputs, K
    ranges of whole ``stage_k`` for a split-K batch level) and its units."""

    stage_m: int
    stage_n: int
    stage_k: int
    units: int


@dataclass(frozen=True)
class DecodeRead:
    """An operand as the batch level declares it (no shared-memory tile)."""

    operand: OperandTile
    #: Elements read at a time along the operand's contiguous axis (x: a word's worth of rows of K
    #: where rows are aligned to it), None where not the operand's own elements (packed words).
    read_width: int | None = None
    smem_bytes = 0


@dataclass(frozen=True, kw_only=True)
class DecodeConfig(GlobalConfig):
    planes: int        # planes per cube, splitting its K range (or its columns: ``along_n``)
    along_n: bool      # planes take columns of a wider cube instead of blocks of its K range
    loads: int         # 16-byte weight loads per lane and step (32 * loads columns per cube)
    unroll: int        # steps per block (every load of a block in flight at once)
    m_tiles: int       # 8-row tiles of x (M <= 8 * m_tiles)
    prefetch: bool     # the next block's loads in flight while this one multiplies (two register buffers)
    kind: str          # the activations' 16-bit type: "f16" / "bf16"
    x_vector: bool     # x rows are read as 16-byte (int4) / 8-byte (8-bit) vectors
    fast_pairs: bool   # codes dequantized two at a time in 16-bit pairs (codegen/ptx_dequant.py; scales of x's type)
    scratch: int       # shared floats per plane of an emulated plane_mma (0: native)

    @property
    def per_word(self) -> int:
        return self.weights.per_word

    @property
    def step_k(self) -> int:
        return STEP_WORDS * self.per_word

    @property
    def block_k(self) -> int:
        return self.unroll * self.step_k

    @property
    def k_steps(self) -> int:
        """mma k-steps (16 rows of K) per step."""
        return self.per_word // 4

    @property
    def tiles(self) -> int:
        """16-row A tiles (output columns) per plane."""
        return 2 * self.loads

    @property
    def scales_per(self) -> str:
        """How often a lane reloads its columns' scales: "once", "block" or "step"."""
        g = self.weights.group_size
        return "once" if not g else "block" if g % self.block_k == 0 else "step"

    @property
    def plane_columns(self) -> int:
        return 32 * self.loads

    @property
    def reduce_floats(self) -> int:
        return 0 if self.along_n else self.planes * self.stage.stage_m * self.stage.stage_n

    @property
    def shared_memory_bytes(self) -> int:
        return 4 * (self.reduce_floats + self.planes * self.scratch)


def default_prefetch() -> bool:
    """Whether the default tiling keeps the next block in flight while one multiplies (two register
    buffers): never. Measured on the H100 (graph replay, bench/SELECTION_NOTES.md "Quantized decode"),
    one buffer with as many rows of K won or tied everywhere: the second buffer's registers cost
    more warps a multiprocessor than its overlap gained (int4 14336 x 4096 M = 16: 17.5 us against
    22.2; 8-bit: ties). The knob (``prefetch=1``) keeps it."""
    return False


def default_tiling(m_tiles: int, per_word: int, prefetch: bool = False, pairs: bool = False) -> tuple[int, int]:
    """(loads, unroll) for 8-row x tiles: accumulators (2 x loads x m_tiles x 4 registers), x
    (unroll x m_tiles x 4) and weights (unroll x loads x 4) in registers without spilling. ptxas
    (sm_90a, int4 group 128, bf16): M = 1 (2, 4): 127 registers; M = 16 (2, 2); M = 32 (2, 2): 168;
    M = 64 (1, 1): 166, at (1, 2) 255. int4 at 9-16 rows takes (2, 2): (2, 4) measured slower (14336
    x 4096: 20.9 against 17.5 us; 22016 x 4096: 29.5 against 26.5). 8-bit codes dequantized by pairs
    (``pairs``: `DecodeConfig.fast_pairs`) take (2, 4) to M = 16 (118-126 registers; 64 rows of K a
    block, as int4's (2, 2)); by float32 arithmetic (scales of another type) they have more
    temporaries: fp8 M = 8 at (2, 4) spills on sm_90a, at (2, 2) takes 76 registers: half the unroll.
    ``prefetch``: two buffers of half a block (the same registers as one block)."""
    loads, unroll = (2, 4) if m_tiles <= 1 else (2, 2 if per_word == 8 else 4) if m_tiles <= 2 else \
        (2, 2) if m_tiles <= 4 else (1, 1)
    if prefetch:      # two buffers of a block: the same registers as one twice as long
        unroll = max(1, unroll // 2)
    return loads, max(1, unroll // 2) if per_word == 4 and not pairs else unroll
