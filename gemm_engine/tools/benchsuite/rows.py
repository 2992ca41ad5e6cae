"""The benchmark problems: one `Row` per (problem, dtype), grouped into named suites.

* ``full``: the issue's list, each problem in float32, tf32 (float32 data, ``precision="tf32"``),
  float16 and bfloat16: square 512..8192, unaligned 1000^3 and 4093^3, skinny (vector-matrix,
  16-row and short-K products), the two LLM projections, two batched shapes, and fused
  ``relu(a @ b + bias)`` (bias over N).
* ``quick``: a handful of those in float32 / float16 / bfloat16, minutes on a GPU.
* ``smoke``: tiny problems of every kind (odd sizes, M = 1, batched, fused) in all four dtypes,
  seconds even on PoCL: the tests run it.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..cli_types import DTYPE_ALIASES

#: Row dtype labels, in suite order ("tf32" is float32 data run with precision="tf32").
DTYPES = ("float32", "tf32", "float16", "bfloat16")
#: Problem groups, in suite order.
GROUPS = ("square", "unaligned", "skinny", "llm", "batched", "fused")


@dataclass(frozen=True)
class Row:
    """One benchmark problem: ``(batch x) m x k @ k x n`` in one dtype, optionally fused."""

    name: str              # the problem, unique within a suite for one dtype: "1000^3", "64x512^3"
    group: str             # one of GROUPS
    batch: int
    m: int
    n: int
    k: int
    dtype: str             # the numpy dtype name of the operands: float32, float16, bfloat16
    precision: str = "default"
    fused: bool = False    # relu(a @ b + bias), bias a vector over N

    @property
    def label(self) -> str:
        """The dtype as the suite names it: "tf32" for float32 with precision="tf32"."""
        return "tf32" if self.precision == "tf32" else self.dtype

    @property
    def key(self) -> str:
        """Unique within a suite: problem and dtype label."""
        return f"{self.name} {self.label}"

    @property
    def flops(self) -> float:
        # The epilogue's adds are not counted: TFLOP/s stays comparable with the plain product.
        return 2.0 * self.batch * self.m * self.n * self.k


def _name(batch, m, n, k, fused) -> str:
    dims = f"{m}^3" if m == n == k else f"{m}x{n}x{k}"
    return ("fused " if fused else "") + (f"{batch}x" if batch > 1 else "") + dims


def _rows(problems, dtypes) -> list[Row]:
    """Dtype-major: the rows of one dtype together (the table and the plot read per dtype)."""
    out = []
    for label in dtypes:
        dtype, precision = ("float32", "tf32") if label == "tf32" else (label, "default")
        for group, batch, m, n, k in problems:
            fused = group == "fused"
            out.append(Row(_name(batch, m, n, k, fused), group, batch, m, n, k, dtype, precision, fused))
    return out


_FULL = (
    [("square", 1, s, s, s) for s in (512, 1024, 2048, 4096, 8192)]
    + [("unaligned", 1, s, s, s) for s in (1000, 4093)]
    + [("skinny", 1, 1, 8192, 8192), ("skinny", 1, 16, 8192, 8192), ("skinny", 1, 8192, 8192, 64)]
    + [("llm", 1, 8192, 12288, 4096), ("llm", 1, 8192, 4096, 11008)]
    + [("batched", 64, 512, 512, 512), ("batched", 256, 128, 128, 128)]
    + [("fused", 1, 8192, 8192, 64), ("fused", 1, 4096, 4096, 4096)]
)
_QUICK = [("square", 1, 1024, 1024, 1024), ("square", 1, 4096, 4096, 4096), ("unaligned", 1, 1000, 1000, 1000),
          ("skinny", 1, 1, 8192, 8192), ("batched", 256, 128, 128, 128), ("fused", 1, 8192, 8192, 64)]
_SMOKE = [("square", 1, 64, 64, 64), ("unaligned", 1, 33, 17, 65), ("skinny", 1, 1, 64, 64),
          ("batched", 4, 16, 16, 16), ("fused", 1, 64, 64, 64)]

SUITES: dict[str, list[Row]] = {
    "smoke": _rows(_SMOKE, DTYPES),
    "quick": _rows(_QUICK, ("float32", "float16", "bfloat16")),
    "full": _rows(_FULL, DTYPES),
}


def _names(values, known, what, aliases=None) -> set[str] | None:
    """The set of wanted values (a comma string or a list), each checked against ``known`` so
    that a typo is an error rather than an empty run."""
    if values is None:
        return None
    if isinstance(values, str):
        values = [v for v in values.split(",") if v.strip()]
    wanted = {(aliases or {}).get(v.strip().lower(), v.strip()) for v in values}
    unknown = sorted(wanted - set(known))
    if unknown:
        raise ValueError(f"{what}: unknown {', '.join(map(repr, unknown))}; expected some of {', '.join(known)}")
    return wanted


def rows_for(suite: str, dtypes=None, groups=None, names=None) -> list[Row]:
    """The rows of ``suite`` whose dtype label, group and problem name are among those given
    (each a list or a comma string; None keeps all). Unknown values raise ValueError."""
    if suite not in SUITES:
        raise ValueError(f"suite: expected one of {', '.join(SUITES)}, got {suite!r}")
    rows = SUITES[suite]
    dtypes = _names(dtypes, DTYPES, "dtypes", DTYPE_ALIASES)
    groups = _names(groups, GROUPS, "groups")
    names = _names(names, list(dict.fromkeys(r.name for r in rows)), f"names in suite {suite!r}")
    return [r for r in rows if (dtypes is None or r.label in dtypes)
            and (groups is None or r.group in groups) and (names is None or r.name in names)]
