"""One call of each recent kernel configuration, each checked against float64: what a
compute-sanitizer run goes over (CUDA, sm_90).

    compute-sanitizer --tool memcheck --report-api-errors no python3 bench/sanitizer_cases.py
    compute-sanitizer --tool racecheck --report-api-errors no python3 bench/sanitizer_cases.py --small
    compute-sanitizer --tool synccheck --report-api-errors no python3 bench/sanitizer_cases.py --small

(``--report-api-errors no``: cuda-bindings probes driver symbols at start-up, which the tools report
as API errors.) The cases are the engine's default choices (background builds off, so the chosen
kernel runs, not a stand-in) and two named tiles: the 32-column decode tiles, one-row products on
them (both weight layouts), a bias and the reducing stores on them, a tile named by its shape, the
192 x 96 and 192 x 192 tiles, a grouped call and the quantized decode and register-A kernels.
``--small`` shortens the longest products (racecheck and synccheck run slowly) and so reaches
some other choices (the quantized decode kernel split along K). Exits 1 where a result is wrong.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])

import gemm_engine  # noqa: E402
from gemm_engine.algorithms import REGISTRY  # noqa: E402

#: Relative error allowed against float64 (bf16 operands, float32 accumulation, bf16 results).
TOLERANCE = 1e-2


def _rel(got, want) -> float:
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))


class Cases:
    def __init__(self, engine, cp, bf16):
        self.engine, self.cp, self.bf16 = engine, cp, bf16
        self.rng = np.random.default_rng(0)
        self.rows = []

    def record(self, what: str, got, want) -> None:
        err = _rel(self.cp.asnumpy(got).astype(np.float64), want)
        self.rows.append((what, self.engine.last_choice[0].name, err, err < TOLERANCE))

    def dense(self, m, n, k, b_layout="col", algorithm=None, bias=False, accumulate=False):
        cp, rng, bf = self.cp, self.rng, self.bf16
        a, b = rng.standard_normal((m, k)).astype(bf), rng.standard_normal((k, n)).astype(bf)
        db = cp.asarray(b) if b_layout == "row" else cp.asarray(np.ascontiguousarray(b.T)).T
        want = a.astype(np.float64) @ b.astype(np.float64)
        extra = {}
        if bias:
            v = rng.standard_normal(n).astype(bf)
            extra["bias"], want = cp.asarray(v), want + v.astype(np.float64)
        if accumulate:          # out += a @ b: c is out, beta 1 (the reducing stores)
            c = rng.standard_normal((m, n)).astype(bf)
            out, want = cp.asarray(c), want + c.astype(np.float64)
            self.engine.matmul(cp.asarray(a), db, out=out, c=out, beta=1.0, algorithm=algorithm)
        else:                   # NaN-poisoned: unwritten elements fail
            out = cp.full((m, n), np.nan, dtype=bf)
            self.engine.matmul(cp.asarray(a), db, out=out, algorithm=algorithm, **extra)
        named = "" if algorithm is None else f" {algorithm.overrides}"
        self.record(f"{m} x {n} x {k}, b {b_layout}{named}{' bias' if bias else ''}{' +=' if accumulate else ''}",
                    out, want)

    def grouped(self, experts, tokens, k, n):
        cp, rng, bf = self.cp, self.rng, self.bf16
        counts = rng.multinomial(tokens, np.ones(experts) / experts)
        ends = np.cumsum(counts)
        x, w = rng.standard_normal((tokens, k)).astype(bf), rng.standard_normal((experts, k, n)).astype(bf)
        y = self.engine.grouped_matmul(cp.asarray(x), cp.asarray(w), offsets=cp.asarray(ends.astype(np.int32)))
        want = np.concatenate([x[e - c:e].astype(np.float64) @ w[g].astype(np.float64)
                               for g, (c, e) in enumerate(zip(counts, ends))])
        self.record(f"grouped {experts} experts, {tokens} tokens, {k} -> {n}", y, want)

    def quantized(self, m, k, n):
        cp, rng = self.cp, self.rng
        q = gemm_engine.quantize(rng.standard_normal((k, n)), format="int4", group_size=128)
        x = rng.standard_normal((m, k)).astype(self.bf16)
        y = self.engine.quantized_matmul(cp.asarray(x), q)
        self.record(f"int4 group 128, {m} x {n} x {k}", y,
                    x.astype(np.float64) @ q.dequantize(rounded_to="bfloat16").astype(np.float64))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", action="store_true", help="shorter products (racecheck, synccheck)")
    args = parser.parse_args(argv)
    import cupy as cp
    import ml_dtypes
    engine = gemm_engine.Engine("cuda", background_compile=False)
    s = Cases(engine, cp, ml_dtypes.bfloat16)
    specialized = REGISTRY["specialized_wgmma"]
    s.dense(8, 4096, 4096)                                  # 32-column decode tiles
    s.dense(4, 11008, 2048 if args.small else 4096)
    s.dense(1, 8192 if args.small else 14336, 4096)         # one row on the decode tiles, K-major weight
    s.dense(1, 4096, 4096, "row")                           # ... and a row-major one
    s.dense(64, 4096, 4096, bias=True)
    s.dense(16, 4096, 4096, accumulate=True)
    s.dense(16, 4096, 4096, algorithm=specialized(tile_n=64))   # a named tile, its staging fitted
    s.dense(1536, 1536, 1536, "row")                        # 192 x 96
    if not args.small:
        s.dense(3000, 3000, 3000, "row")                    # 192 x 192 in clusters
    s.dense(700, 1001, 777, "row", algorithm=specialized(tile_n=192))
    s.grouped(8, 600, 512, 768)
    for m in (8, 48):
        s.quantized(m, 4096, 2048 if args.small else 4096)
    for what, choice, err, ok in s.rows:
        print(f"{'ok  ' if ok else 'FAIL'} {what}: {choice}, rel. error {err:.1e}")
    return 0 if all(row[3] for row in s.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
