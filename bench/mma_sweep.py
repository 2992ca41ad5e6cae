"""Sweep tilings of the pipelined tensor-core algorithm against cuBLAS on one GPU (CUDA only).

For every shape and dtype: cuBLAS (cupy.matmul, on float16 data for both dtypes) and each
selection, each checked against a float32 cuBLAS product of the same inputs (relative error, output
poisoned first) and timed with CUDA events around launches of the planned kernel (no frontend):
``1 launch`` is the median of single launches, ``50 launches`` the median over back-to-back
batches of 50 (the GPU time once the host keeps up).

    python3 bench/mma_sweep.py --json out.json     (prints a table last)
"""
from __future__ import annotations

import argparse
import json
import sys

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])

import gemm_engine  # noqa: E402
from gemm_engine.algorithms import REGISTRY  # noqa: E402
from gemm_engine.algorithms.pipelined import PipelinedMmaAlgorithm, PipelinedSelection  # noqa: E402
from common import print_sweep_table, sweep  # noqa: E402

SEL = {  # name -> selection (None: the algorithm's own rule)
    "auto": None,
    "128x256s3": PipelinedSelection(),
    "128x256s4": PipelinedSelection(stages=4),
    "128x256nofb": PipelinedSelection(fragment_buffering=False),
    "128x256k64s3": PipelinedSelection(stage_k=64, stages=3),
    "128x128s4": PipelinedSelection(planes_n=2, stages=4),
    "128x128k64s3": PipelinedSelection(planes_n=2, stage_k=64, stages=3),
    "256x128s3": PipelinedSelection(planes_m=4, planes_n=2, stages=3),
    "64x128s4": PipelinedSelection(planes_n=2, partition_m=2, stages=4),
    "64x64s4": PipelinedSelection(planes_n=2, partition_m=2, partition_n=4, stages=4),
}
SHAPES = {"4096": (4096, 4096, 4096), "4093": (4093, 4093, 4093), "1000": (1000, 1000, 1000),
          "2048": (2048, 2048, 2048), "1024": (1024, 1024, 1024)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4096,4093,1000,2048,1024")
    ap.add_argument("--dtypes", default="float16")
    ap.add_argument("--sels", default=",".join(SEL))
    ap.add_argument("--json", default=None)
    ap.add_argument("--extra", default="", help="registered algorithm names to time too")
    args = ap.parse_args()
    eng = gemm_engine.Engine("cuda")

    def algs():
        return ([(s, PipelinedMmaAlgorithm(SEL[s])) for s in args.sels.split(",") if s]
                + [(x, REGISTRY[x]()) for x in args.extra.split(",") if x])

    rows = sweep(eng, args.dtypes.split(","), args.shapes.split(","), SHAPES, algs)
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)
    print_sweep_table(rows)


if __name__ == "__main__":
    main()
