"""Loaders: how a cube moves one operand's slice of global memory into its shared-memory stage.

A task loader renders a list of *tasks*, each a self-contained block of code that moves a few
elements. The simple global matmul emits all tasks before its barrier; the double-buffering one
hands them to a stage event listener that spreads them between tile executions; the specialized
one runs them on load-only units. All are the same code.

Operands are described in their own orientation: lhs is ``rows = m, cols = k``, rhs is
``rows = k, cols = n``. Task loaders store both k-major, so the lhs store is transposed. The global
level hands each call the operand's `OperandRef` (pointer and leading dimension in the cube's
scope): a loader reads the kernel through it and nothing else.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from ...codegen.dialect import Dialect
from ...dtypes import WORD_BYTES, ElementType
from ...errors import SetupError
from ...problem import Layout
from ...compose.selection import Knob
from ...compose.capabilities import K_MAJOR_SMEM, TASK_LOADER
from ...quant.format import WeightFormat



@dataclass(frozen=True)
class OperandTile:
    """One operand's stage tile: extent, layout in global memory and place in shared memory."""

    ident: str            # "lhs" or "rhs": names the loader's own variables
    element: ElementType
    layout: Layout
    rows: int
    cols: int
    check_rows: bool      # the problem does not divide rows: guard the row index
    check_cols: bool
    smem_ld: int
    k_along_rows: bool    # rhs: True (smem[row * ld + col]); lhs: False (smem[col * ld + row])
    smem_word: str = ""   # element word held in shared memory (default: the compute type)
    # The problem's vector alignment of the operand (elements: the widest vector dividing its base
    # and leading dimension) and its extent along the contiguous axis: a vector loader reads at most
    # that wide, and only widths dividing the extent (a vector is wholly inside or outside).
    align: int = 1
    extent: int = 1
    #: Its contiguous axis is a grouped problem's ragged one, read on the device
    #: (`MatmulProblem.ragged_contiguous`): a group starts and ends anywhere along it, so loaders
    #: that form element addresses read one element at a time (`vector_align`); TMA is unaffected.
    ragged: bool = False
    #: The rhs of a quantized problem: packed words of this format (``element`` is then
    #: `dtypes.PACKED_WORDS`); only loaders providing QUANTIZED_WEIGHTS read such a tile.
    weights: WeightFormat | None = None
    #: The problem's extent across the tile's lines where its lines are the M (lhs) or N (rhs) axis
    #: of a dense product (0: K, or grouped): a loader may leave the lines at or past it unread
    #: (their products are output rows or columns no writer stores).
    line_extent: int = 0

    @property
    def vector_align(self) -> int:
        """The widest aligned vector an element-addressing loader may read (``align``, 1 when ragged)."""
        return 1 if self.ragged else self.align

    @property
    def smem_type_word(self) -> str:
        return self.smem_word or self.element.compute

    @property
    def converts(self) -> bool:
        """Whether the loader converts to the compute type (else it copies the stored bits)."""
        return self.smem_type_word != self.element.storage

    def global_index(self, r: str, c: str, ld: str) -> str:
        return f"({r}) * {ld} + ({c})" if self.layout is Layout.ROW else f"({c}) * {ld} + ({r})"

    def smem_index(self, r: str, c: str) -> str:
        return f"({r}) * {self.smem_ld} + ({c})" if self.k_along_rows else f"({c}) * {self.smem_ld} + ({r})"

    @property
    def k_extent(self) -> int:
        return self.rows if self.k_along_rows else self.cols

    def read(self, d: Dialect, src, gr: str, gc: str, rows_bound: str, cols_bound: str) -> str:
        """Expression: global element (``gr``, ``gc``) of the operand at ``src`` (an `OperandRef`)
        as the shared-memory type, zero where a checked axis is out of range."""
        ctype = d.c_type(self.smem_type_word)
        conds = []
        if self.check_rows:
            conds.append(f"{gr} < {rows_bound}")
        if self.check_cols:
            conds.append(f"{gc} < {cols_bound}")
        index = self.global_index(gr, gc, src.ld)
        load = d.load_global(self.element, src.ptr, index) if self.converts else f"{src.ptr}[{index}]"
        if conds:
            zero = d.zero(self.element) if self.converts else "0"
            load = f"({' && '.join(conds)}) ? ({ctype})({load}) : ({ctype}){zero}"
        return load


@dataclass(frozen=True)
class LoaderConfig:
    operand: OperandTile
    units: int            # how many units share the loading
    tasks: int            # tasks per unit

    @property
    def read_width(self) -> int | None:
        """Elements one global read takes from an element address (a vector's alignment), None
        where reads are addressed by coordinates (TMA). Element by element here."""
        return 1

    @property
    def smem_bytes(self) -> int:
        size = WORD_BYTES[self.operand.smem_type_word]
        return self.operand.k_extent * self.operand.smem_ld * size


class Loader(ABC):
    """A loader family (see global_/base.py for the contract: interface and destination)."""

    name = "loader"
    knobs: ClassVar[tuple[Knob, ...]] = ()
    provides: ClassVar[frozenset] = frozenset({TASK_LOADER, K_MAJOR_SMEM})
    requires: ClassVar[tuple] = ()

    def k_contiguous(self, operand_layout: Layout, is_lhs: bool) -> bool:
        """Whether this loader stores the operand with k contiguous in shared memory (rows along k):
        task loaders store k-major, so never."""
        return False

    @abstractmethod
    def setup(self, operand: OperandTile, units: int, selection=None) -> LoaderConfig: ...

    def tasks(self, cfg: LoaderConfig, d: Dialect, src, smem: str, row0: str, col0: str,
              rows_bound: str, cols_bound: str, unit: str = "UNIT_ID") -> list[str]:
        """Code blocks that, all run by every loading unit, fill ``smem`` with the operand's stage
        tile whose first global element is (``row0``, ``col0``) of the operand at ``src`` (an
        `OperandRef`); out-of-range elements become zero. ``unit`` is the loading unit's index
        expression, in ``[0, cfg.units)`` (every unit of the cube by default; a global matmul whose
        loading units are a subset passes their own index)."""
        raise NotImplementedError(f"{self.name} is not a task loader")


class CyclicLoader(Loader):
    """Every unit in turn takes the next element, walking the contiguous axis fastest, so a plane's
    reads of global memory are consecutive addresses (coalesced) whatever the layout."""

    name = "cyclic"

    def setup(self, operand: OperandTile, units: int, selection=None) -> LoaderConfig:
        if units < 1:
            raise SetupError(self.name, "needs at least one unit")
        total = operand.rows * operand.cols
        return LoaderConfig(operand=operand, units=units, tasks=-(-total // units))

    def element(self, cfg: LoaderConfig, t: int, unit: str) -> tuple[str, str | None]:
        """(index expression of the element task ``t`` moves, guard expression or None): the one
        thing loaders of this shape differ in. Cyclic: unit u takes elements u, u + units, ..."""
        total = cfg.operand.rows * cfg.operand.cols
        guard = f"{unit} + {t * cfg.units} < {total}" if (t + 1) * cfg.units > total else None
        return f"{unit} + {t * cfg.units}", guard

    def tasks(self, cfg, d, src, smem, row0, col0, rows_bound, cols_bound, unit="UNIT_ID"):
        op = cfg.operand
        out = []
        for t in range(cfg.tasks):
            index, guard = self.element(cfg, t, unit)
            lines = [f"const int idx = {index};"]
            if op.layout is Layout.ROW:
                lines += [f"const int r = idx / {op.cols};", f"const int c = idx % {op.cols};"]
            else:
                lines += [f"const int r = idx % {op.rows};", f"const int c = idx / {op.rows};"]
            lines += [f"const i64 gr = {row0} + r;", f"const i64 gc = {col0} + c;",
                      f"{smem}[{op.smem_index('r', 'c')}] = {op.read(d, src, 'gr', 'gc', rows_bound, cols_bound)};"]
            body = "\n    ".join(lines)
            out.append(f"if ({guard}) {{\n    {body}\n}}" if guard else f"{{\n    {body}\n}}")
        return out


class TilewiseLoader(CyclicLoader):
    """Each group of ``width`` consecutive units (a plane on GPUs) loads its own contiguous chunk of
    the stage tile, its lanes cycling inside the chunk. A plane touches one region of the tile, so
    (with a partition-aligned chunking) it need not wait for other planes' loads; reads stay
    coalesced within the chunk because lanes walk the contiguous axis."""

    name = "tilewise"

    def __init__(self, width: int = 32):
        self.width = width

    def setup(self, operand: OperandTile, units: int, selection=None) -> LoaderConfig:
        if units < 1:
            raise SetupError(self.name, "needs at least one unit")
        width = min(self.width, units)
        if units % width:
            raise SetupError(self.name, f"{units} units are not whole groups of {width}")
        chunk = -(-(operand.rows * operand.cols) // (units // width))
        return LoaderConfig(operand=operand, units=units, tasks=-(-chunk // width))

    def element(self, cfg, t, unit):
        width = min(self.width, cfg.units)
        total = cfg.operand.rows * cfg.operand.cols
        chunk = -(-total // (cfg.units // width))
        index = f"({unit}) / {width} * {chunk} + ({unit}) % {width} + {t * width}"
        conds = []
        if (t + 1) * width > chunk:
            conds.append(f"({unit}) % {width} + {t * width} < {chunk}")
        if chunk * (cfg.units // width) > total:
            conds.append(f"{index} < {total}")
        return index, " && ".join(conds) or None
