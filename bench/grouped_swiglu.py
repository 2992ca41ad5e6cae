"""A mixture-of-experts up projection with its gate (SwiGLU) and routing weights fused into the
grouped GEMM's epilogue (issue 30), against the same layer unfused, in one run (CUDA, torch).

    python3 bench/grouped_swiglu.py [--repeat 10] [--json FILE]
                                    (refreshes bench/results/<device>/grouped_swiglu.md)

Each row is ``silu(x W_gate^T) * (x W_up^T) * routing weight`` per expert (bf16, Dirichlet(1)
routing, seeded as bench/grouped.py's), ``N`` the gate's and up's columns together (the output
has N / 2). Timed, the faster of each pair first:

* ``fused``: one `grouped_matmul(x, w, offsets=..., row_scale=rs, activation="swiglu")`, gate and
  up columns interleaved in each expert's weights (what `SwiGLU` modules store);
* ``engine + torch``: the engine's grouped product, then torch's ``silu(z[:, :H]) * z[:, H:] * rs``
  over gate and up halves (contiguous in each row: torch's vectorized kernels);
* ``_grouped_mm + torch``: torch._grouped_mm, then the same elementwise kernels.

The fused result is checked against the unfused torch one (float32 products) before timing.
Times: CUDA events, sampled in turns (gemm_engine.runtime.timing.device_times), median.
"""
from __future__ import annotations

import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import gemm_engine  # noqa: E402
from gemm_engine.runtime.timing import device_times  # noqa: E402
from common import rows_table, tiling, torch_rows_main  # noqa: E402

#: (name, experts, tokens, K, N: gate and up columns together)
ROWS = [("mixtral_up", 8, 4096, 4096, 28672), ("small_64", 64, 8192, 2048, 2816),
        ("mixtral_decode", 8, 64, 4096, 28672)]


def run_row(torch, eng, rng, name, e, t, k, n, repeat):
    g = torch.Generator(device="cuda").manual_seed(1)
    counts = rng.multinomial(t, rng.dirichlet(np.ones(e)))
    offs = torch.tensor(np.cumsum(counts), dtype=torch.int32, device="cuda")
    x = torch.randn((t, k), device="cuda", dtype=torch.bfloat16, generator=g)
    halves = torch.randn((e, n, k), device="cuda", dtype=torch.bfloat16, generator=g) * k ** -0.5   # [gate; up]
    h = n // 2
    mixed = halves.view(e, 2, h, k).transpose(1, 2).reshape(e, n, k).contiguous()   # row 2j gate j, 2j + 1 up j
    rs = torch.rand(t, device="cuda", dtype=torch.float32)

    def fused():
        return eng.grouped_matmul(x, mixed.mT, offsets=offs, row_scale=rs, activation="swiglu")

    def gate(z):
        return torch.nn.functional.silu(z[:, :h]) * z[:, h:] * rs[:, None].to(z.dtype)

    def unfused():
        return gate(eng.grouped_matmul(x, halves.mT, offsets=offs))

    def grouped_mm():
        return gate(torch._grouped_mm(x, halves.mT, offs=offs))

    got = fused()
    choice = eng.last_choice
    want = gate(torch._grouped_mm(x, halves.mT, offs=offs).float())
    err = float((got.float() - want).norm() / want.norm())
    times = device_times(eng.runtime, {"fused": fused, "unfused": unfused, "grouped_mm": grouped_mm}, repeat=repeat)
    flops = 2 * t * k * n
    rec = {"row": name, "experts": e, "tokens": t, "k": k, "n": n, "choice": f"{choice[0].name} {tiling(choice[1])}",
           "rel_error": err, **{f"{key}_ms": v * 1e3 for key, v in times.items()},
           **{f"{key}_TF": flops / v / 1e12 for key, v in times.items()}}
    rec["vs_unfused"] = times["unfused"] / times["fused"]
    rec["vs_grouped_mm"] = times["grouped_mm"] / times["fused"]
    print(rec, flush=True)
    return rec


def markdown(rows) -> str:
    return rows_table("TF: 2 * tokens * K * N / time (N: gate and up columns together). vs: that path's time / "
                      "the fused call's (> 1: fused faster).",
                      ["row", "experts x tokens, K -> N", "choice", "fused ms (TF)", "engine + torch ms",
                       "_grouped_mm + torch ms", "vs engine + torch", "vs _grouped_mm + torch", "rel err"], rows,
                      lambda r: [f"{r['experts']} x {r['tokens']}, {r['k']} -> {r['n']}", r["choice"],
                                 f"{r['fused_ms']:.3f} ({r['fused_TF']:.0f})", f"{r['unfused_ms']:.3f}",
                                 f"{r['grouped_mm_ms']:.3f}", f"{r['vs_unfused']:.2f}", f"{r['vs_grouped_mm']:.2f}",
                                 f"{r['rel_error']:.1e}"])


def main(argv=None):
    rng = np.random.default_rng(0)
    return torch_rows_main(__doc__, "grouped_swiglu.py", "grouped_swiglu", "MoE up projection with SwiGLU and "
                           "routing weights fused, against unfused (bench/grouped_swiglu.py)", ROWS,
                           lambda torch, eng, *row: run_row(torch, eng, rng, *row), markdown,
                           lambda r: r["rel_error"] > 2e-2, lambda: gemm_engine.Engine("cuda", background_compile=False), argv)


if __name__ == "__main__":
    sys.exit(main())
