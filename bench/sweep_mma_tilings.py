"""Sweep tilings of the pipelined mma.sync algorithm (``pipelined_mma``) against cuBLAS (CUDA).

For every shape and dtype: cuBLAS (cupy.matmul, on float16 data for both dtypes) and each tiling
below, each checked against a float32 cuBLAS product of the same inputs (relative error, output
poisoned first) and timed with CUDA events around launches of the planned kernel (no frontend,
`common.sweep`): ``1 launch`` is the median of single launches, ``50 launches`` the median over
back-to-back batches of 50 (the GPU time once the host keeps up).

A tiling's knobs override those the heuristic picks for the problem (`select_pipelined_tiling`);
the knobs that differ from the defaults of what ran are recorded in each row (``selection``).

    python3 bench/sweep_mma_tilings.py --json out.json     (prints a table last)
    python3 bench/sweep_mma_tilings.py --dtypes float16,bfloat16 --tilings auto
"""
from __future__ import annotations

import argparse
import json
import sys

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import gemm_engine  # noqa: E402
from gemm_engine.algorithms import REGISTRY  # noqa: E402
from gemm_engine.algorithms.pipelined import PipelinedMmaAlgorithm  # noqa: E402
from common import print_sweep_table, sweep  # noqa: E402

#: 128 x 256 x 32 in 3 stages, 8 warps of 64 x 64 (planes 2 x 4 of 4 x 8 tiles of 16 x 8), with
#: fragment double buffering: the base every tiling below changes.
BASE = dict(tile_m=16, tile_n=8, planes_m=2, planes_n=4, partition_m=4, partition_n=8, stage_k=32, stages=3,
            fragment_buffering=True)
TILINGS = {  # name -> knobs (None: the heuristic's own tiling)
    "auto": None,
    "128x256s3": {},
    "128x256s4": dict(stages=4),
    "128x256nofb": dict(fragment_buffering=False),
    "128x256k64s3": dict(stage_k=64, stages=3),
    "128x128s4": dict(planes_n=2, stages=4),
    "128x128k64s3": dict(planes_n=2, stage_k=64, stages=3),
    "256x128s3": dict(planes_m=4, planes_n=2, stages=3),
    "64x128s4": dict(planes_n=2, partition_m=2, stages=4),
    "64x64s4": dict(planes_n=2, partition_m=2, partition_n=4, stages=4),
}
SHAPES = {"4096": (4096, 4096, 4096), "4093": (4093, 4093, 4093), "1000": (1000, 1000, 1000),
          "2048": (2048, 2048, 2048), "1024": (1024, 1024, 1024)}


def algorithm(name: str) -> PipelinedMmaAlgorithm:
    knobs = TILINGS[name]
    return PipelinedMmaAlgorithm() if knobs is None else PipelinedMmaAlgorithm(**{**BASE, **knobs})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=",".join(SHAPES), help=f"comma list of {list(SHAPES)}")
    ap.add_argument("--dtypes", default="float16", help="float16 and/or bfloat16")
    ap.add_argument("--tilings", default=",".join(TILINGS), help=f"comma list of {list(TILINGS)}")
    ap.add_argument("--extra", default="", help="registered algorithm names to time too")
    ap.add_argument("--json", default=None, help="write the rows here")
    args = ap.parse_args(argv)
    for t in args.tilings.split(","):
        if t and t not in TILINGS:
            ap.error(f"--tilings: unknown {t!r}")
    eng = gemm_engine.Engine("cuda")

    def algs():
        return ([(t, algorithm(t)) for t in args.tilings.split(",") if t]
                + [(x, REGISTRY[x]()) for x in args.extra.split(",") if x])

    rows = sweep(eng, args.dtypes.split(","), args.shapes.split(","), SHAPES, algs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print_sweep_table(rows)


if __name__ == "__main__":
    main()
