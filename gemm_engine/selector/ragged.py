"""Whether the Hopper tiles read operands whose rows are not whole 128-byte lines as they are or
from copies re-pitched to whole lines (batch/k_major.py ``copy_ragged``): a box row of a ragged
operand spans two L2 lines, which the tile loads pay for; a copy costs a read and a write of the
operand; or, where the rhs the tile reads is not whole 32-byte sectors, two cubes of a cluster
sharing each rhs slot (`sector_cluster`). selector/specialized_wgmma.py asks for its chosen tile."""
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


#: Clusters over ragged sectors (`sector_cluster`): the sector, and the K the cluster must pass.
SECTOR_BYTES, SECTOR_CLUSTER_MIN_K = 32, 2048


def sector_cluster(problem: MatmulProblem, tile: tuple[int, int], copy: bool) -> bool:
    """Whether ``tile`` takes clusters of two cubes sharing each rhs slot (``cluster_m=2``) because
    the rhs rows it reads (as they are, or re-pitched to 16 bytes by a copy TMA needs) are not whole
    `SECTOR_BYTES`: each box row then starts inside a sector, and the multicast halves the rhs's L2
    requests (H200: bf16 3000^3 in 192 x 192 tiles 78.8 us against 90.8, cuBLAS 76.8; 5000 x 3000 x
    3000 in 128 x 256 tiles 134.7 against 160.1 with the ragged copies; bench/SELECTION_NOTES.md,
    "Clusters over ragged rows"). 192 x 192 tiles where the rows are not copied to whole lines
    (``copy``: copies won at 2900^3); 128 x 256 tiles in place of the ragged copies (``copy``) where
    no copy is needed otherwise, as measured; K past `SECTOR_CLUSTER_MIN_K` (3000^2 x 2048 level);
    not where the epilogue reads a c of its own (4 bytes of spills beside the multicast, ptxas
    sm_90a; accumulating stores add into out without reading it)."""
    ep = problem.epilogue
    if problem.k <= SECTOR_CLUSTER_MIN_K or (ep.c is not None and not ep.accumulate) or problem.lhs.itemsize != 2:
        return False
    forced = copies_needed(problem, WgmmaTile().requires_k_major(problem))
    if not ((tile == (192, 192) and not copy) or (tile == (128, 256) and copy and not forced)):
        return False
    pitch = row_bytes(problem, "rhs")
    return (-(-pitch // 16) * 16 if "rhs" in forced else pitch) % SECTOR_BYTES != 0
