"""Sweep float32 register-FMA (unit) tilings on CUDA against cuBLAS, in one process.

    python3 bench/sweep_sgemm_tilings.py --json out.json            # on the GPU machine

For each shape and each named variant (unit tile, partition layout, global vector width, stage
size: every tiling knob given, overriding the heuristic's), runs ``simple_unit`` and
``double_buffering_unit`` on device arrays, checks the result against cuBLAS (relative Frobenius
error, on fresh random data) and times it with CUDA events (median of ``--repeat`` after a
warm-up), beside cupy.matmul. ``rule`` is the heuristic's own tiling. Prints a short table last.
What it measures chose the rule in `gemm_engine.selector.unit.sgemm_tiling`.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

import gemm_engine  # noqa: E402
from gemm_engine.algorithms import DoubleBufferingUnitAlgorithm, SimpleUnitAlgorithm  # noqa: E402
from common import events_time, tiling  # noqa: E402

#: One unit per 8 x 8 outputs as one contiguous tile, or as 2 x 2 strided 4 x 4 tiles.
C8 = dict(tile_m=8, tile_n=8, partition_m=1, partition_n=1, partition="contiguous")
S = dict(tile_m=4, tile_n=4, partition_m=2, partition_n=2, partition="strided", vector_width=4)
VARIANTS = {  # name -> every tiling knob (overrides of the heuristic's preset)
    "old 8x8 contiguous, scalar": dict(C8, stage_m=128, stage_n=128, stage_k=8, vector_width=1),
    "8x8 contiguous, float4": dict(C8, stage_m=128, stage_n=128, stage_k=8, vector_width=4),
    "strided 128x128x8": dict(S, stage_m=128, stage_n=128, stage_k=8),
    "strided 128x128x16": dict(S, stage_m=128, stage_n=128, stage_k=16),
    "strided 128x64x8": dict(S, stage_m=128, stage_n=64, stage_k=8),
    "strided 128x64x16": dict(S, stage_m=128, stage_n=64, stage_k=16),
    "strided 64x64x16": dict(S, stage_m=64, stage_n=64, stage_k=16),
    "4x4 64x64x16 256u": dict(tile_m=4, tile_n=4, partition_m=1, partition_n=1, partition="contiguous",
                              stage_m=64, stage_n=64, stage_k=16, vector_width=4),
}
SMALL = ("old 8x8 contiguous, scalar", "strided 128x128x8", "strided 128x64x8", "strided 128x64x16",
         "strided 64x64x16", "4x4 64x64x16 256u")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="4096,4093,1000,1024")
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    engine = gemm_engine.Engine("cuda")
    cp = engine.runtime.cp

    def timed(fn):
        return events_time(cp, fn, args.repeat, warmup=2, sync=cp.cuda.runtime.deviceSynchronize)

    rows = []
    for size in map(int, args.sizes.split(",")):
        rng = np.random.default_rng(size)
        a = cp.asarray(rng.standard_normal((size, size)).astype(np.float32))
        b = cp.asarray(rng.standard_normal((size, size)).astype(np.float32))
        ref = cp.matmul(a, b)
        flops = 2.0 * size ** 3
        t = timed(lambda: cp.matmul(a, b))
        native = flops / t / 1e12
        rows.append(dict(size=size, name="cuBLAS", alg="", ms=t * 1e3, tflops=native, vs=1.0))
        names = ["rule"] + [n for n in VARIANTS if size > 2048 or n in SMALL]
        for name in names:
            for alg_cls in (SimpleUnitAlgorithm, DoubleBufferingUnitAlgorithm):
                alg = alg_cls(**VARIANTS.get(name, {}))
                out = cp.full((size, size), np.nan, np.float32)   # poisoned: unwritten elements fail
                try:
                    engine.matmul(a, b, algorithm=alg, out=out)
                except Exception as exc:  # a refused variant is reported, not fatal
                    rows.append(dict(size=size, name=name, alg=alg_cls.name, error=str(exc)[:200]))
                    continue
                err = float(cp.linalg.norm(out - ref) / cp.linalg.norm(ref))
                t = timed(lambda: engine.matmul(a, b, algorithm=alg, out=out))
                cfg = engine.last_choice[1]
                st, loader = cfg.batch.global_.stage, cfg.batch.global_.lhs_loader
                shape = (f"{tiling(cfg)} {st.partition_m}x{st.partition_n}{' strided' if st.strided else ''} "
                         f"v{getattr(loader, 'width', '?')}")
                rows.append(dict(size=size, name=name, alg=alg_cls.name, ms=t * 1e3,
                                 tflops=flops / t / 1e12, vs=flops / t / 1e12 / native, err=err, tiling=shape))
                print(f"{size} {name:28s} {alg_cls.name:22s} {rows[-1]['tflops']:6.2f} TFLOP/s "
                      f"{rows[-1]['vs']:.2f} x cuBLAS err {err:.1e} {shape}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": engine.runtime.device.name, "repeat": args.repeat, "rows": rows}, f, indent=1)
    print("\n| size | variant | algorithm | TFLOP/s | x cuBLAS | err |\n|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['size']} | {r['name']} | {r['alg']} | refused: {r['error'][:60]} | | |")
        else:
            print(f"| {r['size']} | {r['name']} {r.get('tiling', '')} | {r['alg']} | {r['tflops']:.1f} | {r['vs']:.2f} | {r.get('err', 0):.1e} |")


if __name__ == "__main__":
    main()
