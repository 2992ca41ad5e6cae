"""The problem a kernel is configured for, as the components see it.

`MatmulProblem` is what setup reads: sizes, element types, the memory layout of each operand and
whether its base and leading dimension allow vector access. The numpy-facing front end
(call/prepare.py) builds it from arrays; tests and the CLI may build it directly.

A *grouped* problem (`Groups`, the ``groups`` field: mixture-of-experts layers, LoRA adapters) is
``batch`` independent products whose extents along one axis are read from device memory per call:
only a batch level that walks groups (batch/grouped.py) runs it, every other one refuses it.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from .dtypes import FP8_NAMES, ElementType
from .epilogue.spec import IDENTITY, Epilogue
from .quant.format import WeightFormat


class Layout(str, Enum):
    """How an operand's (rows, cols) are laid out: row-major means cols are contiguous."""

    ROW = "row"
    COL = "col"


#: How a grouped problem's groups lie (`Groups.layout`):
#: * "contiguous": lhs rows sorted by group, one (M, K) lhs; the kernel's ``groups`` array holds each
#:   group's end row (int32, ``offsets[-1] == M``); rhs and output per group / per row;
#: * "masked": lhs (batch, M, K) with each group's first ``counts[g]`` rows in use (int32 counts);
#: * "k": the reduction axis grouped: lhs (M, K) and rhs (K, N) sliced along K by end offsets, one
#:   (M, N) output per group (a weight gradient);
#: * "list": every group its own M, N, K and operands, from a table in device memory (int64).
GROUP_LAYOUTS = ("contiguous", "masked", "k", "list")


@dataclass(frozen=True)
class Groups:
    """A grouped problem's layout (see `GROUP_LAYOUTS`). The sizes of the `MatmulProblem` that holds
    it are bounds the kernels are configured for: ``batch`` the groups, ``m`` the lhs rows (the sum
    of the groups' rows: contiguous; the rows of each group's slab: masked; the largest: list), ``k``
    the reduction (the sum: "k"; the largest: list), ``n`` the columns (the largest: list)."""

    layout: str

    def __post_init__(self):
        if self.layout not in GROUP_LAYOUTS:
            raise ValueError(f"Groups.layout: expected one of {GROUP_LAYOUTS}, got {self.layout!r}")

    @property
    def ragged(self) -> frozenset:
        """The axes ("m", "n", "k") whose extent changes per group (bounds-checked in every kernel)."""
        return frozenset({"contiguous": "m", "masked": "m", "k": "k", "list": "mnk"}[self.layout])


@dataclass(frozen=True)
class MatmulProblem:
    batch: int
    m: int
    n: int
    k: int
    lhs: ElementType
    rhs: ElementType
    out: ElementType
    lhs_layout: Layout = Layout.ROW
    rhs_layout: Layout = Layout.ROW
    # Largest power of two (in elements, up to 16 bytes' worth: 16 for int8) dividing each operand's
    # base offset and leading dimension: the widest vector a loader may use. 1: scalar access only.
    # A "list" problem's covers every group's offset, leading dimension and extent along the
    # operand's contiguous axis; the device-read layouts' per-group origins: `vector_align`.
    lhs_align: int = 1
    rhs_align: int = 1
    # "tf32" lets float32 operands run on tensor cores rounded to tf32 (10 mantissa bits); the
    # default keeps float32 exact (register FMA). "fast_accum" lets fp8 products accumulate in the
    # tensor cores' own sums (fewer bits than float32: global_/promotion.py).
    precision: str = "default"
    # What each output element goes through before it is stored (identity: plain matmul).
    epilogue: Epilogue = IDENTITY
    # A grouped problem's layout (None: one dense, possibly batched, product).
    groups: Groups | None = None
    # The rhs is a quantized weight in this format (gemm_engine/quant): the kernel reads packed codes
    # with their scales (and zeros) and multiplies their values, delivered as ``rhs`` (the
    # activations' type); None: a dense rhs.
    weights: WeightFormat | None = None

    PRECISIONS = ("default", "tf32", "fast_accum")

    def __post_init__(self):
        if self.out.name in FP8_NAMES:
            raise ValueError(f"MatmulProblem.out: {self.out.name} results are not supported (fp8 is an "
                             f"operand type: its products are float32, bfloat16 or float16)")
        if self.precision not in self.PRECISIONS:
            raise ValueError(f"precision: expected one of {self.PRECISIONS}, got {self.precision!r}")
        for name in ("batch", "m", "n", "k"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"MatmulProblem.{name} must be a non-negative int, got {value!r}")

    def ragged(self, axis: str) -> bool:
        """Whether ``axis`` ("m", "n", "k") has a per-group extent read on the device: a kernel must
        bounds-check it whatever its tile."""
        return self.groups is not None and axis in self.groups.ragged

    @property
    def rows_per_group(self) -> int:
        """The rows one output block holds, as a tile sees them: M, or (contiguous groups, whose
        M counts every group's rows) M spread evenly over the groups."""
        if self.groups is not None and self.groups.layout == "contiguous":
            return max(1, -(-self.m // max(1, self.batch)))
        return self.m

    def ragged_contiguous(self, side: str) -> bool:
        """Whether operand ``side``'s ("lhs", "rhs") contiguous axis is the ragged axis of a layout
        whose extents only device memory holds: a group's slice of it starts anywhere (an expert's
        first token, a weight gradient's first token along K) and ends anywhere, so no vector wider
        than one element is aligned or wholly inside a group. Contiguous and masked: M of a
        column-major lhs; "k": K of a row-major lhs or a column-major rhs; "list": never (its
        groups are the host's, folded into the operands' alignment)."""
        if self.groups is None or self.groups.layout == "list":
            return False
        layout = Layout(self.lhs_layout if side == "lhs" else self.rhs_layout)
        contiguous = {"lhs": {Layout.ROW: "k", Layout.COL: "m"}, "rhs": {Layout.ROW: "n", Layout.COL: "k"}}[side][layout]
        return self.ragged(contiguous)

    def vector_align(self, side: str) -> int:
        """The widest vector (elements) a loader that forms element addresses may read operand
        ``side`` with: its alignment, 1 where its contiguous axis is ragged (`ragged_contiguous`).
        TMA, which addresses a box by coordinates, needs only the memory's (``lhs_align``)."""
        if self.ragged_contiguous(side):
            return 1
        return self.lhs_align if side == "lhs" else self.rhs_align

    def checks(self, stage_m: int, stage_n: int, stage_k: int) -> tuple[bool, bool, bool]:
        """(check_m, check_n, check_k): the axes a stage tile of these extents does not divide, or
        whose extent is ragged (bounds-checked in the kernel)."""
        return (self.m % stage_m != 0 or self.ragged("m"), self.n % stage_n != 0 or self.ragged("n"),
                self.k % stage_k != 0 or self.ragged("k"))

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.n * self.k
