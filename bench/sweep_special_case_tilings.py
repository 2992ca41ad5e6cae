"""Tiling sweeps behind the special-case selection rules (CUDA, Hopper): wgmma tilings for a short K
(fused bias + relu and plain bf16 8192 x 8192 x 64) and for small batched problems (256 x 128^3
f16), skinny tilings for bf16 1 x 8192 x 8192; with ``--staged``, the wgmma staged output writer
against direct stores on large square problems instead.

    python3 bench/sweep_special_case_tilings.py [--skip-skinny] [--staged-output rule|on|off] [--json FILE]
    python3 bench/sweep_special_case_tilings.py --staged

Each candidate's knobs override the heuristic's tiling for the problem: a wgmma candidate gives
(warpgroups_m, warpgroups_n, partition_m, tile_n, stages, wgmma_pending) and 64 k per slot; its
output writer is the rule's (staged through shared memory for these short-K and small batched
problems) unless ``--staged-output on|off`` says; a skinny candidate gives outputs, units and unroll
(16-byte loads, staged chunk chosen by the kernel). Prints one line per candidate, the best three per
problem last; JSON rows to ``--json``. Timing: median of CUDA-event-timed batches of 10 calls.
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import gemm_engine  # noqa: E402
from gemm_engine.algorithms.skinny import SkinnyAlgorithm  # noqa: E402
from gemm_engine.algorithms.wgmma import PipelinedWgmmaAlgorithm  # noqa: E402
from gemm_engine.dtypes import bfloat16_dtype  # noqa: E402
from common import events_time  # noqa: E402

WGMMA = [  # (warpgroups_m, warpgroups_n, partition_m, tile_n, stages, wgmma_pending)
    tile + ring for tile in ((2, 1, 2, 128), (2, 1, 1, 128), (1, 1, 1, 128), (2, 1, 1, 256))
    for ring in ((4, 1), (3, 1), (2, 0), (3, 0))
]
SKINNY = [dict(outputs=o, units=u, unroll=r, vector_width=8, chunk_k=0)
          for o in (32, 64, 128) for u in (128, 256, 512) for r in (4, 8, 16)]


def wgmma(c, staged_output="rule") -> PipelinedWgmmaAlgorithm:
    wm, wn, pm, tn, stages, pending = c
    writer = {} if staged_output == "rule" else {"staged_output": staged_output == "on"}
    return PipelinedWgmmaAlgorithm(warpgroups_m=wm, warpgroups_n=wn, partition_m=pm, tile_n=tn, stage_k=64,
                                   stages=stages, wgmma_pending=pending, **writer)


def tilings(eng, args):
    cp = eng.runtime.cp
    rng = np.random.default_rng(0)
    bf16 = bfloat16_dtype()
    rows = []

    def run(label, name, fn):
        try:
            fn()
            t = events_time(cp, fn, repeat=15, inner=10)
        except Exception as exc:  # noqa: BLE001 -- a candidate that fails is reported, not fatal
            print(label, name, "failed", type(exc).__name__, str(exc)[:100], flush=True)
            return
        rows.append({"problem": label, "candidate": name, "ms": t * 1e3})
        print(label, name, f"{t * 1e3:.4f} ms", flush=True)

    a = cp.asarray(rng.standard_normal((8192, 64)).astype(bf16))
    b = cp.asarray(rng.standard_normal((64, 8192)).astype(bf16))
    bias = cp.asarray(rng.standard_normal(8192).astype(bf16))
    for c in WGMMA:
        alg = wgmma(c, args.staged_output)
        run("fused 8192x8192x64 bf16", str(c), lambda: eng.matmul(a, b, bias=bias, activation="relu", algorithm=alg))
        run("plain 8192x8192x64 bf16", str(c), lambda: eng.matmul(a, b, algorithm=alg))
    a = cp.asarray(rng.standard_normal((256, 128, 128)).astype(np.float16))
    b = cp.asarray(rng.standard_normal((256, 128, 128)).astype(np.float16))
    for c in WGMMA:
        alg = wgmma(c, args.staged_output)
        run("batched 256x128^3 f16", str(c), lambda: eng.matmul(a, b, algorithm=alg))
    if not args.skip_skinny:
        a = cp.asarray(rng.standard_normal((1, 8192)).astype(bf16))
        b = cp.asarray(rng.standard_normal((8192, 8192)).astype(bf16))
        for s in SKINNY:
            alg = SkinnyAlgorithm(**s)
            run("skinny 1x8192x8192 bf16", f"outputs={s['outputs']} units={s['units']} unroll={s['unroll']}",
                lambda: eng.matmul(a, b, algorithm=alg))
    for label in dict.fromkeys(r["problem"] for r in rows):
        best = sorted((r for r in rows if r["problem"] == label), key=lambda r: r["ms"])[:3]
        print("BEST", label, [(r["candidate"], round(r["ms"], 4)) for r in best])
    return rows


def staged_vs_direct(eng):
    """The staged output writer against direct stores on the large square problems (f16 / bf16),
    each with the heuristic's tiling otherwise."""
    cp = eng.runtime.cp
    rng = np.random.default_rng(0)
    rows = []
    for name, dt in (("float16", np.float16), ("bfloat16", bfloat16_dtype())):
        for n in (4096, 4093, 8192):
            a = cp.asarray(rng.standard_normal((n, n)).astype(dt))
            b = cp.asarray(rng.standard_normal((n, n)).astype(dt))
            for staged in (True, False):
                alg = PipelinedWgmmaAlgorithm(staged_output=staged)
                fn = lambda: eng.matmul(a, b, algorithm=alg)  # noqa: E731
                fn()
                t = events_time(cp, fn, repeat=15)
                tc = events_time(cp, lambda: cp.matmul(a, b), repeat=15)
                rows.append({"problem": f"{name} {n}^3", "candidate": f"staged={staged}", "ms": t * 1e3,
                             "cupy_ms": tc * 1e3})
                print(f"STAGED {name} {n}^3 staged={staged}: {t * 1e3:.3f} ms, {tc / t:.2f}x cupy.matmul", flush=True)
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--skip-skinny", action="store_true", help="leave out the skinny candidates")
    p.add_argument("--staged-output", choices=("rule", "on", "off"), default="rule",
                   help="the wgmma candidates' output writer: the rule's (default), staged or direct stores")
    p.add_argument("--staged", action="store_true", help="only the staged-writer-vs-direct comparison")
    args = p.parse_args(argv)
    eng = gemm_engine.Engine("cuda")
    rows = staged_vs_direct(eng) if args.staged else tilings(eng, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": eng.device.name, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
