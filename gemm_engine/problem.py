"""The problem a kernel is configured for, as the components see it.

`MatmulProblem` is what setup reads: sizes, element types, the memory layout of each operand and
whether its base and leading dimension allow vector access. The numpy-facing front end
(`frontend.py`) builds it from arrays; tests and the CLI may build it directly.
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
    lhs_align: int = 1
    rhs_align: int = 1
    # "tf32" lets float32 operands run on tensor cores rounded to tf32 (10 mantissa bits); the
    # default keeps float32 exact (register FMA). "fast_accum" lets fp8 products accumulate in the
    # tensor cores' own sums (fewer bits than float32: global_/promotion.py).
    precision: str = "default"
    # What each output element goes through before it is stored (identity: plain matmul).
    epilogue: Epilogue = IDENTITY
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

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.n * self.k
