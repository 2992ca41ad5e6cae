"""Sweep tilings of ``pipelined_wgmma`` against ``pipelined_mma`` and cuBLAS on one Hopper GPU (CUDA).

Same method as bench/sweep_mma_tilings.py (both run `common.sweep`): raw 16-bit row-major operands
on the device, every kernel checked against a float32 cuBLAS product of the same inputs (output
poisoned first), timed with CUDA events around launches of the planned kernel: ``1 launch`` is the
median of single launches, ``50 launches`` the median over back-to-back batches of 50.

A name reads ``wg <stage m>x<stage n> S<ring slots> p<wgmma batches left pending>``; its knobs
override those the heuristic picks (`select_wgmma_tiling`), and each row records the knobs of what
ran (``selection``).

    python3 bench/sweep_wgmma_tilings.py --json out.json     (prints a table last)
    python3 bench/sweep_wgmma_tilings.py --shapes 4096 --algs "wg auto,wg 128x128 S4 p1"
"""
from __future__ import annotations

import argparse
import json
import sys

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import gemm_engine  # noqa: E402
from gemm_engine.algorithms.pipelined import PipelinedMmaAlgorithm  # noqa: E402
from gemm_engine.algorithms.wgmma import PipelinedWgmmaAlgorithm  # noqa: E402
from common import print_sweep_table, sweep  # noqa: E402


def wg(tile_n=256, partition_m=1, stages=4, pending=1):
    """Two warpgroups along M (one along N), each ``partition_m`` tiles of 64 x ``tile_n``, 64 k per
    ring slot (one 128-byte row of 16-bit elements), direct output stores."""
    return lambda: PipelinedWgmmaAlgorithm(warpgroups_m=2, warpgroups_n=1, partition_m=partition_m, tile_n=tile_n,
                                           stage_k=64, stages=stages, wgmma_pending=pending, staged_output=False)


ALGS = {
    "mma auto": lambda: PipelinedMmaAlgorithm(),
    "wg auto": lambda: PipelinedWgmmaAlgorithm(),
    "wg 128x256 S4 p1": wg(),
    "wg 128x256 S4 p0": wg(pending=0),
    "wg 128x256 S3 p0": wg(stages=3, pending=0),
    "wg 128x128 S4 p1": wg(tile_n=128),
    "wg 128x128 S6 p1": wg(tile_n=128, stages=6),
    "wg 256x128 S4 p1": wg(tile_n=128, partition_m=2),
}
SHAPES = {"4096": (4096, 4096, 4096), "8192": (8192, 8192, 8192), "2048": (2048, 2048, 2048),
          "1024": (1024, 1024, 1024), "1000": (1000, 1000, 1000), "4093": (4093, 4093, 4093),
          "8192x8192x64": (8192, 8192, 64)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="4096,8192,2048,1000,4093", help=f"comma list of {list(SHAPES)}")
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--algs", default=",".join(ALGS), help=f"comma list of {list(ALGS)}")
    ap.add_argument("--json", default=None, help="write the rows here")
    args = ap.parse_args(argv)
    for name in args.algs.split(","):
        if name not in ALGS:
            ap.error(f"--algs: unknown {name!r}")
    eng = gemm_engine.Engine("cuda")
    rows = sweep(eng, args.dtypes.split(","), args.shapes.split(","), SHAPES,
                 lambda: [(name, ALGS[name]()) for name in args.algs.split(",")], print_failures=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print_sweep_table(rows, vs_cublas=True, skipped_width=120)


if __name__ == "__main__":
    main()
