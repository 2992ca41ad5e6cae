"""Time ``pipelined_wgmma`` tilings against ``pipelined_mma`` and cuBLAS on one Hopper GPU (CUDA only).

Same method as bench/mma_sweep.py (both run `common.sweep`): raw 16-bit row-major operands on the
device, every kernel checked against a float32 cuBLAS product of the same inputs (output poisoned
first), timed with CUDA events around launches of the planned kernel: ``1 launch`` is the median of
single launches, ``50 launches`` the median over back-to-back batches of 50.

    python3 bench/wgmma_sweep.py --json out.json     (prints a table last)
"""
from __future__ import annotations

import argparse
import json
import sys

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import gemm_engine  # noqa: E402
from gemm_engine.algorithms.pipelined import PipelinedMmaAlgorithm  # noqa: E402
from gemm_engine.algorithms.wgmma import PipelinedWgmmaAlgorithm, WgmmaSelection  # noqa: E402
from common import print_sweep_table, sweep  # noqa: E402

ALGS = {
    "mma auto": lambda: PipelinedMmaAlgorithm(),
    "wg auto": lambda: PipelinedWgmmaAlgorithm(),
    "wg 128x256 S4 p1": lambda: PipelinedWgmmaAlgorithm(WgmmaSelection()),
    "wg 128x256 S4 p0": lambda: PipelinedWgmmaAlgorithm(WgmmaSelection(wgmma_pending=0)),
    "wg 128x256 S3 p0": lambda: PipelinedWgmmaAlgorithm(WgmmaSelection(stages=3, wgmma_pending=0)),
    "wg 128x128 S4 p1": lambda: PipelinedWgmmaAlgorithm(WgmmaSelection(tile_n=128)),
    "wg 128x128 S6 p1": lambda: PipelinedWgmmaAlgorithm(WgmmaSelection(tile_n=128, stages=6)),
    "wg 256x128 S4 p1": lambda: PipelinedWgmmaAlgorithm(WgmmaSelection(partition_m=2, tile_n=128)),
}
SHAPES = {"4096": (4096, 4096, 4096), "8192": (8192, 8192, 8192), "2048": (2048, 2048, 2048),
          "1024": (1024, 1024, 1024), "1000": (1000, 1000, 1000), "4093": (4093, 4093, 4093),
          "8192x8192x64": (8192, 8192, 64)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4096,8192,2048,1000,4093")
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--algs", default=",".join(ALGS))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    eng = gemm_engine.Engine("cuda")
    rows = sweep(eng, args.dtypes.split(","), args.shapes.split(","), SHAPES,
                 lambda: [(name, ALGS[name]()) for name in args.algs.split(",")], print_failures=True)
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)
    print_sweep_table(rows, vs_cublas=True, skipped_width=120)


if __name__ == "__main__":
    main()
