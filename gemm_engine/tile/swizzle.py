"""XOR swizzle of 16-byte chunks in shared-memory lines: a layout ldmatrix reads without bank
conflicts and without padding.

An operand's stage in shared memory is a set of *lines* (its rows of shared memory) of
``line_bytes`` each, cut into 16-byte chunks. One ``ldmatrix`` phase reads an 8 x 8 block of
16-bit elements: 8 lanes each address one 16-byte chunk, the same chunk column of 8 consecutive
lines. Shared memory has 32 banks of 4 bytes, i.e. 8 groups of 16 bytes per 128 bytes, so the phase
is conflict-free when those 8 chunks fall into 8 distinct groups. Unpadded lines of 128 bytes or
more put them all in one group (8-way conflicts); padding each line by 16 bytes avoids that but
costs shared memory (NVIDIA's OpenCL driver gives 48 KiB: a 128 x 128 x 32 f16 ring fits 2 slots
padded, 3 unpadded). Swizzled, chunk ``c`` of line ``l`` is stored at chunk ``c ^ phase(l)`` of the
same line, with

* lines of 128 bytes or more (a multiple of 128): ``phase(l) = l & 7`` (the low three bits of c:
  each 128-byte run of a line is permuted within itself; CUTLASS's Swizzle<3, 4, 3>);
* lines of 64 bytes (two per 128): ``phase(l) = (l >> 1) & 3``; of 32 bytes: ``(l >> 2) & 1``;
* lines of 16 bytes: no swizzle (8 lines are 128 contiguous bytes already).

In each case the group of (line l, chunk c) is a bijection of ``l mod 8`` for a fixed c, so any 8
consecutive lines are conflict-free, whatever the first. The wgmma layout (tile/wgmma.py) permutes
each 128-byte line the same way (``SwizzledChunkLoader`` uses `byte_offset` of 128-byte lines).

Those phases serve ldmatrix (``reads="ldmatrix"``). The f64 DMMA tile (tile/dmma.py) reads another
pattern (``reads="dmma"``): each lane one 8-byte element, a half-warp's 16 lanes 4 consecutive lines
(g) x 4 consecutive elements (t) of a k-contiguous operand, or 4 lines (t) x 4 elements (g) of an
m- or n-contiguous one, conflict-free when the 16 elements fall on 16 distinct 8-byte words modulo
16. Unpadded, lines of 64 bytes put lines l and l + 2 on the same words (2-way conflicts) and lines
of 128 bytes or more all 4 lines on the same words (4-way). Its phases: ``phase(l) = l & 2`` for
64-byte lines, ``(2 l) & 7`` for lines of 128 bytes or more (each of the 4 lines' chunk pairs, or
single chunks, on its own quarter of the 128 bytes), none for 32 and 16 (8 or 4 doubles a line are
conflict-free unpadded); they repeat every 4 lines, so `period` holds for both.

`ChunkSwizzle` renders the expressions: the chunk loaders write with `byte_offset` / `element`,
the tiles read with `element` (through `SmemTile`), so both sides are the same code.
"""
from __future__ import annotations

from dataclasses import dataclass

#: Bytes of one chunk (one cp.async, one ldmatrix row).
CHUNK_BYTES = 16
#: The read patterns a swizzle serves (see the module docstring).
READS = ("ldmatrix", "dmma")
#: Chunks per 128 bytes: the 16-byte bank groups of shared memory.
BANK_GROUPS = 8


def swizzle_refusal(line_bytes: int) -> str | None:
    """Why lines of ``line_bytes`` cannot be swizzled (None: they can)."""
    if line_bytes in (16, 32, 64) or (line_bytes > 0 and line_bytes % 128 == 0):
        return None
    return f"lines of {line_bytes} bytes (the swizzle takes lines of 16, 32, 64 bytes or a multiple of 128)"


@dataclass(frozen=True)
class ChunkSwizzle:
    """The swizzled layout of lines of ``line_bytes`` bytes holding ``itemsize``-byte elements."""

    line_bytes: int
    itemsize: int = 2
    reads: str = "ldmatrix"

    def __post_init__(self):
        why = swizzle_refusal(self.line_bytes)
        if why or CHUNK_BYTES % self.itemsize:
            raise ValueError(f"no chunk swizzle of {why or f'{self.itemsize}-byte elements'}")
        if self.reads not in READS:
            raise ValueError(f"reads: expected one of {READS}, got {self.reads!r}")

    @property
    def chunks(self) -> int:
        """Chunks per line."""
        return self.line_bytes // CHUNK_BYTES

    @property
    def line_elems(self) -> int:
        return self.line_bytes // self.itemsize

    @property
    def vec(self) -> int:
        """Elements per chunk."""
        return CHUNK_BYTES // self.itemsize

    @property
    def _shifts_mask(self) -> tuple[int, int, int]:
        """phase(l) = ((l >> right) << left) & mask."""
        if self.reads == "dmma":
            if self.chunks >= BANK_GROUPS:
                return 0, 1, BANK_GROUPS - 1       # (2 l) & 7: 128 bytes or more
            return (0, 0, 2) if self.chunks == 4 else (0, 0, 0)    # l & 2 for 64 bytes; none under
        per_group = max(1, BANK_GROUPS // self.chunks)     # lines sharing one 128 bytes
        return per_group.bit_length() - 1, 0, min(self.chunks, BANK_GROUPS) - 1

    #: Lines after which the phases repeat: a loader's task that is a multiple of this many lines
    #: from its first keeps the first's swizzled offset plus a constant.
    period = BANK_GROUPS

    # -- numbers (tests, host-side checks) -------------------------------------------------------
    def phase_of(self, line: int) -> int:
        right, left, mask = self._shifts_mask
        return ((line >> right) << left) & mask

    def chunk_of(self, line: int, chunk: int) -> int:
        """Where chunk ``chunk`` of line ``line`` is stored (a chunk index in that line)."""
        return chunk ^ self.phase_of(line)

    def byte_of(self, line: int, elem: int) -> int:
        """Byte offset of element ``elem`` of line ``line`` from the stage's start."""
        chunk, within = divmod(elem * self.itemsize, CHUNK_BYTES)
        return line * self.line_bytes + self.chunk_of(line, chunk) * CHUNK_BYTES + within

    # -- expressions ----------------------------------------------------------------------------
    def phase(self, line: str) -> str:
        right, left, mask = self._shifts_mask
        if mask == 0:
            return "0"
        moved = f"(({line}) >> {right})" if right else f"({line})"
        return f"(({moved} << {left}) & {mask})" if left else f"({moved} & {mask})"

    def chunk(self, line: str, chunk: str) -> str:
        """Expression: the stored chunk index of chunk ``chunk`` of line ``line``."""
        if self._shifts_mask[2] == 0:
            return f"({chunk})"
        return f"(({chunk}) ^ {self.phase(line)})"

    def byte_offset(self, line: str, chunk: str) -> str:
        """Expression: bytes from the stage's start to the stored chunk ``chunk`` of line ``line``."""
        return f"({line}) * {self.line_bytes} + ({self.chunk(line, chunk)} << 4)"

    def element(self, line: str, elem: str) -> str:
        """Expression: the element index (from the stage's start) of element ``elem`` of line ``line``."""
        s = self.vec.bit_length() - 1
        within = f" + (({elem}) & {self.vec - 1})" if self.vec > 1 else ""
        return f"({line}) * {self.line_elems} + ({self.chunk(line, f'({elem}) >> {s}')} << {s}){within}"
