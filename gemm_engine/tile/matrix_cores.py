"""AMD and Intel matrix-core tiles: one plane (a wave, a sub-group) runs the vendor's matrix
instruction on a 16 x 16 (AMD) or 8 x N (Intel) tile, behind the same contract as ``mma.sync``.

Each instruction is described by where each lane's operand and accumulator elements lie in the
tile (from the vendor's ISA; ``lane`` is the unit's index in its plane):

* AMD CDNA, MFMA 16 x 16 (64-wide waves; gfx908+, f64 gfx90a+), kinds f16 / bf16 (k 16: a lane holds
  4 consecutive k), f32 / f64 (k 4: one element). a: row ``lane % 16``, k ``e * (lane / 16) + v``
  (``e`` elements per lane); b: column ``lane % 16``, the same k; c: 4 registers, row
  ``4 (lane / 16) + v``, column ``lane % 16``.
* AMD RDNA3, WMMA 16 x 16 x 16 (32-wide waves, gfx11), f16 / bf16: a: row ``lane % 16``, all 16 k
  (lanes 16-31 repeat lanes 0-15); b: column ``lane % 16``, all 16 k; c: 8 registers, row
  ``2 v + lane / 16``, column ``lane % 16``.
* Intel, DPAS 8 x N x 16 (cl_intel_subgroup_matrix_multiply_accumulate; N = the sub-group: 8 on
  Xe-HPG, 16 on Xe-HPC), f16 / bf16: a: component m is row m, the sub-group's lanes splitting its 16
  k (Xe-HPG: 2 per lane, packed in an int, lower k low; Xe-HPC: 1 per lane); b: column ``lane``,
  component j packing k 2j and 2j + 1; c: component m is row m, column ``lane``.

Every element is read from shared memory on its own (no vendor has ldmatrix's transposing load
that all of these could use) and packed into the builtin's vector type. The builtins are the
dialect's (codegen/amdgcn_dialect.py, intel_dialect.py); setup refuses a device whose probe did
not find them. Compiled offline in the tests (clang for amdgcn; clang's spir64 against the
extension's declarations for Intel): nothing here has run on AMD or Intel hardware.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..codegen.amdgcn_dialect import MFMA, WMMA_GFX11
from ..codegen.dialect import Dialect
from ..codegen.intel_dialect import DPAS
from ..codegen.opencl_dialect import OpenCLDialect
from ..compose.capabilities import PLANE_SCOPE
from ..compose.selection import Knob
from ..errors import SetupError
from ..problem import MatmulProblem
from .base import SmemTile, TileConfig, TileMatmul

#: Operand storage word -> kind.
_KIND = {"f16_bits": "f16", "bf16_bits": "bf16", "f32": "f32", "f64": "f64"}
LANE = "lane"


@dataclass(frozen=True)
class MatrixTileConfig(TileConfig):
    kind: str = "f16"


class MatrixCoreTile(TileMatmul):
    """A plane tile given by lane maps (see the module docstring); subclasses say the instruction."""

    scope = "plane"
    provides = frozenset({PLANE_SCOPE})
    reads_k_contiguous = True
    knobs = (Knob("tile_m", 0, "rows of a plane's tile (0: the instruction's)"),
             Knob("tile_n", 0, "columns of a plane's tile (0: the instruction's)"),
             Knob("tile_k", 0, "k of a tile (0: the instruction's)"))
    #: The probe's feature, the kinds offered, the plane width (0: the device's plane size).
    feature: ClassVar[str] = ""
    kinds: ClassVar[tuple[str, ...]] = ()
    plane: ClassVar[int] = 0
    what: ClassVar[str] = ""

    # -- host -------------------------------------------------------------------------------------
    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> MatrixTileConfig:
        dev = dialect.device
        if not dialect.supports(self.feature):
            why = dev.refusal(self.feature) or (f"device {dev.name!r} is not one ({dev.backend}, vendor "
                                                f"{dev.vendor or 'unknown'}, isa {dev.isa or '-'})")
            raise SetupError(self.name, f"needs {self.what}: {why}")
        if problem.lhs != problem.rhs:
            raise SetupError(self.name, f"lhs {problem.lhs.name} and rhs {problem.rhs.name} must share a dtype")
        kind = _KIND.get(problem.lhs.storage)
        if kind not in self.kinds:
            raise SetupError(self.name, f"{problem.lhs.name}: {self.what} multiplies {', '.join(self.kinds)} here")
        if kind == "f64" and not dialect.supports(self.feature + "_f64"):
            raise SetupError(self.name, f"float64 {self.what} needs gfx90a or newer; the probe did not find it "
                                        f"on {dev.name!r}")
        plane = self.plane or dev.plane_size
        tm, tn, tk = self.shape(kind, plane)
        want = (selection.tile_m or tm, selection.tile_n or tn, selection.tile_k or tk)
        if want != (tm, tn, tk):
            raise SetupError(self.name, f"tile {'x'.join(map(str, want))} is not the instruction's {tm}x{tn}x{tk} "
                                        f"(0 picks it)")
        compute = "f64" if kind == "f64" else "f32"
        return MatrixTileConfig(tile_m=tm, tile_n=tn, tile_k=tk, compute=compute, smem=problem.lhs.storage,
                                kind=kind, plane=plane, smem_pad=0 if kind in ("f16", "bf16") else 4)

    def shape(self, kind: str, plane: int) -> tuple[int, int, int]:
        raise NotImplementedError

    def declare_lanes(self, cfg, d):
        return f"const int {LANE} = UNIT_ID % {cfg.plane};"

    # -- what each lane holds (see the module docstring) ------------------------------------------
    def a_elements(self, cfg) -> list[list[tuple[str, str]]]:
        """Per component of a: its (k, m) elements, lowest first."""
        raise NotImplementedError

    def b_elements(self, cfg) -> list[list[tuple[str, str]]]:
        """Per component of b: its (k, n) elements."""
        raise NotImplementedError

    def c_elements(self, cfg) -> list[tuple[str, str]]:
        """Per accumulator component: its (row, column)."""
        raise NotImplementedError

    def types(self, cfg) -> tuple[str, str, str]:
        """C types of a, b and the accumulator."""
        raise NotImplementedError

    # -- registers and loads ----------------------------------------------------------------------
    def declare_lhs(self, cfg, d, frag):
        return f"{self.types(cfg)[0]} {frag};"

    def declare_rhs(self, cfg, d, frag):
        return f"{self.types(cfg)[1]} {frag};"

    def declare_acc(self, cfg, d, acc):
        return f"{self.types(cfg)[2]} {acc};"

    def init_acc(self, cfg, d, acc):
        return f"{acc} = ({self.types(cfg)[2]})({d.zero(cfg.compute)});"

    def _load(self, cfg, frag: str, ctype: str, comps: list[list[tuple[str, str]]], src: SmemTile) -> str:
        """``frag`` = the components' elements read from ``src``, packed into ``ctype``."""
        bits = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}[cfg.kind]
        raw = {16: "ushort", 32: "float", 64: "double"}[bits]
        per = len(comps[0])
        base = ctype.rstrip("0123456789")
        count = int(ctype[len(base):] or 1)
        if per == 1:
            values = [f"({raw}){src.at(k, x)}" if bits == 16 else src.at(k, x) for (k, x), in comps]
            if count == 1:
                return f"{frag} = {values[0]};"
            if bits == 16:
                return f"{frag} = as_{ctype}((ushort{count})({', '.join(values)}));"
            return f"{frag} = ({ctype})({', '.join(values)});"
        words = [" | ".join(f"((uint){src.at(k, x)} << {16 * h})" for h, (k, x) in enumerate(comp)) for comp in comps]
        return f"{frag} = as_{ctype}((uint{count})({', '.join(words)}));"

    def load_lhs(self, cfg, d, frag, src):
        return self._load(cfg, frag, self.types(cfg)[0], self.a_elements(cfg), src)

    def load_rhs(self, cfg, d, frag, src):
        return self._load(cfg, frag, self.types(cfg)[1], self.b_elements(cfg), src)

    def acc_elements(self, cfg, acc):
        for v, (row, col) in enumerate(self.c_elements(cfg)):
            yield row, col, OpenCLDialect.component(acc, v) if len(self.c_elements(cfg)) > 1 else acc


class MfmaTile(MatrixCoreTile):
    name = "mfma"
    feature, kinds, plane, what = "mfma", ("f16", "bf16", "f32", "f64"), 64, "AMD MFMA (CDNA: gfx908 and newer)"

    def shape(self, kind, plane):
        return 16, 16, MFMA[kind][1]

    def _per_lane(self, cfg) -> int:
        return cfg.tile_k // 4          # k elements a lane holds: 4 (f16, bf16) or 1 (f32, f64)

    def a_elements(self, cfg):
        e = self._per_lane(cfg)
        return [[(f"{e} * ({LANE} >> 4) + {v}", f"({LANE} & 15)")] for v in range(e)]

    b_elements = a_elements         # b's column and k are a's row and k

    def c_elements(self, cfg):
        return [(f"4 * ({LANE} >> 4) + {v}", f"({LANE} & 15)") for v in range(4)]

    def types(self, cfg):
        _, _, operand, acc = MFMA[cfg.kind]
        return operand, operand, acc

    def execute(self, cfg, d, lhs, rhs, acc):
        return d.mfma(cfg.kind, acc, lhs, rhs)


class Gfx11WmmaTile(MatrixCoreTile):
    name = "wmma_gfx11"
    feature, kinds, plane, what = "wmma_gfx11", ("f16", "bf16"), 32, "AMD WMMA (RDNA3: gfx11)"

    def shape(self, kind, plane):
        return 16, 16, 16

    def a_elements(self, cfg):
        return [[(str(k), f"({LANE} & 15)")] for k in range(16)]

    b_elements = a_elements

    def c_elements(self, cfg):
        return [(f"2 * {v} + ({LANE} >> 4)", f"({LANE} & 15)") for v in range(8)]

    def types(self, cfg):
        operand = WMMA_GFX11[cfg.kind][1]
        return operand, operand, "float8"

    def execute(self, cfg, d, lhs, rhs, acc):
        return d.wmma_gfx11(cfg.kind, acc, lhs, rhs)


class DpasTile(MatrixCoreTile):
    name = "dpas"
    feature, kinds, what = "intel_dpas", ("f16", "bf16"), "Intel DPAS (cl_intel_subgroup_matrix_multiply_accumulate)"

    def shape(self, kind, plane):
        if plane not in (8, 16):
            raise SetupError(self.name, f"DPAS runs in sub-groups of 8 or 16; the device's planes are {plane} wide")
        return 8, plane, DPAS[kind][1]

    def declare_lanes(self, cfg, d):
        return f"const int {LANE} = {d.plane_lane()};"

    def a_elements(self, cfg):
        per = 16 // cfg.plane                                   # k of a row each lane holds: 2 or 1
        return [[(f"{per} * {LANE} + {h}", str(m)) for h in range(per)] for m in range(8)]

    def b_elements(self, cfg):
        return [[(str(2 * j + h), LANE) for h in range(2)] for j in range(8)]

    def c_elements(self, cfg):
        return [(str(m), LANE) for m in range(8)]

    def types(self, cfg):
        return ("int8" if cfg.plane == 8 else "short8"), "int8", "float8"

    def execute(self, cfg, d, lhs, rhs, acc):
        return d.dpas(cfg.kind, acc, lhs, rhs)
