"""Tiling sweeps behind the issue-4 selection rules (H100): wgmma tilings for a short K (fused
8192 x 8192 x 64 bf16 with bias + relu) and for small batched problems (256 x 128^3 f16), and
skinny tilings for bf16 1 x 8192 x 8192. Prints one line per candidate, JSON to --json.

    python3 bench/issue4_sweep.py [--json FILE]
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from common import events_time

import gemm_engine
from gemm_engine.algorithms.skinny import SkinnyAlgorithm, SkinnySelection
from gemm_engine.algorithms.wgmma import PipelinedWgmmaAlgorithm, WgmmaSelection
from gemm_engine.dtypes import bfloat16_dtype

WGMMA = [  # (warpgroups_m, warpgroups_n, partition_m, tile_n, stages, wgmma_pending)
    tile + ring for tile in ((2, 1, 2, 128), (2, 1, 1, 128), (1, 1, 1, 128), (2, 1, 1, 256))
    for ring in ((4, 1), (3, 1), (2, 0), (3, 0))
]
SKINNY = [SkinnySelection(outputs=o, units=u, unroll=r) for o in (32, 64, 128) for u in (128, 256, 512)
          for r in (4, 8, 16)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--json")
    p.add_argument("--skip-skinny", action="store_true")
    args = p.parse_args()
    eng = gemm_engine.Engine("cuda")
    cp = eng.runtime.cp
    rng = np.random.default_rng(0)
    bf16 = bfloat16_dtype()
    rows = []

    def run(label, name, fn):
        try:
            fn()
            t = events_time(cp, fn, repeat=15, inner=10)
        except Exception as exc:
            print(label, name, "failed", type(exc).__name__, str(exc)[:100], flush=True)
            return
        rows.append({"problem": label, "candidate": name, "ms": t * 1e3})
        print(label, name, f"{t * 1e3:.4f} ms", flush=True)

    a = cp.asarray(rng.standard_normal((8192, 64)).astype(bf16))
    b = cp.asarray(rng.standard_normal((64, 8192)).astype(bf16))
    bias = cp.asarray(rng.standard_normal(8192).astype(bf16))
    for c in WGMMA:
        alg = PipelinedWgmmaAlgorithm(WgmmaSelection(*c[:4], stages=c[4], wgmma_pending=c[5]))
        run("fused 8192x8192x64 bf16", str(c), lambda: eng.matmul(a, b, bias=bias, activation="relu", algorithm=alg))
        run("plain 8192x8192x64 bf16", str(c), lambda: eng.matmul(a, b, algorithm=alg))
    a = cp.asarray(rng.standard_normal((256, 128, 128)).astype(np.float16))
    b = cp.asarray(rng.standard_normal((256, 128, 128)).astype(np.float16))
    for c in WGMMA:
        alg = PipelinedWgmmaAlgorithm(WgmmaSelection(*c[:4], stages=c[4], wgmma_pending=c[5]))
        run("batched 256x128^3 f16", str(c), lambda: eng.matmul(a, b, algorithm=alg))
    if args.skip_skinny:
        SKINNY.clear()
    a = cp.asarray(rng.standard_normal((1, 8192)).astype(bf16))
    b = cp.asarray(rng.standard_normal((8192, 8192)).astype(bf16))
    for s in SKINNY:
        alg = SkinnyAlgorithm(s)
        run("skinny 1x8192x8192 bf16", f"outputs={s.outputs} units={s.units} unroll={s.unroll}",
            lambda: eng.matmul(a, b, algorithm=alg))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": eng.device.name, "rows": rows}, f, indent=1)
    for label in dict.fromkeys(r["problem"] for r in rows):
        best = sorted((r for r in rows if r["problem"] == label), key=lambda r: r["ms"])[:3]
        print("BEST", label, [(r["candidate"], round(r["ms"], 4)) for r in best])




def staged_vs_direct():
    """The staged writer against direct stores on the large square problems (f16 / bf16)."""
    from dataclasses import replace

    from gemm_engine.algorithms.wgmma import select_wgmma_tiling
    from gemm_engine.dtypes import FLOAT16, BFLOAT16
    from gemm_engine.problem import MatmulProblem
    eng = gemm_engine.Engine("cuda")
    cp = eng.runtime.cp
    rng = np.random.default_rng(0)
    for name, dt, et in (("float16", np.float16, FLOAT16), ("bfloat16", bfloat16_dtype(), BFLOAT16)):
        for n in (4096, 4093, 8192):
            a = cp.asarray(rng.standard_normal((n, n)).astype(dt))
            b = cp.asarray(rng.standard_normal((n, n)).astype(dt))
            base = select_wgmma_tiling(MatmulProblem(1, n, n, n, et, et, et), eng.dialect)
            for staged in (True, False):
                alg = PipelinedWgmmaAlgorithm(replace(base, staged_output=staged))
                fn = lambda: eng.matmul(a, b, algorithm=alg)  # noqa: E731
                fn()
                t = events_time(cp, fn, repeat=15)
                tc = events_time(cp, lambda: cp.matmul(a, b), repeat=15)
                print(f"STAGED {name} {n}^3 staged={staged}: {t * 1e3:.3f} ms, {tc / t:.2f}x cupy.matmul", flush=True)


if __name__ == "__main__":
    import sys
    staged_vs_direct() if "--staged" in sys.argv else main()
