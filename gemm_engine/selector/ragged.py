"""Whether the Hopper tiles read operands whose rows are not whole 128-byte lines as they are or
from copies re-pitched to whole lines (batch/k_major.py ``copy_ragged``): a box row of a ragged
operand spans two L2 lines, which the tile loads pay for; a copy costs a read and a write of the
operand. selector/specialized_wgmma.py asks for its chosen tile."""
from __future__ import annotations

from ..batch.k_major import ragged_operands, row_bytes
from ..batch.tma_k_major import copies_needed
from ..problem import MatmulProblem
from ..tile.wgmma import WgmmaTile

#: Operands whose rows are not whole 128-byte lines (`ragged_copies`): the share of an aligned
#: kernel's time each costs the tile loads (bf16 3000^3 in 192 x 128 tiles 0.133 ms against
#: 3008^3's 0.085: 0.56 for two; tiles with their own in `RAGGED_SHARE_TILES`: 192 x 192 94.5 us
#: against 77.8 on an H200, bench/SELECTION_NOTES.md "192 x 192 tiles"), a copy's bytes a second (one
#: read and one write) and launch, the 16-bit kernel's rate on whole lines (3008^3: 640 TFLOP/s;
#: fp8 and int8 twice, tf32 half).
RAGGED_SHARE, COPY_BPS, COPY_LAUNCH_US = 0.25, 2.6e12, 2.0
KERNEL_FLOPS = {1: 1.28e15, 2: 6.4e14, 4: 3.2e14}
RAGGED_SHARE_TILES = {(192, 192): 0.1}
#: Row lengths (bytes) whose misalignment the copy does not pay for: whole halves of a 128-byte line.
HALF_LINE_BYTES = 64


def ragged_copies(problem: MatmulProblem, tile: tuple[int, int] = (128, 256)) -> bool:
    """Whether to copy the operands whose rows are not whole 128-byte lines into rows that are
    (batch/k_major.py ``copy_ragged``): where each copy's pass (`COPY_BPS`, `COPY_LAUNCH_US`) costs
    less than the share of the kernel it saves (`RAGGED_SHARE`, or the ``tile``'s own in
    `RAGGED_SHARE_TILES`; bf16 squares from about 2100), or where they are copied anyway (TMA's 16
    bytes, a K-major tile: then only the pitch changes)."""
    forced = copies_needed(problem, WgmmaTile().requires_k_major(problem))
    # Rows of whole 64-byte halves are not copied for the copy's sake: 4000^3 bf16 (8000-byte rows)
    # ran 17% slower with the copy, 3000^3 (6000) 14% faster (bench/SELECTION_NOTES.md, "Ragged rows").
    ragged = [op for op in ragged_operands(problem) if op in forced or row_bytes(problem, op) % HALF_LINE_BYTES]
    extra = [op for op in ragged if op not in forced]
    if not extra:
        return bool(ragged)
    kernel_us = problem.flops / KERNEL_FLOPS.get(problem.lhs.itemsize, KERNEL_FLOPS[4]) * 1e6
    for op in extra:
        size = problem.batch * problem.k * (problem.m if op == "lhs" else problem.n) * problem.lhs.itemsize
        if 2 * size / COPY_BPS * 1e6 + COPY_LAUNCH_US >= RAGGED_SHARE_TILES.get(tile, RAGGED_SHARE) * kernel_us:
            return False
    return True
