"""The rows of the public shape sweep (bench/shape_sweep.py), and the subsets one GPU call runs.

Plain data, no GPU: every row is a `Row` (a problem and the operand layouts a model hands it), built
by one function per group:

* ``llm``: the projections of several model widths, weights ``N x K`` as nn.Linear stores them
  (out_features x in_features): 4096 x 4096, 6144 x 4096, 14336 x 4096, 4096 x 14336, 8192 x 8192,
  28672 x 8192, 8192 x 28672, at every token count of `TOKENS`, in three forms: ``linear`` (x @ W.T:
  a row-major, b the column-major view of W), ``rowmajor`` (x @ W with W stored K x N) and
  ``wgrad`` (the weight gradient dy.T @ x: N x K x tokens, a the column-major view of dy);
* ``square``: M = N = K from 256 to 8192, powers of two and not (`SQUARES`), a and b row-major;
* ``k``: K from 16 to 262144 at a few M x N (`K_SWEEP`);
* ``random``: seeded random sizes (`RANDOM_SEED`), aligned (every extent a multiple of 8) and odd,
  in random layouts, a few batched. A tuned table's training set must use another seed
  (`training_rows`): these rows are the held-out test of a selector.

Element kinds: ``bfloat16`` and ``float16`` everywhere; ``fp8_rowwise`` (e4m3 operands, a float32
scale per row of a and per column of b, bfloat16 out, against torch._scaled_mm) on the linear
projections and the squares; ``tf32`` and ``float32`` on the squares and the random rows.

`SUBSETS` names the sets one GPU call (under ten minutes) runs; `select` filters rows by group,
kind, form and token count, and deals them into parts (``--part i/n``).
"""
from __future__ import annotations

import random
from dataclasses import dataclass

#: Token counts (M of the forward products) of the LLM rows.
TOKENS = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024, 2048, 4096, 8192)
#: Weights N x K (out_features x in_features), by model: Llama-3 8B (attention, QKV of GQA, MLP up /
#: down), Llama-3 70B (attention, MLP up / down).
WEIGHTS = ((4096, 4096), (6144, 4096), (14336, 4096), (4096, 14336), (8192, 8192), (28672, 8192), (8192, 28672))
FORMS = ("linear", "rowmajor", "wgrad")
SQUARES = (256, 512, 768, 1000, 1024, 1536, 2048, 2560, 3000, 3072, 4096, 5120, 6144, 7168, 8192)
#: (M, N, the K values) of the K sweep.
K_SWEEP = (
    (4096, 4096, (16, 32, 64, 128, 256, 512, 1024, 2048, 8192, 32768)),
    (8192, 8192, (16, 64, 256)),
    (1024, 1024, (16, 64, 256, 4096, 16384, 65536, 131072, 262144)),
    (128, 128, (4096, 65536, 262144)),
)
RANDOM_SEED, RANDOM_ALIGNED, RANDOM_ODD = 28, 24, 24
#: Largest operation count and operand size of a random row (each stays under about 4 ms).
RANDOM_MAX_FLOP, RANDOM_MAX_ELEMENTS = 1 << 41, 1 << 26
KINDS = ("bfloat16", "float16", "fp8_rowwise", "tf32", "float32")
#: Bytes per element of the operands of each kind (the output is 2 bytes but for float32 / tf32).
ITEMSIZE = {"bfloat16": 2, "float16": 2, "fp8_rowwise": 1, "tf32": 4, "float32": 4}
#: Dense peak, TFLOP/s, per kind on the H100 SXM: the ridge where a row becomes compute-bound.
PEAK_TFLOPS = {"bfloat16": 989, "float16": 989, "fp8_rowwise": 1979, "tf32": 495, "float32": 67}
#: Reachable HBM bandwidth of the H100 (a device copy measured 2.98 TB/s), TB/s.
COPY_TBS = 3.0


@dataclass(frozen=True)
class Row:
    """One problem of the sweep: ``batch`` products of (m x k) @ (k x n) in ``kind``, a and b in
    ``a_layout`` / ``b_layout`` ("row", or "col": the transposed view of a row-major array)."""

    group: str
    form: str
    kind: str
    m: int
    n: int
    k: int
    a_layout: str = "row"
    b_layout: str = "row"
    batch: int = 1
    #: LLM rows: the weight's N x K and the token count.
    weight: tuple[int, int] | None = None
    tokens: int = 0

    @property
    def label(self) -> str:
        head = f"{self.kind} {f'{self.batch}x' if self.batch > 1 else ''}{self.m}x{self.n}x{self.k}"
        form = f" {self.form}" if self.group == "llm" else ""
        return f"{head} {self.a_layout}/{self.b_layout}{form}"

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.n * self.k

    @property
    def bytes(self) -> int:
        """Bytes a kernel must move at least: both operands read once, the output written once."""
        size = ITEMSIZE[self.kind]
        out = 4 if self.kind in ("tf32", "float32") else 2
        return self.batch * ((self.m * self.k + self.k * self.n) * size + self.m * self.n * out)

    @property
    def memory_bound(self) -> bool:
        """Whether streaming the bytes at the copy ceiling takes longer than the flops at peak."""
        return self.bytes / (COPY_TBS * 1e12) > self.flops / (PEAK_TFLOPS[self.kind] * 1e12)

    @property
    def weight_bytes(self) -> int:
        """LLM forward rows: the weight's bytes (what a decode step streams); else 0."""
        if self.weight is None or self.form == "wgrad":
            return 0
        return self.weight[0] * self.weight[1] * ITEMSIZE[self.kind]


def llm_rows(kinds=("bfloat16", "float16", "fp8_rowwise")) -> list[Row]:
    rows = []
    for kind in kinds:
        for n, k in WEIGHTS:
            for t in TOKENS:
                for form in FORMS:
                    if kind == "fp8_rowwise" and form != "linear":
                        continue   # fp8 weights are stored as nn.Linear stores them (cuBLASLt's TN)
                    if form == "wgrad":
                        rows.append(Row("llm", form, kind, n, k, t, "col", "row", weight=(n, k), tokens=t))
                    else:
                        rows.append(Row("llm", form, kind, t, n, k, "row", "col" if form == "linear" else "row",
                                        weight=(n, k), tokens=t))
    return rows


def square_rows(kinds=KINDS) -> list[Row]:
    # fp8: b column-major (cuBLASLt's only layout for it); the others as the Hopper rows, both row-major.
    return [Row("square", "square", kind, s, s, s, "row", "col" if kind == "fp8_rowwise" else "row")
            for kind in kinds for s in SQUARES]


def k_rows(kinds=("bfloat16", "float16")) -> list[Row]:
    return [Row("k", "k", kind, m, n, k) for kind in kinds for m, n, ks in K_SWEEP for k in ks]


def _log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    return int(round(lo * (hi / lo) ** rng.random()))


def random_shapes(seed: int = RANDOM_SEED, aligned: int = RANDOM_ALIGNED, odd: int = RANDOM_ODD) -> list[tuple]:
    """(batch, m, n, k, a layout, b layout, "aligned" | "odd") drawn from ``seed``: extents
    log-uniform in 256..8192, one of them in 1..256 in a row of three (a skinny or short-K row);
    aligned rows round every extent up to a multiple of 8, odd rows have at least one odd extent;
    at most `RANDOM_MAX_FLOP` operations and `RANDOM_MAX_ELEMENTS` elements an operand; one row in
    six is batched (2 to 8 entries)."""
    rng = random.Random(seed)
    out = []
    for i in range(aligned + odd):
        kind = "aligned" if i < aligned else "odd"
        while True:
            batch = rng.choice((2, 3, 4, 8)) if rng.random() < 1 / 6 else 1
            dims = [_log_uniform(rng, 256, 8192) for _ in range(3)]
            if rng.random() < 1 / 3:
                dims[rng.randrange(3)] = _log_uniform(rng, 1, 256)
            if kind == "aligned":
                dims = [max(8, -(-d // 8) * 8) for d in dims]
            elif not any(d % 2 for d in dims):
                dims[rng.randrange(3)] += 1
            m, n, k = dims
            if (2 * batch * m * n * k <= RANDOM_MAX_FLOP
                    and batch * max(m * k, k * n, m * n) <= RANDOM_MAX_ELEMENTS):
                break
        out.append((batch, m, n, k, rng.choice(("row", "col")), rng.choice(("row", "col")), kind))
    return out


def random_rows(kinds=KINDS[:2] + KINDS[3:], seed: int = RANDOM_SEED) -> list[Row]:
    return [Row("random", form, kind, m, n, k, la, lb, batch)
            for kind in kinds for batch, m, n, k, la, lb, form in random_shapes(seed)]


def training_rows(seed: int = RANDOM_SEED + 1000, count: int = 96) -> list[Row]:
    """Random rows for tuning a per-device table: another seed than the sweep's, so that none of
    the sweep's random rows is in the training set (`tests/test_shape_sweep.py` checks)."""
    half = count // 2
    return [Row("train", form, "bfloat16", m, n, k, la, lb, batch)
            for batch, m, n, k, la, lb, form in random_shapes(seed, half, count - half)]


def shrunk(row: Row, most: int = 40) -> Row:
    """``row`` with every extent cut to at most about ``most`` (odd extents stay odd): the same
    layouts and kinds on a size a CPU runs in a moment (the sweep's ``--smoke``)."""
    def cut(e):
        return e if e <= most else most - (most % 2 != e % 2)
    return Row(row.group, row.form, row.kind, cut(row.m), cut(row.n), cut(row.k), row.a_layout, row.b_layout,
               min(row.batch, 2), row.weight, row.tokens)


def all_rows() -> list[Row]:
    return llm_rows() + square_rows() + k_rows() + random_rows()


#: The issue's named rows (a quick look at the targets): decode batches, the 4096 squares,
#: 3000^3, the short K, f16 1000^3, tf32 / f32 4096^3.
def target_rows() -> list[Row]:
    rows = [Row("llm", "linear", "bfloat16", t, n, k, "row", "col", weight=(n, k), tokens=t)
            for n, k in ((4096, 4096), (14336, 4096), (4096, 14336)) for t in (1, 2, 8, 16, 32, 64, 96, 128)]
    rows += [Row("square", "square", kind, s, s, s) for kind in ("bfloat16", "float16")
             for s in (1536, 3000, 3072, 4096, 6144, 8192)]
    rows += [Row("square", "square", "float16", 1000, 1000, 1000), Row("square", "square", "tf32", 4096, 4096, 4096),
             Row("square", "square", "float32", 4096, 4096, 4096)]
    rows += [Row("k", "k", "bfloat16", 4096, 4096, 64), Row("k", "k", "bfloat16", 8192, 8192, 256),
             Row("k", "k", "bfloat16", 1024, 1024, 65536), Row("random", "odd", "bfloat16", 5101, 6008, 64)]
    return rows


#: Named subsets: (description, groups, kinds, forms, largest token count); None: every value.
SUBSETS = {
    "targets": ("the issue's named rows (about 45)", None, None, None, None),
    "decode": ("linear projections, bf16, M <= 256 (84 rows)", ("llm",), ("bfloat16",), ("linear",), 256),
    "llm-bf16": ("every LLM row in bf16 (378)", ("llm",), ("bfloat16",), None, None),
    "llm-f16": ("every LLM row in f16 (378)", ("llm",), ("float16",), None, None),
    "llm-fp8": ("linear projections, fp8 rowwise (126)", ("llm",), ("fp8_rowwise",), None, None),
    "shapes": ("squares, the K sweep and the random rows, every kind (279)", ("square", "k", "random"), None, None, None),
    "all": ("everything (1440)", None, None, None, None),
}


def select(subset: str = "all", groups=None, kinds=None, forms=None, max_tokens=None, part: str = "") -> list[Row]:
    """The rows of ``subset`` (`SUBSETS`), narrowed by the other filters (None: no filter), then
    part ``i/n`` of them (every n-th from the i-th, 1-based: the parts have alike mixes)."""
    if subset not in SUBSETS:
        raise ValueError(f"subset: expected one of {sorted(SUBSETS)}, got {subset!r}")
    _, s_groups, s_kinds, s_forms, s_tokens = SUBSETS[subset]
    rows = target_rows() if subset == "targets" else all_rows()

    def keep(value, *allowed):
        return all(a is None or value in a for a in allowed)
    rows = [r for r in rows if keep(r.group, s_groups, groups) and keep(r.kind, s_kinds, kinds)
            and keep(r.form, s_forms, forms)
            and all(t is None or r.group != "llm" or r.tokens <= t for t in (s_tokens, max_tokens))]
    if part:
        i, n = (int(x) for x in part.split("/"))
        if not 1 <= i <= n:
            raise ValueError(f"part: expected i/n with 1 <= i <= n, got {part!r}")
        rows = rows[i - 1::n]
    return rows
