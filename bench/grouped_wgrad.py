"""The weight gradients of mixture-of-experts layers: ``grouped_matmul``'s "k" layout (``x^T @ dy``
per expert, the reduction over each expert's tokens) against torch._grouped_mm's, in one run (CUDA).

    python3 bench/grouped_wgrad.py [--repeat 10] [--json FILE]
                                   (refreshes bench/results/<device>/grouped_wgrad.md)

Each row: ``x`` (tokens, K) and ``dy`` (tokens, N) sorted by expert (bf16, Dirichlet(1) routing or,
"skewed", one expert holding half the tokens; seeded), ``offsets`` on the device; the result
(experts, K, N) bf16, as an MoE layer's backward computes it (``x.T``: a transposed view, as torch
hands it). Timed in turns:

* ``engine``: the default call (`grouped_matmul(x.T, dy, offsets=...)`), the choice shown;
* ``portable``: the same call on ``grouped_pipelined_wgmma`` (the cp.async wgmma ring, which took the
  "k" layout before the TMA pipeline did: its maps could not end at a group's last token);
* ``_grouped_mm``: ``torch._grouped_mm(x.T, dy, offs=offsets)``.

The engine's result is checked against torch's first (float32 sums both). Times: CUDA events, the
calls sampled in turns (gemm_engine.runtime.timing.device_times), median.
"""
from __future__ import annotations

import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import gemm_engine  # noqa: E402
from gemm_engine.runtime.timing import device_times  # noqa: E402
from common import rows_table, tiling, torch_rows_main  # noqa: E402

#: (name, experts, routed tokens, K, N, routing): Mixtral 8x7B's training step at 4096 tokens, top 2
#: (up: the gate and up columns together; down), 64 small experts, and the skewed up projection.
ROWS = [("mixtral_up", 8, 8192, 4096, 28672, "dirichlet"), ("mixtral_down", 8, 8192, 14336, 4096, "dirichlet"),
        ("small_64", 64, 16384, 2048, 2816, "dirichlet"), ("mixtral_up skewed", 8, 8192, 4096, 28672, "skewed")]


def counts_of(rng, e: int, t: int, routing: str) -> np.ndarray:
    if routing == "skewed":           # half the tokens on expert 0, the rest spread evenly
        rest = rng.multinomial(t - t // 2, np.ones(e - 1) / (e - 1))
        return np.concatenate([[t // 2], rest])
    return rng.multinomial(t, rng.dirichlet(np.ones(e)))


def run_row(torch, eng, rng, name, e, t, k, n, routing, repeat):
    g = torch.Generator(device="cuda").manual_seed(2)
    counts = counts_of(rng, e, t, routing)
    offs = torch.tensor(np.cumsum(counts), dtype=torch.int32, device="cuda")
    x = torch.randn((t, k), device="cuda", dtype=torch.bfloat16, generator=g)
    dy = torch.randn((t, n), device="cuda", dtype=torch.bfloat16, generator=g)

    def engine():
        return eng.grouped_matmul(x.T, dy, offsets=offs)

    def portable():
        return eng.grouped_matmul(x.T, dy, offsets=offs, algorithm="grouped_pipelined_wgmma")

    def grouped_mm():
        return torch._grouped_mm(x.T, dy, offs=offs)

    got = engine()
    choice = eng.last_choice
    want = grouped_mm().float()
    err = max(float((r.float() - want).norm() / want.norm()) for r in (got, portable()))
    times = device_times(eng.runtime, {"engine": engine, "portable": portable, "grouped_mm": grouped_mm},
                         repeat=repeat)
    flops = 2 * t * k * n
    rec = {"row": name, "experts": e, "tokens": t, "k": k, "n": n, "choice": f"{choice[0].name} {tiling(choice[1])}",
           "rel_error": err, **{f"{key}_ms": v * 1e3 for key, v in times.items()},
           **{f"{key}_TF": flops / v / 1e12 for key, v in times.items()},
           "vs_grouped_mm": times["grouped_mm"] / times["engine"], "vs_portable": times["portable"] / times["engine"]}
    print(rec, flush=True)
    return rec


def markdown(rows) -> str:
    return rows_table("TF: 2 * tokens * K * N / time. vs: that call's time / the engine's default call's (> 1: "
                      "the default faster). rel err: the larger of the default's and the portable level's "
                      "relative difference (Frobenius) from torch._grouped_mm.",
                      ["row", "experts x tokens, K x N", "choice", "engine ms (TF)", "portable ms (TF)",
                       "_grouped_mm ms (TF)", "vs _grouped_mm", "vs portable", "rel err"], rows,
                      lambda r: [f"{r['experts']} x {r['tokens']}, {r['k']} x {r['n']}", r["choice"],
                                 f"{r['engine_ms']:.3f} ({r['engine_TF']:.0f})",
                                 f"{r['portable_ms']:.3f} ({r['portable_TF']:.0f})",
                                 f"{r['grouped_mm_ms']:.3f} ({r['grouped_mm_TF']:.0f})",
                                 f"{r['vs_grouped_mm']:.2f}", f"{r['vs_portable']:.2f}", f"{r['rel_error']:.1e}"])


def main(argv=None):
    rng = np.random.default_rng(0)
    return torch_rows_main(__doc__, "grouped_wgrad.py", "grouped_wgrad", "MoE weight gradients (the 'k' layout) "
                           "against torch._grouped_mm (bench/grouped_wgrad.py)", ROWS,
                           lambda torch, eng, *row: run_row(torch, eng, rng, *row), markdown,
                           lambda r: r["rel_error"] > 2e-2,
                           lambda: gemm_engine.Engine("cuda", background_compile=False), argv)


if __name__ == "__main__":
    sys.exit(main())
