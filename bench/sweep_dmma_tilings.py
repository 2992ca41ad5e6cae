"""Sweep tilings of the float64 tensor-core (DMMA) algorithms against cuBLAS and register FMA (CUDA).

For every size: cuBLAS DGEMM (cupy.matmul), ``simple_unit`` (FP64 FMA, the engine's float64 path
today) and each DMMA tiling below, on row-major float64 operands (``--layouts`` for others), each
checked against cuBLAS (relative error) and timed with CUDA events around ``engine.matmul`` calls
into a preallocated output (median of ``--repeat``). Which rows win, and from what size, decides
whether and where ``pipelined_dmma`` / ``simple_dmma`` join the ``auto`` family. A tiling's knobs
override the heuristic's (every tiling knob is given); the tiling that ran is in each row.

    python3 bench/sweep_dmma_tilings.py --sizes 1024,2048,4093,4096 --json out.json   (prints a table last)
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import gemm_engine  # noqa: E402
from gemm_engine.algorithms import REGISTRY  # noqa: E402
from gemm_engine.algorithms.dmma import PipelinedDmmaAlgorithm, SimpleDmmaAlgorithm  # noqa: E402
from gemm_engine.errors import SetupError  # noqa: E402
from common import events_time, tiling  # noqa: E402

#: 8 x 8 DMMA tiles (the "h" rows: sm_90's 16 x 8 ones). Pipelined base: 128 x 128 x 16 in 3 stages, planes 2 x 4 of 8 x 4 tiles (64 x 32),
#: fragment double buffering. Simple base: 128 x 64 x 16, planes 4 x 2 of 4 x 4 tiles (32 x 32).
P_BASE = dict(tile_m=8, tile_n=8, tile_k=0, planes_m=2, planes_n=4, partition_m=8, partition_n=4, stage_k=16, stages=3,
              fragment_buffering=True)
S_BASE = dict(tile_m=8, tile_n=8, tile_k=0, planes_m=4, planes_n=2, partition_m=4, partition_n=4, stage_k=16,
              fragment_buffering=False)


def P(**knobs):
    return PipelinedDmmaAlgorithm(**{**P_BASE, **knobs})


def S(**knobs):
    return SimpleDmmaAlgorithm(**{**S_BASE, **knobs})


TILINGS = {  # name -> algorithm (no knobs: the algorithm's own rule)
    "pipelined_dmma": PipelinedDmmaAlgorithm(),
    "p128x128k16s3 (64x32 planes)": P(),
    "p128x128k16s4": P(stages=4),
    "p128x128k32s3": P(stage_k=32),
    "p128x128nofb": P(fragment_buffering=False),
    "p128x128 (16 planes 32x32)": P(planes_m=4, planes_n=4, partition_m=4, partition_n=4),
    "p128x64k16s3 (64x32 planes)": P(planes_n=2),
    "p128x64k16s4": P(planes_n=2, stages=4),
    "p64x128k16s4 (32x32 planes)": P(partition_m=4, stages=4),
    "p64x64k16s4 (32x32 planes)": P(planes_n=2, partition_m=4, stages=4),
    # sm_90's f64 shapes: 16 x 8 tiles (partition_m counts 16-row tiles), k = 4 / 8 / 16.
    "h128x128 m16n8k8 (64x32 planes)": P(tile_m=16, tile_k=8, partition_m=4),
    "h128x128 m16n8k16": P(tile_m=16, tile_k=16, partition_m=4),
    "h128x128 m16n8k4": P(tile_m=16, tile_k=4, partition_m=4),
    "h128x128 m16n8k8 nofb": P(tile_m=16, tile_k=8, partition_m=4, fragment_buffering=False),
    "h128x128 m16n8k16 nofb": P(tile_m=16, tile_k=16, partition_m=4, fragment_buffering=False),
    "h128x128k32 m16n8k8": P(tile_m=16, tile_k=8, partition_m=4, stage_k=32),
    "h128x128k32 m16n8k16 nofb": P(tile_m=16, tile_k=16, partition_m=4, stage_k=32, fragment_buffering=False),
    "h128x128s4 m16n8k8": P(tile_m=16, tile_k=8, partition_m=4, stages=4),
    "h128x128 m16n8k8 (16 planes 32x32)": P(tile_m=16, tile_k=8, planes_m=4, planes_n=4, partition_m=2,
                                            partition_n=4),
    "h128x64 m16n8k8 (64x32 planes)": P(tile_m=16, tile_k=8, partition_m=4, planes_n=2),
    "h128x64s4 m16n8k8": P(tile_m=16, tile_k=8, partition_m=4, planes_n=2, stages=4),
    "h128x64 m16n8k4": P(tile_m=16, tile_k=4, partition_m=4, planes_n=2),
    "h128x64 m16n8k16": P(tile_m=16, tile_k=16, partition_m=4, planes_n=2),
    "h128x64 m16n8k8 nofb": P(tile_m=16, tile_k=8, partition_m=4, planes_n=2, fragment_buffering=False),
    "h128x64k32 m16n8k8": P(tile_m=16, tile_k=8, partition_m=4, planes_n=2, stage_k=32),
    "h128x64k32 m16n8k16": P(tile_m=16, tile_k=16, partition_m=4, planes_n=2, stage_k=32),
    "h128x64k32s2 m16n8k8": P(tile_m=16, tile_k=8, partition_m=4, planes_n=2, stage_k=32, stages=2),
    "h128x64k8s4 m16n8k8": P(tile_m=16, tile_k=8, partition_m=4, planes_n=2, stage_k=8, stages=4),
    "h128x64 m16n8k8 (8 planes 32x32)": P(tile_m=16, tile_k=8, planes_m=4, planes_n=2, partition_m=2),
    "h64x128 m16n8k8 (64x32 planes)": P(tile_m=16, tile_k=8, planes_m=1, planes_n=4, partition_m=4),
    "h64x128 m16n8k8 (32x64 planes)": P(tile_m=16, tile_k=8, planes_m=2, planes_n=2, partition_m=2,
                                        partition_n=8),
    "h256x128 m16n8k8 (16 planes 64x32)": P(tile_m=16, tile_k=8, planes_m=4, planes_n=4, partition_m=4),
    "h64x64s4 m16n8k8 (32x32 planes)": P(tile_m=16, tile_k=8, planes_n=2, partition_m=2, stages=4),
    "simple_dmma": SimpleDmmaAlgorithm(),
    "s128x64 (32x32 planes)": S(),
    "s64x64 (32x32 planes)": S(planes_m=2),
    "s128x64 (64x32 planes)": S(planes_m=2, partition_m=8),
}


def operand(cp, host, layout):
    if layout == "row":
        return cp.asarray(host)
    return cp.asarray(np.ascontiguousarray(host.T)).T


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1024,2048,4093,4096")
    ap.add_argument("--layouts", default="row,row", help="lhs,rhs layouts: row or col")
    ap.add_argument("--tilings", default=",".join(TILINGS), help="comma list of names above")
    ap.add_argument("--extra", default="simple_unit", help="registered algorithm names to time too")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    unknown = [t for t in args.tilings.split(",") if t and t not in TILINGS]
    if unknown:
        ap.error(f"--tilings: unknown {unknown}")
    eng = gemm_engine.Engine("cuda")
    cp = eng.runtime.cp
    lhs_layout, rhs_layout = args.layouts.split(",")
    algs = ([(t, TILINGS[t]) for t in args.tilings.split(",") if t]
            + [(x, REGISTRY[x]()) for x in args.extra.split(",") if x])
    rows = []
    for size in map(int, args.sizes.split(",")):
        rng = np.random.default_rng(size)
        a = operand(cp, rng.standard_normal((size, size)), lhs_layout)
        b = operand(cp, rng.standard_normal((size, size)), rhs_layout)
        flops = 2.0 * size ** 3
        ref = cp.matmul(a, b)
        t = events_time(cp, lambda: cp.matmul(a, b), repeat=args.repeat)
        rows.append(dict(size=size, name="cuBLAS (cupy.matmul)", tflops=flops / t / 1e12))
        print(rows[-1], flush=True)
        out = cp.empty((size, size), cp.float64)
        for name, alg in algs:
            try:
                out.fill(np.nan)
                eng.matmul(a, b, out=out, algorithm=alg)
            except SetupError as exc:
                rows.append(dict(size=size, name=name, skipped=str(exc)[:100]))
                continue
            except Exception as exc:  # a compile or launch failure is a result too
                rows.append(dict(size=size, name=name, skipped=f"FAILED {type(exc).__name__}: {str(exc)[:200]}"))
                print(rows[-1], flush=True)
                continue
            err = float(cp.linalg.norm(out - ref) / cp.linalg.norm(ref))
            t = events_time(cp, lambda: eng.matmul(a, b, out=out, algorithm=alg), repeat=args.repeat)
            rows.append(dict(size=size, name=name, tflops=flops / t / 1e12, err=err, tiling=tiling(eng.last_choice[1])))
            print(rows[-1], flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": eng.device.name, "layouts": args.layouts, "rows": rows}, f, indent=1)
    best = {r["size"]: r["tflops"] for r in rows if r["name"].startswith("cuBLAS")}
    print(f"\n# {eng.device.name}, float64, layouts {args.layouts}\n")
    print("| size | implementation | tiling | TFLOP/s | vs cuBLAS | rel err vs cuBLAS |\n|---|---|---|---|---|---|")
    for r in rows:
        if "skipped" in r:
            print(f"| {r['size']} | {r['name']} | | | | skipped: {r['skipped'][:80]} |")
            continue
        err = f"{r['err']:.1e}" if "err" in r else ""
        print(f"| {r['size']} | {r['name']} | {r.get('tiling', '')} | {r['tflops']:.2f} | "
              f"{r['tflops'] / best[r['size']]:.2f} | {err} |")


if __name__ == "__main__":
    main()
