"""Per-call host overhead of `engine.matmul` against the native library on a tiny problem.

Times N back-to-back calls on device arrays (64 x 64 float32, so the GPU work is negligible) with a
host clock and one synchronize at the end; reports microseconds per call, median of 5 repeats.

    python3 bench/overhead.py --backend cuda
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])

import gemm_engine  # noqa: E402


def per_call_us(fn, sync, calls=2000, repeats=5) -> float:
    fn()
    sync()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        runs.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(runs)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="auto")
    p.add_argument("--size", type=int, default=64)
    args = p.parse_args(argv)
    engine = gemm_engine.Engine(args.backend)
    rt = engine.runtime
    rng = np.random.default_rng(0)
    a = rt.to_device(rng.standard_normal((args.size, args.size)).astype(np.float32))
    b = rt.to_device(rng.standard_normal((args.size, args.size)).astype(np.float32))
    rows = [("gemm_engine.matmul", per_call_us(lambda: engine.matmul(a, b), rt.synchronize))]
    if engine.backend == "cuda":
        rows.append(("cupy.matmul", per_call_us(lambda: rt.cp.matmul(a, b), rt.synchronize)))
        try:
            import torch
            ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
            rows.append(("torch.matmul", per_call_us(lambda: torch.matmul(ta, tb), rt.synchronize)))
        except Exception:
            pass
    print(f"per-call time, {args.size}x{args.size}x{args.size} float32 on {engine.device.name}")
    for name, us in rows:
        print(f"  {name:22s} {us:8.1f} us")


if __name__ == "__main__":
    main()
