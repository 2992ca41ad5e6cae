"""Command line: ``python -m gemm_engine run`` (or ``gemm-engine run``) runs one checked matmul.

It prints the backend, device, chosen algorithm, relative error against a float64 numpy reference
and the achieved GFLOP/s (median of timed runs on device arrays after a warm-up), and exits non-zero
when the error is above the dtype's tolerance.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from .dtypes import SUPPORTED_NAMES, bfloat16_dtype

TOLERANCE = {"float64": 1e-12, "float32": 2e-5, "float16": 2e-3, "bfloat16": 1.5e-2,
             "int8": 0.0}   # int8 @ int8 -> int32 is exact


def _np_dtype(name):
    return bfloat16_dtype() if name == "bfloat16" else np.dtype(name)


def run(args) -> int:
    from .engine import Engine

    engine = Engine(args.backend)
    rng = np.random.default_rng(args.seed)
    dtype = _np_dtype(args.dtype)
    lead = (args.batch,) if args.batch > 1 else ()
    if dtype.kind == "i":   # int8: uniform over the whole range
        a = rng.integers(-128, 128, lead + (args.m, args.k), dtype=dtype)
        b = rng.integers(-128, 128, lead + (args.k, args.n), dtype=dtype)
    else:
        a = rng.standard_normal(lead + (args.m, args.k)).astype(dtype)
        b = rng.standard_normal(lead + (args.k, args.n)).astype(dtype)
    result = engine.matmul(a, b, algorithm=args.algorithm)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    err = float(np.linalg.norm(result.astype(np.float64) - ref) / max(np.linalg.norm(ref), 1e-300))
    alg, cfg = engine.last_choice

    # Time on device arrays so host transfers stay out of the number (bfloat16 is timed through
    # numpy arrays where the device library lacks the dtype).
    rt = engine.runtime
    try:
        da, db = rt.to_device(a), rt.to_device(b)
    except Exception:
        da, db = a, b
    engine.matmul(da, db, algorithm=args.algorithm)
    rt.synchronize()
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        engine.matmul(da, db, algorithm=args.algorithm)
        rt.synchronize()
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    flops = 2.0 * max(args.batch, 1) * args.m * args.n * args.k
    ok = err <= TOLERANCE[args.dtype]
    print(f"backend    {engine.backend}")
    print(f"device     {engine.device.name}")
    print(f"algorithm  {alg.name}  (stage {cfg.batch.global_.stage.stage_m}x"
          f"{cfg.batch.global_.stage.stage_n}x{cfg.batch.global_.stage.stage_k}, {cfg.units} units)")
    print(f"problem    batch={max(args.batch, 1)} m={args.m} n={args.n} k={args.k} dtype={args.dtype}")
    print(f"rel error  {err:.3e}  (tolerance {TOLERANCE[args.dtype]:.1e}: {'OK' if ok else 'FAILED'})")
    print(f"time       {median * 1e3:.3f} ms (median of {args.repeat})")
    print(f"GFLOP/s    {flops / median / 1e9:.1f}")
    return 0 if ok else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="gemm-engine", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("run", help="one matmul checked against numpy, with its speed")
    p.add_argument("--m", type=int, default=1024)
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--k", type=int, default=1024)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--dtype", choices=SUPPORTED_NAMES, default="float32")
    p.add_argument("--algorithm", default=None, help="registered algorithm name (default: the engine's choice)")
    p.add_argument("--backend", choices=("auto", "cuda", "opencl"), default="auto")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(["run"] if argv is None and len(sys.argv) == 1 else argv)
    if args.command != "run":
        parser.print_help()
        return 2
    return run(args)
