"""Accelerated (tensor-core) tile: one plane (warp) runs ``mma.sync`` on a 16 x 8 output tile.

Shapes (PTX ISA, "Warp-level matrix multiply-accumulate", ``mma.sync.aligned.row.col``):

* f16 / bf16 inputs: ``m16n8k16`` with an f32 accumulator. The operands stay half precision in
  shared memory (the config's ``smem`` word is the raw storage word) and reach registers through
  ``ldmatrix``;
* f32 inputs only when the selection opts into ``precision="tf32"``: ``m16n8k8`` on tf32, the f32
  values being rounded with ``cvt.rna.tf32.f32`` as the fragment is read. Plain f32 is refused so
  that callers fall back to the register tile instead of losing precision silently;
* int8 inputs: ``m16n8k32`` on s8 with an s32 accumulator (exact: the tile's compute word is
  ``i32``). The operands stay int8 in shared memory and every register packs four consecutive k
  of one row (column) of A (B), lowest k in the lowest byte; no ldmatrix transposes 8-bit elements
  on sm_80 / sm_90, so each byte is read on its own (either orientation) and packed.

Register fragments per lane (groupID g = lane >> 2, thread-in-group t = lane & 3), from the ISA:

* A (16 x k, "row"): f16 -- four b32 registers of two halves: (row g, k 2t..2t+1), (row g+8, same k),
  (row g, k 2t+8..), (row g+8, k 2t+8..); tf32 -- (g, t), (g+8, t), (g, t+4), (g+8, t+4).
* B (k x 8, "col"): f16 -- (k 2t..2t+1, col g), (k 2t+8..2t+9, col g); tf32 -- (t, g), (t+4, g).
* s8: A -- (row g, k 4t..4t+3), (row g+8, same k), (row g, k 4t+16..4t+19), (row g+8, same k);
  B -- (k 4t..4t+3, col g), (k 4t+16..4t+19, col g).
* C (16 x 8, f32 or s32): c0, c1 at (g, 2t), (g, 2t+1); c2, c3 at (g+8, 2t), (g+8, 2t+1).

By default the stage stores both operands k-major (rows of shared memory are k, contiguous along m
or n), while every A/B register pairs two consecutive k for one m (n). ``ldmatrix ... .trans`` gives
exactly that: it hands lane l the elements (2t, g), (2t+1, g) of each stored 8 x 8 block, i.e. row g
and columns 2t, 2t+1 of the transposed block. A k-contiguous operand (``SmemTile.k_contiguous``:
rows are m or n, contiguous along k) is already in register order, so plain ``ldmatrix`` reads it
(lane l gets row g, columns 2t, 2t+1 of each block). Each lane addresses one 16-byte row of one
block, so the stage's leading dimension and tile origins must be multiples of 8 halves.

The instructions are the dialect's PTX intrinsics (``ldmatrix``, ``mma_sync``, ``cvt_tf32``:
codegen/ptx_intrinsics.py), which CUDA sm_80+ has and NVIDIA's OpenCL driver has where the
capability probe found them (`Dialect.supports`); `setup` refuses a dialect without them. Where
``mma.sync`` runs but ``ldmatrix`` does not (an OpenCL driver that would not take it), the f16 / bf16
fragments are read from shared memory two halves at a time instead (``MmaTileConfig.ldmatrix``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..codegen.dialect import Dialect
from ..errors import SetupError
from ..problem import MatmulProblem
from ..compose.selection import Knob
from ..compose.capabilities import PLANE_SCOPE
from .base import SmemTile, TileConfig, TileMatmul

#: The lane id inside the plane, as every fragment expression uses it (declared once: `lanes`).
LANE = "lane"

#: kind -> (instruction k, PTX operand type, neutral word held in shared memory)
_KINDS = {
    "f16": (16, "f16", "f16_bits"),
    "bf16": (16, "bf16", "bf16_bits"),
    "tf32": (8, "tf32", "f32"),
    "s8": (32, "s8", "i8"),
}
#: Kinds whose fragments are read element by element (no ldmatrix, so no paired rhs loads).
_SCALAR_KINDS = ("tf32", "s8")
#: Accumulator of a kind: compute word of the config, PTX type.
_ACCUMULATORS = {"s8": ("i32", "s32")}
_FLOAT_ACCUMULATOR = ("f32", "f32")
_PRECISIONS = ("default", "tf32")


@dataclass(frozen=True)
class MmaTileConfig(TileConfig):
    kind: str = "f16"   # one of _KINDS
    ldmatrix: bool = True   # f16 / bf16 fragments through ldmatrix (else two halves per register)


class MmaTile(TileMatmul):
    name = "mma"
    scope = "plane"
    knobs = (Knob("tile_m", 16, "rows of a plane's tile (the instruction's: 16)"),
             Knob("tile_n", 8, "columns of a plane's tile (the instruction's: 8)"),
             Knob("tile_k", 0, "k of a tile (0: the instruction's)"),
             Knob("precision", "default", "'tf32' lets float32 run on tensor cores rounded to tf32",
                  choices=("default", "tf32")))
    provides = frozenset({PLANE_SCOPE})
    reads_k_contiguous = True
    reads_swizzled = True
    lanes = (("lane", "UNIT_ID & 31"),)

    # -- host ---------------------------------------------------------------------------------
    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> MmaTileConfig:
        dev = dialect.device
        if not dialect.supports("mma_sync"):
            raise SetupError(self.name, no_mma_reason(dialect, "mma_sync", "mma.sync"))
        if dev.plane_size != 32:
            raise SetupError(self.name, f"mma.sync needs 32-wide planes, device has {dev.plane_size}")
        if problem.lhs != problem.rhs:
            raise SetupError(self.name, f"lhs {problem.lhs.name} and rhs {problem.rhs.name} must share a dtype")
        # The problem's precision (the caller's matmul(..., precision=)) or the selection's opt-in.
        precision = problem.precision if problem.precision != "default" else selection.precision
        if precision not in _PRECISIONS:
            raise SetupError(self.name, f"precision={precision!r}; expected one of {_PRECISIONS}")
        kind = self._kind(problem.lhs.storage, precision)
        feature = f"{kind}_mma" if kind != "f16" else "mma_sync"
        if not dialect.supports(feature):
            raise SetupError(self.name, no_mma_reason(dialect, feature, f"{kind} mma.sync"))
        inst_k, _, smem = _KINDS[kind]
        tm, tn = selection.tile_m, selection.tile_n
        tk = selection.tile_k or inst_k
        if (tm, tn, tk) != (16, 8, inst_k):
            raise SetupError(self.name, f"tile {tm}x{tn}x{tk} is not the {kind} instruction shape "
                                        f"16x8x{inst_k} (tile_k=0 picks it)")
        compute = _ACCUMULATORS.get(kind, _FLOAT_ACCUMULATOR)[0]
        # s8: rows padded by 16 bytes (the plane stage's 8 would leave int8 rows off the 16-byte
        # chunks the cp.async loaders copy); a k-contiguous row of stage_k + 16 bytes puts lane
        # (g, t)'s word on bank 12g + t (stage_k 32): all 32 distinct.
        pad = 16 if kind == "s8" else 0
        return MmaTileConfig(tile_m=16, tile_n=8, tile_k=inst_k, compute=compute, smem=smem, kind=kind,
                             smem_pad=pad, ldmatrix=dialect.supports("ldmatrix"))

    def _kind(self, storage: str, precision: str) -> str:
        if storage == "f16_bits":
            return "f16"
        if storage == "bf16_bits":
            return "bf16"
        if storage == "i8":
            return "s8"
        if storage == "f32":
            if precision == "tf32":
                return "tf32"
            raise SetupError(self.name, "float32 inputs would be rounded to tf32 by the tensor cores; "
                                        "opt in with precision='tf32' or use a register tile")
        raise SetupError(self.name, f"no mma.sync for storage type {storage!r} (f16, bf16, tf32, s8 only)")

    # -- registers ------------------------------------------------------------------------------
    def declare_lhs(self, cfg, d, frag):
        return f"unsigned {frag}[4];"

    def declare_rhs(self, cfg, d, frag):
        return f"unsigned {frag}[2];"

    def declare_acc(self, cfg, d, acc):
        return f"{d.c_type(cfg.compute)} {acc}[4];"

    def init_acc(self, cfg, d, acc):
        zero = d.zero(cfg.compute)
        return f"{acc}[0] = {zero}; {acc}[1] = {zero}; {acc}[2] = {zero}; {acc}[3] = {zero};"

    # -- shared memory -> fragments -------------------------------------------------------------
    @staticmethod
    def _at(src: SmemTile, k_off: str, x_off: str) -> str:
        """Element (k_off, x_off) of the tile in shared memory (either orientation, see SmemTile)."""
        return src.at(k_off, x_off)

    @staticmethod
    def _ldmatrix(d: Dialect, count: int, src: SmemTile, frag: str, k_off: str, x_off: str) -> str:
        """``ldmatrix.x{count}`` into ``frag[0..count)``, this lane addressing element (k_off, x_off);
        transposing only when the tile is stored k-major."""
        addr = d.shared_address("&" + src.at(k_off, x_off))
        return d.ldmatrix([f"{frag}[{i}]" for i in range(count)], addr, trans=not src.k_contiguous)

    def load_lhs(self, cfg, d, frag, src):
        if cfg.kind == "tf32":
            g, t = f"({LANE} >> 2)", f"({LANE} & 3)"
            return self._tf32_loads(d, frag, [self._at(src, t, g), self._at(src, t, f"{g} + 8"),
                                              self._at(src, f"{t} + 4", g), self._at(src, f"{t} + 4", f"{g} + 8")])
        if cfg.kind == "s8":   # a_j: rows g (j even) or g + 8 (j odd), k 4t.. (j < 2) or 4t + 16..
            g = f"({LANE} >> 2)"
            return self._s8_loads(frag, src, [(0, g), (0, f"{g} + 8"), (16, g), (16, f"{g} + 8")])
        if not cfg.ldmatrix:   # a_j: rows g (j even) or g + 8, k 2t, 2t + 1 (j < 2) or 2t + 8, 2t + 9
            g = f"({LANE} >> 2)"
            return self._half_loads(frag, src, [(0, g), (0, f"{g} + 8"), (8, g), (8, f"{g} + 8")])
        # Four 8 x 8 blocks, lanes 8j..8j+7 addressing the 8 rows of block j (k rows when k-major,
        # m rows when k-contiguous); block j is register a_j: (m 0-7, k 0-7), (m 8-15, k 0-7),
        # (m 0-7, k 8-15), (m 8-15, k 8-15).
        if src.k_contiguous:
            return self._ldmatrix(d, 4, src, frag, f"(({LANE} >> 4) << 3)",
                                  f"((({LANE} >> 3) & 1) << 3) + ({LANE} & 7)")
        return self._ldmatrix(d, 4, src, frag, f"((({LANE} >> 4) << 3) + ({LANE} & 7))",
                              f"((({LANE} >> 3) & 1) << 3)")

    def load_rhs(self, cfg, d, frag, src):
        if cfg.kind == "tf32":
            g, t = f"({LANE} >> 2)", f"({LANE} & 3)"
            return self._tf32_loads(d, frag, [self._at(src, t, g), self._at(src, f"{t} + 4", g)])
        if cfg.kind == "s8":   # b_j: column g, k 4t.. (j = 0) or 4t + 16.. (j = 1)
            g = f"({LANE} >> 2)"
            return self._s8_loads(frag, src, [(0, g), (16, g)])
        if not cfg.ldmatrix:   # b_j: column g, k 2t, 2t + 1 (j = 0) or 2t + 8, 2t + 9
            g = f"({LANE} >> 2)"
            return self._half_loads(frag, src, [(0, g), (8, g)])
        # Two 8 x 8 blocks (k 0-7 -> b0, k 8-15 -> b1), rows addressed by lanes 0-15 (k rows when
        # k-major, n rows when k-contiguous); lanes 16-31 repeat those addresses (ignored by .x2,
        # but kept valid).
        if src.k_contiguous:
            return self._ldmatrix(d, 2, src, frag, f"((({LANE} >> 3) & 1) << 3)", f"({LANE} & 7)")
        return self._ldmatrix(d, 2, src, frag, f"({LANE} & 15)", "0")

    def load_rhs_pair(self, cfg, d, frag_a, frag_b, src):
        """Fragments of two adjacent n tiles (``src.origin`` and 8 columns on) with one
        ``ldmatrix.x4``, or "" for tf32 and s8 (scalar reads). Blocks: (k 0-7, n 0-7) -> a[0],
        (k 8-15, n 0-7) -> a[1], (k 0-7, n 8-15) -> b[0], (k 8-15, n 8-15) -> b[1]; lanes 8j..8j+7
        address block j's rows (k rows when k-major, n rows when k-contiguous)."""
        if cfg.kind in _SCALAR_KINDS or not cfg.ldmatrix:
            return ""
        if src.k_contiguous:
            at = src.at(f"((({LANE} >> 3) & 1) << 3)", f"(({LANE} >> 4) << 3) + ({LANE} & 7)")
        else:
            at = src.at(f"((({LANE} >> 3) & 1) << 3) + ({LANE} & 7)", f"(({LANE} >> 4) << 3)")
        addr = d.shared_address("&" + at)
        return d.ldmatrix([f"{frag_a}[0]", f"{frag_a}[1]", f"{frag_b}[0]", f"{frag_b}[1]"], addr,
                          trans=not src.k_contiguous)

    @staticmethod
    def _tf32_loads(d: Dialect, frag: str, elements: list[str]) -> str:
        # Round to nearest (ties away from zero) rather than hand raw f32 bits to the tensor core,
        # which would use only the upper 19 bits (truncation: a bias of half an ulp on average).
        return "\n".join(f"{frag}[{i}] = {d.cvt_tf32(e)};" for i, e in enumerate(elements))

    @staticmethod
    def _half_loads(frag: str, src: SmemTile, regs: list[tuple[int, str]]) -> str:
        """``frag[j]`` = the two 16-bit elements at k ``2t + k_off`` and the next of x ``x_off``
        (``regs[j]``), the lower k in the low half (the register order ldmatrix gives)."""
        t = f"({LANE} & 3)"
        out = []
        for j, (k_off, x_off) in enumerate(regs):
            lo, hi = (src.at(f"{t} * 2 + {k_off + h}", x_off) for h in range(2))
            out.append(f"{frag}[{j}] = (unsigned){lo} | ((unsigned){hi} << 16);")
        return "\n".join(out)

    @staticmethod
    def _s8_loads(frag: str, src: SmemTile, regs: list[tuple[int, str]]) -> str:
        """``frag[j]`` = the four int8 at k ``4t + k_off + 0..3`` of x ``x_off`` (``regs[j]``), read
        one byte each (either orientation of ``src``) and packed lowest k in the lowest byte."""
        t = f"({LANE} & 3)"
        out = []
        for j, (k_off, x_off) in enumerate(regs):
            parts = [f"((unsigned)(unsigned char){src.at(f'{t} * 4 + {k_off + b}', x_off)} << {8 * b})"
                     for b in range(4)]
            out.append(f"{frag}[{j}] = {' | '.join(parts)};")
        return "\n".join(out)

    # -- compute ----------------------------------------------------------------------------------
    def execute(self, cfg, d, lhs, rhs, acc):
        inst_k, ptx, _ = _KINDS[cfg.kind]
        acc_word, acc_ptx = _ACCUMULATORS.get(cfg.kind, _FLOAT_ACCUMULATOR)
        return d.mma_sync((16, 8, inst_k), ptx, acc_ptx, acc_word, acc, lhs, rhs, 4, 2)

    def acc_elements(self, cfg, acc):
        row, col = f"({LANE} >> 2)", f"(({LANE} & 3) << 1)"
        yield row, col, f"{acc}[0]"
        yield row, f"{col} + 1", f"{acc}[1]"
        yield f"{row} + 8", col, f"{acc}[2]"
        yield f"{row} + 8", f"{col} + 1", f"{acc}[3]"


def no_mma_reason(dialect: Dialect, feature: str, what: str) -> str:
    """Why ``dialect``'s device has no ``feature`` (the probe's word on OpenCL, the arch on CUDA)."""
    dev = dialect.device
    if dialect.backend == "cuda":
        cc = "" if dev.compute_capability is None else " (sm_%d%d)" % dev.compute_capability
        return f"needs {what} (CUDA sm_80 or newer); device {dev.name!r}{cc} has none"
    why = dev.refusal(feature)
    if why:
        return f"needs {what}; the OpenCL probe refused it on {dev.name!r}: {why}"
    if dev.vendor != "nvidia":
        return (f"needs {what} (CUDA sm_80 or newer, or inline PTX on NVIDIA's OpenCL driver); device "
                f"{dev.name!r} is not an NVIDIA GPU")
    return f"needs {what}; the OpenCL probe did not find it on {dev.name!r}"
