"""Vector register tile: one unit multiplies ``tile_m`` scalars of lhs by ``tile_n`` elements of rhs
held as explicit vectors (OpenCL's ``float16``, ``double8``): the micro-kernel of a CPU GEMM.

Per k step the unit loads one rhs row of ``tile_n`` elements as ``tile_n / width`` vectors, and for
each of its ``tile_m`` lhs elements adds that scalar (broadcast) times each vector into its
accumulators: ``tile_m * tile_n / width`` fused multiply-adds on vector registers, against
``tile_n / width`` vector loads and ``tile_m`` scalar loads. On an AVX-512 CPU (PoCL) a float32
tile of 8 x 32 is 16 accumulator registers of the 32, two rhs vectors and a broadcast.

Explicit vectors rather than scalar code that a work-group vectorizer might widen: PoCL compiles a
vector type straight to the CPU's vector registers, and a unit that holds its tile across a barrier
would have its registers stored to memory by PoCL's work-item loops. The tile reads its operands
where its stage says (`SmemTile`), converting on the way: half precision through the dialect's half vector load,
bfloat16 by shifting its bits, so no loader converts anything.

The rhs is read along n (k-major: rows of the rhs contiguous along n); the lhs either way (one
scalar per row). OpenCL only: CUDA has no vector types this wide.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen.dialect import Dialect
from ..codegen.opencl_dialect import OpenCLDialect
from ..compose.capabilities import UNIT_SCOPE
from ..dtypes import ElementType
from ..compose.selection import Knob
from ..errors import SetupError
from ..problem import MatmulProblem
from .base import SmemTile, TileConfig, TileMatmul

#: Accumulator vectors beyond which a tile no longer fits a CPU's 32 vector registers with its
#: rhs vectors and a broadcast (AVX-512; 16 on AVX2 CPUs, where the selector picks smaller tiles).
MAX_ACC_VECTORS = 28
#: Storage words the tile reads (and converts to its compute type).
_STORAGES = ("f32", "f64", "f16_bits", "bf16_bits")


@dataclass(frozen=True)
class VectorTileConfig(TileConfig):
    width: int = 16                     # components per vector
    lhs: ElementType | None = None      # the element types read from the stage (converted on the way)
    rhs: ElementType | None = None
    space: str = "global"               # where the stage's operands lie (the CPU path reads them in place)

    @property
    def vectors(self) -> int:
        """rhs vectors per row (accumulator vectors per lhs row)."""
        return self.tile_n // self.width


class VectorTile(TileMatmul):
    name = "vector_register"
    scope = "unit"
    knobs = (Knob("tile_m", 8, "rows of a unit's tile (lhs scalars per k step)"),
             Knob("tile_n", 32, "columns of a unit's tile (a multiple of vector_width)"),
             Knob("vector_width", 16, "components per vector register (16 floats or 8 doubles: AVX-512)"))
    provides = frozenset({UNIT_SCOPE})
    reads_k_contiguous = True   # the lhs (scalars); the rhs is read along n, k-major

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> VectorTileConfig:
        if not dialect.supports("wide_vectors"):
            raise SetupError(self.name, f"needs OpenCL C's vector types (float16, double8); the {dialect.backend} "
                                        f"dialect has none this wide")
        for side, et in (("lhs", problem.lhs), ("rhs", problem.rhs)):
            if et.storage not in _STORAGES:
                raise SetupError(self.name, f"{side} is {et.name}: the vector tile reads float32, float64, "
                                            f"float16 and bfloat16")
        if problem.lhs.compute != problem.rhs.compute:
            raise SetupError(self.name, "lhs and rhs must share a compute type")
        compute = problem.lhs.compute
        if compute == "f64" and not dialect.supports("fp64"):
            raise SetupError(self.name, f"float64 is not supported by device {dialect.device.name!r}")
        tm, tn, width = selection.tile_m, selection.tile_n, selection.vector_width
        if width not in dialect.VECTOR_WIDTHS:
            raise SetupError(self.name, f"vector_width={width}: OpenCL vectors have {dialect.VECTOR_WIDTHS} components")
        if tm < 1 or tn < width or tn % width:
            raise SetupError(self.name, f"tile {tm}x{tn} is not whole rows of {width}-wide vectors")
        if tm * tn // width > MAX_ACC_VECTORS:
            raise SetupError(self.name, f"tile {tm}x{tn} holds {tm * tn // width} accumulator vectors of {width}; "
                                        f"at most {MAX_ACC_VECTORS} fit the vector registers")
        return VectorTileConfig(tile_m=tm, tile_n=tn, tile_k=1, compute=compute, smem=problem.lhs.storage,
                                rhs_smem=problem.rhs.storage, width=width, lhs=problem.lhs, rhs=problem.rhs)

    # -- registers ------------------------------------------------------------------------------
    def declare_lhs(self, cfg, d, frag):
        return f"{d.c_type(cfg.compute)} {frag}[{cfg.tile_m}];"

    def declare_rhs(self, cfg, d, frag):
        return f"{d.vector_type(cfg.compute, cfg.width)} {frag}[{cfg.vectors}];"

    def declare_acc(self, cfg, d, acc):
        return f"{d.vector_type(cfg.compute, cfg.width)} {acc}[{cfg.tile_m * cfg.vectors}];"

    def init_acc(self, cfg, d, acc):
        zero = d.splat(cfg.compute, cfg.width, d.zero(cfg.compute))
        return f"#pragma unroll\nfor (int i = 0; i < {cfg.tile_m * cfg.vectors}; ++i) {acc}[i] = {zero};"

    # -- stage -> fragments -----------------------------------------------------------------------
    def load_lhs(self, cfg, d, frag, src: SmemTile):
        return "\n".join(f"{frag}[{i}] = {d.load_global(cfg.lhs, '(&' + src.at('0', str(i)) + ')', '0')};"
                         for i in range(cfg.tile_m))

    def load_rhs(self, cfg, d, frag, src: SmemTile):
        if src.k_contiguous:
            raise SetupError(self.name, "reads the rhs along n (k-major); the stage holds it k-contiguous")
        return "\n".join(f"{frag}[{j}] = {d.load_vector(cfg.rhs, cfg.space, '&' + src.at('0', str(j * cfg.width)), cfg.width)};"
                         for j in range(cfg.vectors))

    # -- compute ----------------------------------------------------------------------------------
    def execute(self, cfg, d, lhs, rhs, acc):
        lines = []
        for i in range(cfg.tile_m):
            a = d.splat(cfg.compute, cfg.width, f"{lhs}[{i}]")
            for j in range(cfg.vectors):
                slot = f"{acc}[{i * cfg.vectors + j}]"
                lines.append(f"{slot} = {d.vector_fma(a, f'{rhs}[{j}]', slot)};")
        return "\n".join(lines)

    def acc_elements(self, cfg, acc):
        for i in range(cfg.tile_m):
            for c in range(cfg.tile_n):
                j, lane = divmod(c, cfg.width)
                yield str(i), str(c), OpenCLDialect.component(f"{acc}[{i * cfg.vectors + j}]", lane)
