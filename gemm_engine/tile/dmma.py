"""Double-precision tensor-core tile: one plane (warp) runs DMMA ``mma.sync`` on an 8 x 8 output tile.

Instruction (PTX ISA, "Warp-level matrix multiply-accumulate", sm_80+):
``mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64``: the whole warp computes one 8 x 8 x 4 product
in IEEE double precision (unlike the f16 m8n8k4 shape, which is four independent 8-thread products).

Register fragments per lane (PTX ISA 9.7.14.5.2, "Matrix Fragments for mma.m8n8k4 with .f64
floating point type"; groupID g = lane >> 2, threadID_in_group t = lane % 4):

* A (8 x 4, "row"): one double, a0 = A[g][t]  (row m = g, column k = t);
* B (4 x 8, "col"): one double, b0 = B[t][g]  (row k = t, column n = g);
* C / D (8 x 8):    two doubles, c_i = C[g][2t + i] for i in {0, 1}.

So both operand fragments are the same shared-memory element of their tile: k = t, and m (lhs) or n
(rhs) = g. ``ldmatrix`` moves 16-bit elements only, so each lane reads its one double with a plain
shared-memory load, from either orientation the stage stores (`SmemTile.at`).

Bank conflicts: a warp's 8-byte loads are served a half-warp (16 lanes, 128 bytes, all 32 banks) at
a time, so a load is conflict-free when the 16 lanes of each half read 16 distinct 8-byte words
modulo 16. Lanes of a half-warp cover g in 4 consecutive values and t in 0..3; the element is at
``t * ld + g`` (k-major) or ``g * ld + t`` (k-contiguous), which is a permutation of 0..15 modulo
16 exactly when ``ld / 4`` is odd. The stage's default padding (8 elements) would make ``ld`` a
multiple of 8 and every load a 2-way conflict, so the tile asks for rows padded by 4 doubles
(``smem_pad``): ``ld = 16j + 4`` for every stage extent the plane stage builds (multiples of 16 along
m / n, and stage_k a multiple of 4; 8 gives 12, also fine). Rows stay a multiple of 16 bytes, as
the ``cp.async`` chunk loader needs.

CUDA only: the instruction is the CUDA dialect's ``dmma`` intrinsic, and `setup` refuses every other dialect and devices below sm_80.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen.dialect import Dialect
from ..errors import SetupError
from ..problem import MatmulProblem
from ..selection import Knob
from .base import PLANE_SCOPE, SmemTile, TileConfig, TileMatmul

#: The lane id inside the plane, as every fragment expression uses it.
LANE = "lane"
#: groupID and threadID_in_group of the ISA's fragment tables.
GROUP = "lane_g"
THREAD_IN_GROUP = "lane_t"

#: The instruction's shape (m, n, k).
SHAPE = (8, 8, 4)
#: Shared-memory row padding in doubles (see the module docstring: ld / 4 odd, no bank conflicts).
SMEM_PAD_F64 = 4


@dataclass(frozen=True)
class DmmaTileConfig(TileConfig):
    smem_pad: int = SMEM_PAD_F64   # see the module docstring (the plane stage's default is 8)


class DmmaTile(TileMatmul):
    name = "dmma"
    scope = "plane"
    knobs = (Knob("tile_m", 8, "rows of a plane's tile (the instruction's: 8)"),
             Knob("tile_n", 8, "columns of a plane's tile (the instruction's: 8)"),
             Knob("tile_k", 0, "k of a tile (0: the instruction's 4)"))
    provides = frozenset({PLANE_SCOPE})
    reads_k_contiguous = True
    lanes = (("lane", "UNIT_ID & 31"), ("lane_g", "lane >> 2"), ("lane_t", "lane & 3"))

    # -- host ---------------------------------------------------------------------------------
    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> DmmaTileConfig:
        dev = dialect.device
        if dialect.backend != "cuda" or not dialect.supports("mma_sync"):
            cc = "" if dev.compute_capability is None else " sm_%d%d" % dev.compute_capability
            raise SetupError(self.name, f"needs f64 mma.sync (DMMA, CUDA sm_80 or newer); device {dev.name!r} "
                                        f"({dialect.backend}{cc}) has none")
        if dev.plane_size != 32:
            raise SetupError(self.name, f"mma.sync needs 32-wide planes, device has {dev.plane_size}")
        for side, et in (("lhs", problem.lhs), ("rhs", problem.rhs), ("out", problem.out)):
            if et.storage != "f64":
                raise SetupError(self.name, f"{side} is {et.name}: the DMMA tile multiplies float64 only "
                                            f"(f64 x f64 -> f64)")
        tm, tn = selection.tile_m, selection.tile_n
        tk = selection.tile_k or SHAPE[2]
        if (tm, tn, tk) != SHAPE:
            raise SetupError(self.name, f"tile {tm}x{tn}x{tk} is not the f64 instruction shape "
                                        f"{SHAPE[0]}x{SHAPE[1]}x{SHAPE[2]} (tile_k=0 picks k)")
        return DmmaTileConfig(tile_m=SHAPE[0], tile_n=SHAPE[1], tile_k=SHAPE[2], compute="f64")

    # -- registers ------------------------------------------------------------------------------
    def declare_lhs(self, cfg, d, frag):
        return f"{d.c_type('f64')} {frag};"

    def declare_rhs(self, cfg, d, frag):
        return f"{d.c_type('f64')} {frag};"

    def declare_acc(self, cfg, d, acc):
        return f"{d.c_type('f64')} {acc}[2];"

    def init_acc(self, cfg, d, acc):
        return f"{acc}[0] = 0.0; {acc}[1] = 0.0;"

    # -- shared memory -> fragments -------------------------------------------------------------
    def load_lhs(self, cfg, d, frag, src: SmemTile):
        # a0 = A[m = g][k = t]: element (k = t, m = g) of the lhs tile.
        return f"{frag} = {src.at(THREAD_IN_GROUP, GROUP)};"

    def load_rhs(self, cfg, d, frag, src: SmemTile):
        # b0 = B[k = t][n = g]: element (k = t, n = g) of the rhs tile.
        return f"{frag} = {src.at(THREAD_IN_GROUP, GROUP)};"

    # -- compute ----------------------------------------------------------------------------------
    def execute(self, cfg, d, lhs, rhs, acc):
        return d.dmma(acc, lhs, rhs)

    def acc_elements(self, cfg, acc):
        # c_i = C[g][2t + i]
        col = f"({THREAD_IN_GROUP} << 1)"
        yield GROUP, col, f"{acc}[0]"
        yield GROUP, f"{col} + 1", f"{acc}[1]"
