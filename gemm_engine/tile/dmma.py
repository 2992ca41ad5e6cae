"""Double-precision tensor-core tile: one plane (warp) runs DMMA ``mma.sync`` on f64.

Instructions (PTX ISA, "Warp-level matrix multiply-accumulate"), one per tile shape:

* ``mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64`` (sm_80+): an 8 x 8 x 4 product;
* ``mma.sync.aligned.m16n8k{4,8,16}.row.col.f64.f64.f64.f64`` (sm_90+): 16 x 8 x k. On the H100 the
  m8n8k4 shape reaches about half of the FP64 tensor peak (the float64 rows sat at 0.47-0.49x
  cuBLAS); the sm_90 shapes do four (k = 8) to eight (k = 16) times the work per instruction.

Register fragments per lane (PTX ISA 9.7.14.5.2 for m8n8k4 and 9.7.14.5.4 / .5.6 / .5.8 for the
m16n8 shapes, ".f64"; groupID g = lane >> 2, threadID_in_group t = lane % 4), one double each:

* A (m x k, "row"): ``m * k / 32`` doubles, a_i = A[g + 8 (i & 1)][4 (i >> 1) + t] (for m = 8 only
  i = 0: A[g][t]);
* B (k x 8, "col"): ``k / 4`` doubles, b_i = B[t + 4 i][g];
* C / D (m x 8): ``m / 4`` doubles, c_i = C[g + 8 (i >> 1)][2t + (i & 1)].

So every fragment element is one shared-memory element of its tile at k = t (+ 4j) and m (lhs) or
n (rhs) = g (+ 8h): ``ldmatrix`` moves 16-bit elements only, so each lane reads its doubles with
plain shared-memory loads, from either orientation the stage stores (`SmemTile.at`).

Bank conflicts: a warp's 8-byte loads are served a half-warp (16 lanes, 128 bytes, all 32 banks) at
a time, so a load is conflict-free when the 16 lanes of each half read 16 distinct 8-byte words
modulo 16. Lanes of a half-warp cover g in 4 consecutive values and t in 0..3; the element is at
``t * ld + g`` (k-major) or ``g * ld + t`` (k-contiguous) plus a constant, which is a permutation of
0..15 modulo 16 exactly when ``ld / 4`` is odd. The stage's default padding (8 elements) would make
``ld`` a multiple of 8 and every load a 2-way conflict, so the tile asks for rows padded by 4
doubles (``smem_pad``): ``ld = 16j + 4`` for every stage extent the plane stage builds (multiples of
16 along m / n, and stage_k a multiple of 4; 8 gives 12, also fine). Rows stay a multiple of 16
bytes, as the ``cp.async`` chunk loader needs. Unpadded rows whose 16-byte chunks are XOR-permuted
(the plane stage's ``smem_swizzle``, with the phases tile/swizzle.py gives ``reads="dmma"``) are
conflict-free too and hold a ring a third larger in the same bytes: NVIDIA's OpenCL driver's 48 KiB.

The instruction is the dialect's ``dmma`` intrinsic (codegen/ptx_intrinsics.py): CUDA sm_80+, and
NVIDIA's OpenCL driver where the capability probe found it (features ``f64_mma``, ``f64_mma_m16``
for the m16n8 shapes); `setup` refuses every other device, and the m16n8 shapes below sm_90.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..codegen.dialect import Dialect
from ..errors import SetupError
from ..problem import MatmulProblem
from ..compose.selection import Knob
from ..compose.capabilities import PLANE_SCOPE
from .base import SmemTile, TileConfig, TileMatmul
from .mma import no_mma_reason

#: The lane id inside the plane, as every fragment expression uses it.
LANE = "lane"
#: groupID and threadID_in_group of the ISA's fragment tables.
GROUP = "lane_g"
THREAD_IN_GROUP = "lane_t"

#: The instruction shapes (m, n, k) -> the compute capability that has it.
SHAPES = {(8, 8, 4): (8, 0), (16, 8, 4): (9, 0), (16, 8, 8): (9, 0), (16, 8, 16): (9, 0)}
#: The sm_80 shape, which tile_m=8 (the default) selects.
SHAPE = (8, 8, 4)
#: Shared-memory row padding in doubles (see the module docstring: ld / 4 odd, no bank conflicts).
SMEM_PAD_F64 = 4


@dataclass(frozen=True)
class DmmaTileConfig(TileConfig):
    smem_pad: int = SMEM_PAD_F64   # see the module docstring (the plane stage's default is 8)
    swizzle_reads: ClassVar[str] = "dmma"    # unpadded rows (smem_swizzle): tile/swizzle.py's DMMA phases

    @property
    def a_doubles(self) -> int:
        return self.tile_m * self.tile_k // 32

    @property
    def b_doubles(self) -> int:
        return self.tile_k // 4

    @property
    def c_doubles(self) -> int:
        return self.tile_m // 4

    @property
    def acc_regs(self) -> int:
        return 2 * self.c_doubles


class DmmaTile(TileMatmul):
    name = "dmma"
    scope = "plane"
    knobs = (Knob("tile_m", 8, "rows of a plane's tile: 8 (m8n8k4, sm_80+) or 16 (m16n8k*, sm_90+)"),
             Knob("tile_n", 8, "columns of a plane's tile (the instruction's: 8)"),
             Knob("tile_k", 0, "k of a tile: 4, or 8 / 16 with tile_m=16 (0: 4)"))
    provides = frozenset({PLANE_SCOPE})
    reads_k_contiguous = True
    reads_swizzled = True          # every read is `SmemTile.at`
    lanes = (("lane", "UNIT_ID & 31"), ("lane_g", "lane >> 2"), ("lane_t", "lane & 3"))

    # -- host ---------------------------------------------------------------------------------
    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> DmmaTileConfig:
        dev = dialect.device
        if not dialect.supports("f64_mma"):
            raise SetupError(self.name, no_mma_reason(dialect, "f64_mma", "f64 mma.sync (DMMA)"))
        if dev.plane_size != 32:
            raise SetupError(self.name, f"mma.sync needs 32-wide planes, device has {dev.plane_size}")
        for side, et in (("lhs", problem.lhs), ("rhs", problem.rhs), ("out", problem.out)):
            if et.storage != "f64":
                raise SetupError(self.name, f"{side} is {et.name}: the DMMA tile multiplies float64 only "
                                            f"(f64 x f64 -> f64)")
        tm, tn = selection.tile_m, selection.tile_n
        tk = selection.tile_k or 4
        shape = (tm, tn, tk)
        if shape not in SHAPES:
            shapes = ", ".join("x".join(map(str, s)) for s in SHAPES)
            raise SetupError(self.name, f"tile {tm}x{tn}x{tk} is not an f64 instruction shape ({shapes}; "
                                        f"tile_k=0 picks k=4)")
        need = SHAPES[shape]
        if need > (8, 0) and not dialect.supports("f64_mma_m16"):
            arch = dev.arch or "without sm_90's shapes"
            raise SetupError(self.name, f"the f64 mma.sync shape {tm}x{tn}x{tk} needs sm_{need[0]}{need[1]}; "
                                        f"device {dev.name!r} is {arch} (its shape: 8x8x4)")
        return DmmaTileConfig(tile_m=tm, tile_n=tn, tile_k=tk, compute="f64")

    # -- registers ------------------------------------------------------------------------------
    def declare_lhs(self, cfg, d, frag):
        return self._declare(d, frag, cfg.a_doubles)

    def declare_rhs(self, cfg, d, frag):
        return self._declare(d, frag, cfg.b_doubles)

    def declare_acc(self, cfg, d, acc):
        return self._declare(d, acc, cfg.c_doubles, array=True)

    def init_acc(self, cfg, d, acc):
        return " ".join(f"{acc}[{i}] = 0.0;" for i in range(cfg.c_doubles))

    @staticmethod
    def _declare(d, name, count, array=False):
        """A single double is a scalar (the m8n8k4 fragments), more an array."""
        return f"{d.c_type('f64')} {name}[{count}];" if array or count > 1 else f"{d.c_type('f64')} {name};"

    # -- shared memory -> fragments -------------------------------------------------------------
    @staticmethod
    def _loads(frag, count, elements):
        if count == 1:
            return f"{frag} = {elements[0]};"
        return "\n".join(f"{frag}[{i}] = {e};" for i, e in enumerate(elements))

    def load_lhs(self, cfg, d, frag, src: SmemTile):
        # a_i = A[m = g + 8 (i & 1)][k = 4 (i >> 1) + t]: element (k, m) of the lhs tile.
        return self._loads(frag, cfg.a_doubles, [
            src.at(_plus(THREAD_IN_GROUP, 4 * (i >> 1)), _plus(GROUP, 8 * (i & 1))) for i in range(cfg.a_doubles)])

    def load_rhs(self, cfg, d, frag, src: SmemTile):
        # b_i = B[k = t + 4 i][n = g]: element (k, n) of the rhs tile.
        return self._loads(frag, cfg.b_doubles, [
            src.at(_plus(THREAD_IN_GROUP, 4 * i), GROUP) for i in range(cfg.b_doubles)])

    # -- compute ----------------------------------------------------------------------------------
    def execute(self, cfg, d, lhs, rhs, acc):
        return d.dmma((cfg.tile_m, cfg.tile_n, cfg.tile_k), acc, lhs, rhs)

    def acc_elements(self, cfg, acc):
        # c_i = C[g + 8 (i >> 1)][2t + (i & 1)]
        col = f"({THREAD_IN_GROUP} << 1)"
        for i in range(cfg.c_doubles):
            yield _plus(GROUP, 8 * (i >> 1)), _plus(col, i & 1), f"{acc}[{i}]"


def _plus(expr: str, offset: int) -> str:
    return f"{expr} + {offset}" if offset else expr
