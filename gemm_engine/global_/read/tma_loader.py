"""TMA loader: one operand's ring slot filled by the bulk tensor copy engine, completing on an mbarrier.

CUDA sm_90 only. One unit issues ``cp.async.bulk.tensor`` copies of *boxes* of the operand, each a
``lines x 64`` (16-bit elements; 32 for 4-byte ones, 128 for int8) block that the engine writes into
shared memory in the 128-byte-swizzled layout wgmma reads (`SwizzledOperandLayout`, the same layout
the swizzled chunk loader builds by hand: TMA's 128-byte swizzle is that XOR of 16-byte chunks by row
within 1024-byte atoms); a layout of the 64-byte swizzle takes boxes half as wide. The operand is
described as *lines* (global rows of a row-major operand, columns of a column-major one) of
contiguous elements:

* K-major (row-major lhs, column-major rhs): a box is the whole tile extent of lines (m or n, at most
  256) by one 128-byte run of k; a slot of stage_k = 64 16-bit elements is one copy;
* MN-major (column-major lhs, row-major rhs): a box is stage_k lines of k by 64 contiguous m or n;
  the tile's extent takes ``extent / 64`` copies, each one 64-wide atom ``atom_stride`` bytes on
  (a layout of the 64-byte swizzle, as a 96-column tile's: 32-wide boxes and atoms, the map's
  swizzle 64 bytes).

Edges need no code: coordinates past the operand's extents (M, N or K not a multiple of the tile)
read zeros, so the main loop has no bounds branches. One exception: where the problem's M (a
K-major lhs) or N (a K-major rhs) is under the tile's lines (`OperandTile.line_extent`), the copies
read only whole 8-line atoms up to it (`read_lines`) and the slot's other lines keep what they held:
their products reach only output rows or columns past M or N, which no writer stores. That holds
while a box's line coordinate starts at 0 in each batch entry (a dense product); grouped problems,
whose lines are every group's, and multicast slots read all their lines. Every copy of a slot
completes on the slot's *full* mbarrier, whose expected bytes the global level raises by
`slot_bytes` first.

Shared slots (``shared_by`` cubes of a cluster read the same tile of this operand): each cube issues
its share of the slot's boxes, multicast into the same slot of every cube of the cluster and
completing on each one's *full* barrier, so every cube still receives the whole slot. The share is
a run of whole copies where the copies divide evenly (MN-major tiles, several atoms), else a run of
lines of each copy (a K-major tile of one copy, or a 96-wide MN-major one of three: boxes of ``lines
/ shared_by`` lines, whole 8-line swizzle atoms, so the shared layout is the same).

The tensor map (runtime/tensor_map.py) is a kernel parameter the batch level declares and encodes
per call (it holds the address); its third dimension is the batch (extent 1 for a broadcast
operand, whose batch coordinate is then 0). TMA's rules become setup refusals here: the operand's
address, leading dimension and batch stride must be 16-byte multiples (`OperandTile.align`), else
the pipelines with the chunk loader, which read any alignment, are the ones to use.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...codegen.dialect import Dialect
from ...runtime.tensor_map import TensorMapSpec
from ...errors import SetupError
from ...problem import Layout
from ...tile.wgmma import STORAGE_BYTES
from ...compose.contracts import Requirement
from ...compose.capabilities import SWIZZLED_SMEM, TENSOR_MAPS, TMA_LOADER
from .loaders import Loader, LoaderConfig, OperandTile
from .swizzled_loader import SwizzledOperandTile

#: TMA box extents are at most 256 elements along every dimension.
MAX_BOX = 256
#: The L2 promotion of an operand's map (the span L2 fetches per request): 256 bytes where its lines
#: start on 128-byte boundaries, 128 where they do not, the faster of each on the H100
#: (bench/results/h100/kernel_durations.md, notes).
ALIGNED_PROMOTION, UNALIGNED_PROMOTION = 256, 128


def l2_promotion(line_bytes: int) -> int:
    """The L2 promotion of a map whose lines are ``line_bytes`` apart."""
    return ALIGNED_PROMOTION if line_bytes % 128 == 0 else UNALIGNED_PROMOTION


@dataclass(frozen=True)
class TmaLoaderConfig(LoaderConfig):
    size: int = 2                   # bytes per element
    shared_by: int = 1              # cubes of a cluster issuing a share of each slot, multicast
    #: Lines each copy reads (0: all the tile's): a problem with fewer (`OperandTile.line_extent`)
    #: leaves the rest of the slot as it was, where zero-filled lines past the map cost as much as
    #: read ones (bf16 32 x 4096 x 4096 in 64-row tiles: 2.5 us of 13.5; SELECTION_NOTES "Short problems").
    read_lines: int = 0

    @property
    def read_width(self) -> None:
        return None                 # boxes addressed by coordinates: any origin along an axis

    @property
    def row_elems(self) -> int:
        """Elements in one box row (one swizzled row of the layout: 128 bytes, or 64)."""
        return self.operand.swizzle.row_elems

    @property
    def copies(self) -> int:
        """Atoms (copies of whole lines, `row_elems` wide) of one slot."""
        return self.operand.contiguous_extent // self.row_elems

    @property
    def line_split(self) -> int:
        """Parts each copy's lines are cut into: the sharing cubes' count where the copies do not
        divide among them, else 1."""
        return 1 if self.copies % self.shared_by == 0 else self.shared_by

    @property
    def lines_read(self) -> int:
        """Lines of the tile each slot receives."""
        return self.read_lines or self.operand.lines

    @property
    def box(self) -> tuple[int, int]:
        """(contiguous elements, lines) of one copy."""
        return self.row_elems, self.lines_read // self.line_split

    @property
    def issued(self) -> int:
        """Boxes each cube issues per slot."""
        return self.copies * self.line_split // self.shared_by

    @property
    def smem_bytes(self) -> int:
        return self.operand.swizzle.smem_bytes

    @property
    def slot_bytes(self) -> int:
        """Bytes one slot receives, whoever issued them (what each cube's full barrier expects)."""
        return self.copies * self.row_elems * self.lines_read * self.size


class TmaLoader(Loader):
    name = "tma_loader"
    provides = frozenset({TMA_LOADER, SWIZZLED_SMEM})
    requires = (Requirement.of("batch", TENSOR_MAPS, why="TMA copies read the operand through a tensor map"),)

    def k_contiguous(self, operand_layout: Layout, is_lhs: bool) -> bool:
        return (operand_layout is Layout.ROW) == is_lhs

    def setup(self, operand: OperandTile, units: int, selection=None, shared_by: int = 1) -> TmaLoaderConfig:
        if not isinstance(operand, SwizzledOperandTile) or operand.swizzle is None:
            raise SetupError(self.name, "needs a SwizzledOperandTile (the swizzled layout wgmma reads)")
        size = STORAGE_BYTES.get(operand.element.storage)
        if operand.converts or size is None:
            raise SetupError(self.name, f"copies int8, fp8, 16-bit or 32-bit float elements; "
                                        f"got {operand.element.name}")
        if operand.align * size < 16:
            raise SetupError(self.name, f"{operand.ident}: TMA needs the address, leading dimension and batch "
                                        f"stride to be multiples of 16 bytes ({16 // size} {operand.element.name} "
                                        f"elements); this operand is aligned to {operand.align}")
        row = operand.swizzle.row_elems
        if operand.contiguous_extent % row or operand.lines > MAX_BOX:
            raise SetupError(self.name, f"{operand.ident}: a {operand.lines} x {operand.contiguous_extent} tile "
                                        f"is not whole boxes of at most {MAX_BOX} lines x {row}")
        # Lines past the problem's: whole 8-line swizzle atoms of them unread (one copy's lines per slot).
        extent = -(-operand.line_extent // 8) * 8
        read = extent if 0 < extent < operand.lines and shared_by == 1 else 0
        cfg = TmaLoaderConfig(operand=operand, units=1, tasks=operand.contiguous_extent // row, size=size,
                              shared_by=shared_by, read_lines=read)
        if shared_by > 1 and cfg.line_split > 1 and operand.lines % (8 * shared_by):
            raise SetupError(self.name, f"{operand.ident}: {shared_by} cubes cannot share a {operand.lines}-line tile "
                                        f"of {cfg.copies} copies (the lines do not split into whole 8-line swizzle atoms)")
        return cfg

    # -- device side --------------------------------------------------------------------------------
    def issue(self, cfg: TmaLoaderConfig, d: Dialect, tensor_map: str, batch: str, slot: str, bar: str,
              row0: str, col0: str, rank: str = "0") -> str:
        """Statements (one unit): copy the tile whose first element is (``row0``, ``col0``) of batch
        entry ``batch`` into the slot at shared address ``slot``, completing on ``bar``; a shared
        slot (``shared_by`` > 1): the share of cluster rank ``rank``, multicast to every sharing cube."""
        op = cfg.operand
        contiguous0, line0 = (col0, row0) if op.layout is Layout.ROW else (row0, col0)
        if cfg.shared_by == 1:
            out = []
            for j in range(cfg.copies):
                dst = f"{slot} + {j * op.swizzle.atom_stride}u" if j else slot
                c = f"{contiguous0} + {j * cfg.row_elems}" if j else contiguous0
                out.append(d.tma_load(dst, tensor_map, bar, [c, line0, batch]))
            return "\n".join(out)
        mask = f"{(1 << cfg.shared_by) - 1}u"
        if cfg.line_split == 1:         # this cube's run of whole copies
            atoms = [f"(({rank}) * {cfg.issued} + {j})" for j in range(cfg.issued)]
            line_offset = smem_offset = ""
        else:                           # this cube's run of lines of every copy
            atoms = [str(j) for j in range(cfg.copies)]
            lines = cfg.box[1]
            line_offset, smem_offset = f" + ({rank}) * {lines}", f" + ({rank}) * {lines * op.swizzle.swizzle}u"
        out = []
        for atom in atoms:
            dst = f"{slot} + {atom} * {op.swizzle.atom_stride}u{smem_offset}"
            c = f"{contiguous0} + {atom} * {cfg.row_elems}"
            out.append(d.tma_load(dst, tensor_map, bar, [c, f"{line0}{line_offset}", batch], multicast=mask))
        return "\n".join(out)

    # -- host side ----------------------------------------------------------------------------------
    @staticmethod
    def tensor_map_spec(cfg: TmaLoaderConfig, rows: int, cols: int, ld: int, batch_stride: int,
                        batch: int) -> TensorMapSpec:
        """The map of an operand of ``rows x cols`` (its own orientation) with leading dimension
        ``ld`` and ``batch_stride`` (elements; 0: broadcast) over ``batch`` entries."""
        op, size = cfg.operand, cfg.size
        contiguous, lines = (cols, rows) if op.layout is Layout.ROW else (rows, cols)
        entries = batch if batch_stride else 1
        step = batch_stride * size if batch_stride else ld * size * lines
        return TensorMapSpec(op.element.storage, (contiguous, lines, max(1, entries)),
                             (ld * size, step), (*cfg.box, 1), op.swizzle.swizzle, l2_promotion(ld * size))

