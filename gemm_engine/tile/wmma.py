"""WMMA tile: one plane (warp) runs the WMMA API (the CUDA dialect renders it) on a 16 x 16 output tile (CUDA only).

The portable tensor-core API: f16 (sm_70+) and bf16 (sm_80+) inputs as ``m16n16k16``, float32 as
tf32 ``m16n16k8`` when the caller opts in (``precision="tf32"``), always with a float32
accumulator. The stage keeps both operands k-major in shared memory, so lhs (m x k, element (m, k)
at ``k * ld + m``) is a column-major ``matrix_a`` and rhs (k x n at ``k * ld + n``) a row-major
``matrix_b``; ``load_matrix_sync`` wants 256-bit aligned tile starts, which the plane stage's
16-row tiles and padded rows give (see `setup`).

Where each accumulator element lives in a lane's registers is unspecified by WMMA, so the writer
cannot address them directly: before each accumulator is written it is stored, row-major, to a
per-plane 16 x 16 staging buffer in shared memory (``stage_accumulator``), and ``acc_elements``
reads lane ``l``'s eight consecutive elements back from there.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen.dialect import Dialect
from ..errors import SetupError
from ..problem import MatmulProblem
from ..compose.selection import Knob
from ..compose.capabilities import PLANE_SCOPE
from .base import SmemTile, TileConfig, TileMatmul

LANE = "lane"
PLANE_SLOT = "((UNIT_ID >> 5) * 256)"     # this plane's 16 x 16 staging block

#: kind -> (k of the instruction, shared-memory word); the CUDA dialect renders the API's types.
_KINDS = {
    "f16": (16, "f16_bits"),
    "bf16": (16, "bf16_bits"),
    "tf32": (8, "f32"),
}


@dataclass(frozen=True)
class WmmaTileConfig(TileConfig):
    kind: str = "f16"


class WmmaTile(TileMatmul):
    name = "wmma"
    scope = "plane"
    knobs = (Knob("tile_m", 16, "rows of a plane's tile (WMMA's: 16)"),
             Knob("tile_n", 16, "columns of a plane's tile (WMMA's: 16)"),
             Knob("tile_k", 0, "k of a tile (0: the shape's)"),
             Knob("precision", "default", "'tf32' lets float32 run on tensor cores rounded to tf32",
                  choices=("default", "tf32")))
    provides = frozenset({PLANE_SCOPE})
    lanes = (("lane", "UNIT_ID & 31"),)
    headers = ("<mma.h>",)

    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> WmmaTileConfig:
        dev = dialect.device
        if dialect.backend != "cuda":
            raise SetupError(self.name, f"WMMA needs CUDA tensor cores; {dialect.backend} has none")
        if problem.lhs != problem.rhs:
            raise SetupError(self.name, f"lhs {problem.lhs.name} and rhs {problem.rhs.name} must share a dtype")
        precision = problem.precision if problem.precision != "default" else selection.precision
        storage = problem.lhs.storage
        if storage == "f16_bits":
            kind, need = "f16", (7, 0)
        elif storage == "bf16_bits":
            kind, need = "bf16", (8, 0)
        elif storage == "f32" and precision == "tf32":
            kind, need = "tf32", (8, 0)
        elif storage == "f32":
            raise SetupError(self.name, "float32 inputs would be rounded to tf32 by the tensor cores; "
                                        "opt in with precision='tf32' or use a register tile")
        else:
            raise SetupError(self.name, f"no WMMA shape for {problem.lhs.name}")
        cc = dev.compute_capability or (0, 0)
        if cc < need:
            raise SetupError(self.name, f"{kind} WMMA needs sm_{need[0]}{need[1]}+, device is sm_{cc[0]}{cc[1]}")
        inst_k, smem = _KINDS[kind]
        tm, tn, tk = selection.tile_m, selection.tile_n, selection.tile_k or inst_k
        if (tm, tn, tk) != (16, 16, inst_k):
            raise SetupError(self.name, f"tile {tm}x{tn}x{tk} is not the {kind} WMMA shape 16x16x{inst_k}")
        return WmmaTileConfig(tile_m=16, tile_n=16, tile_k=inst_k, compute="f32", smem=smem, kind=kind)

    # -- fragments -----------------------------------------------------------------------------
    def declare_lhs(self, cfg, d, frag):
        return f"{d.wmma_fragment('matrix_a', cfg.tile_k, cfg.kind, 'col_major')} {frag};"

    def declare_rhs(self, cfg, d, frag):
        return f"{d.wmma_fragment('matrix_b', cfg.tile_k, cfg.kind, 'row_major')} {frag};"

    def declare_acc(self, cfg, d, acc):
        return f"{d.wmma_fragment('accumulator', cfg.tile_k, None)} {acc};"

    def init_acc(self, cfg, d, acc):
        return d.wmma_fill(acc, d.zero(cfg.compute))

    def _load(self, cfg, d, frag: str, src: SmemTile) -> str:
        if src.k_contiguous:
            raise ValueError("WmmaTile reads k-major shared memory only")
        load = d.wmma_load(frag, cfg.kind, f"&{src.array}[({src.k}) * {src.ld} + ({src.origin})]", src.ld)
        if cfg.kind == "tf32":  # round the loaded float32 values to tf32, as the instruction expects
            load += "\n" + d.wmma_round_tf32(frag)
        return load

    def load_lhs(self, cfg, d, frag, src):
        return self._load(cfg, d, frag, src)

    def load_rhs(self, cfg, d, frag, src):
        return self._load(cfg, d, frag, src)

    def execute(self, cfg, d, lhs, rhs, acc):
        return d.wmma_mma(acc, lhs, rhs)

    # -- writing through the staging buffer ----------------------------------------------------
    def write_prologue(self, cfg, d, planes):
        return f"LOCAL float wmma_staging[{planes * 256}] ALIGN16;"

    def stage_accumulator(self, cfg, d, acc):
        # The first sync keeps this store from overwriting elements other lanes still read for the
        # previous accumulator; the second makes the store visible to every lane of the plane.
        return f"SYNC_PLANE();\n{d.wmma_store_row_major(f'&wmma_staging[{PLANE_SLOT}]', acc, 16)}\nSYNC_PLANE();"

    def acc_elements(self, cfg, acc):
        for e in range(8):  # lane l reads elements 8l .. 8l+7: row l / 2, columns 8 (l % 2) + e
            yield (f"({LANE} >> 1)", f"(({LANE} & 1) * 8 + {e})",
                   f"wmma_staging[{PLANE_SLOT} + {LANE} * 8 + {e}]")
