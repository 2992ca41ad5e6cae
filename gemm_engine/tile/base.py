"""Tile level: the smallest multiply-accumulate, held in registers.

Contract
--------
A tile matmul computes ``acc += lhs_tile @ rhs_tile`` for one small ``(tile_m x tile_n x tile_k)``
block, executed either by one unit (a thread / work-item: register FMA) or by one plane (a warp /
sub-group: tensor-core instructions). It owns three kinds of register storage, all named by the
caller so that a stage can hold several of each (one accumulator per tile of its partition, a second
rhs fragment for double buffering):

* on entry to ``load_lhs`` / ``load_rhs`` the operands are in shared memory, described by a
  ``SmemTile`` (which array, its leading dimension, its orientation and where the tile starts); the
  tile level reads them into its fragments and nothing else. Every tile reads k-major tiles (the
  default orientation); a tile may also accept k-contiguous ones (``SmemTile.k_contiguous``), which
  a stage only hands it when the global level stores the operand that way;
* ``execute`` touches registers only: it adds ``lhs_frag @ rhs_frag`` into ``acc``;
* ``acc_elements`` says, for the writer, which output element (row, col within the tile, possibly
  depending on the lane) each accumulator register holds. The tile level never writes global memory.

Each method returns C source in the neutral vocabulary of `gemm_engine.codegen.dialect`; the
host-side ``setup`` returns a frozen config or raises `SetupError` with the reason.

What a tile offers its stage is declared (`gemm_engine.compose.contracts`): its scope, one of the
capabilities `UNIT_SCOPE`, `PLANE_SCOPE`, `WARPGROUP_SCOPE` (compose/capabilities.py; a warpgroup
tile also has the methods its capability's interface lists), which the stages require. The
selection fields it reads are its ``knobs``.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Iterator

from ..codegen.dialect import Dialect
from ..compose.capabilities import PLANE_SCOPE, UNIT_SCOPE, WARPGROUP_SCOPE  # noqa: F401 (re-exported)
from ..problem import MatmulProblem
from ..compose.selection import Knob
from .swizzle import ChunkSwizzle


@dataclass(frozen=True)
class SmemTile:
    """Where a tile's operand lies in shared memory.

    Element ``(k, x)`` of the tile (``x`` along m for lhs, along n for rhs) is
    ``array[(k) * ld + (origin) + x]`` when the stage stores the operand k-major (the default), or
    ``array[((origin) + x) * ld + (k)]`` when ``k_contiguous`` (rows of shared memory are m or n,
    contiguous along k: the layout of a row-major lhs or a column-major rhs in global memory, so
    16-byte chunks copy straight through). With ``swizzle`` (tile/swizzle.py; only for a tile that
    `reads_swizzled`) the 16-byte chunks of each row are XOR-permuted and ``ld`` is the unpadded row.
    """

    array: str
    ld: int
    k: str        # expression: the k row inside the stage
    origin: str   # expression: the first m (lhs) or n (rhs) index of the tile inside the stage
    k_contiguous: bool = False
    swizzle: ChunkSwizzle | None = None

    def at(self, k_off: str, x_off: str) -> str:
        """Expression: element (``k + k_off``, ``origin + x_off``) of the tile."""
        k, x = f"({self.k}) + {k_off}", f"({self.origin}) + {x_off}"
        if self.swizzle is not None:
            line, elem = (x, k) if self.k_contiguous else (k, x)
            return f"{self.array}[{self.swizzle.element(line, elem)}]"
        if self.k_contiguous:
            return f"{self.array}[({x}) * {self.ld} + {k}]"
        return f"{self.array}[({k}) * {self.ld} + {x}]"


@dataclass(frozen=True)
class TileConfig:
    """Base of tile configs. Subclasses add their own fields; all are frozen and hashable."""

    tile_m: int
    tile_n: int
    tile_k: int
    compute: str  # neutral compute type word: f32 / f64
    # Neutral word of the element type the stage must hold in shared memory for this tile: the
    # compute type for register tiles (converted once by the loader), the raw storage type
    # (f16_bits...) for tensor-core tiles that read half precision straight from shared memory.
    smem: str = ""
    # The rhs's word where it differs from the lhs's (fp8 e4m3 x e5m2 on wgmma); "": ``smem``.
    rhs_smem: str = ""
    # Elements a plane stage pads each shared-memory row with for this tile (0: the stage's own
    # default, which suits 16-bit elements; the f64 DMMA tile needs another).
    smem_pad: int = 0
    # The read pattern swizzled rows must serve (tile/swizzle.py `READS`; "": ldmatrix's). A class
    # constant, not a field: it follows from the tile, and fields show in every kernel's comment.
    swizzle_reads: ClassVar[str] = ""
    # Units of the plane that runs a plane-scoped tile: a warp's 32; AMD's CDNA waves are 64 wide,
    # Intel's sub-groups 8 or 16 (unit tiles: unused).
    plane: int = 32

    @property
    def acc_regs(self) -> int:
        """32-bit registers per lane of one accumulator of a plane tile (4: a 16 x 8 f32 / s32 tile,
        an 8 x 8 f64 one); tiles of other sizes say theirs."""
        return 4

    @property
    def smem_word(self) -> str:
        return self.smem or self.compute

    @property
    def rhs_smem_word(self) -> str:
        return self.rhs_smem or self.smem_word


class TileMatmul(ABC):
    """A tile matmul family: host setup plus the code pieces a stage assembles."""

    name: str = "tile"
    #: "unit" tiles are executed by one thread each, "plane" tiles by a whole warp / sub-group.
    scope: str = "unit"
    #: The selection fields this tile reads.
    knobs: ClassVar[tuple[Knob, ...]] = ()
    provides: ClassVar[frozenset] = frozenset({UNIT_SCOPE})
    requires: ClassVar[tuple] = ()
    #: Whether ``load_lhs`` / ``load_rhs`` also read k-contiguous tiles (`SmemTile.k_contiguous`).
    reads_k_contiguous: ClassVar[bool] = False
    #: Whether every shared-memory read goes through `SmemTile.at` (so a stage may hand it
    #: XOR-swizzled rows, `SmemTile.swizzle`).
    reads_swizzled: ClassVar[bool] = False
    #: The unit-index expressions the tile's code reads, each named once: ``(name, expression)``,
    #: in order (a later one may use an earlier name). The stage declares them (`declare_lanes`).
    lanes: ClassVar[tuple[tuple[str, str], ...]] = ()

    def declare_lanes(self, cfg: TileConfig, d: Dialect) -> str:
        """Declarations of the tile's lane names, once per kernel body (the stage's ``declare``)."""
        return "\n".join(f"const int {name} = {expr};" for name, expr in self.lanes)

    @abstractmethod
    def setup(self, problem: MatmulProblem, selection, dialect: Dialect) -> TileConfig: ...

    @abstractmethod
    def declare_lhs(self, cfg: TileConfig, d: Dialect, frag: str) -> str: ...

    @abstractmethod
    def declare_rhs(self, cfg: TileConfig, d: Dialect, frag: str) -> str: ...

    @abstractmethod
    def declare_acc(self, cfg: TileConfig, d: Dialect, acc: str) -> str: ...

    @abstractmethod
    def init_acc(self, cfg: TileConfig, d: Dialect, acc: str) -> str: ...

    @abstractmethod
    def load_lhs(self, cfg: TileConfig, d: Dialect, frag: str, src: SmemTile) -> str: ...

    @abstractmethod
    def load_rhs(self, cfg: TileConfig, d: Dialect, frag: str, src: SmemTile) -> str: ...

    @abstractmethod
    def execute(self, cfg: TileConfig, d: Dialect, lhs: str, rhs: str, acc: str) -> str: ...

    def load_rhs_pair(self, cfg: TileConfig, d: Dialect, frag0: str, frag1: str, src: SmemTile) -> str:
        """The rhs fragments of two neighbouring n tiles (``src`` and the tile_n columns after it) in
        one go (``ldmatrix.x4``), or "" where the tile has no such load (then `load_rhs` twice)."""
        return ""

    def requires_k_major(self, problem: MatmulProblem) -> bool:
        """Whether the tile reads its operands only K-major (a row-major lhs, a column-major rhs),
        so that the batch level must transpose any other layout first (tf32 wgmma)."""
        return False

    #: Headers the tile's code needs (e.g. ``<mma.h>`` for WMMA); the algorithm puts them first.
    headers: tuple[str, ...] = ()

    def write_prologue(self, cfg: TileConfig, d: Dialect, planes: int) -> str:
        """Code run once before any accumulator is written (e.g. declaring a staging buffer)."""
        return ""

    def stage_accumulator(self, cfg: TileConfig, d: Dialect, acc: str) -> str:
        """Code run before ``acc``'s elements are written: a tile whose register layout is opaque
        (WMMA) stores the accumulator somewhere ``acc_elements`` can then address."""
        return ""

    @abstractmethod
    def acc_elements(self, cfg: TileConfig, acc: str) -> Iterator[tuple[str, str, str]]:
        """Yield ``(row_expr, col_expr, value_expr)`` for every accumulator element this unit holds."""
