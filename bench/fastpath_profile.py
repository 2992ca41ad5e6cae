"""Where the per-call host time of a repeated ``engine.matmul`` on CUDA device arrays goes:
microseconds per call of the engine, cupy.matmul, torch.matmul and the pieces of the fast path,
then a cProfile of the engine's calls (tottime, top 25).

    python3 bench/fastpath_profile.py
"""
from __future__ import annotations

import cProfile
import pstats
import sys
import time

import numpy as np

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0])

import gemm_engine  # noqa: E402


def us(fn, calls=20000):
    fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def tiny_plan():
    """(engine, a, b, out, the cached fast plan, its kernel launch arguments) of a 64^3 f16
    matmul on CUDA device arrays, after two calls (the second prepares the direct launch)."""
    eng = gemm_engine.Engine("cuda")
    cp = eng.runtime.cp
    a = cp.asarray(np.random.rand(64, 64).astype(np.float16))
    b = cp.asarray(np.random.rand(64, 64).astype(np.float16))
    eng.matmul(a, b)
    eng.matmul(a, b)
    plan = next(iter(eng._fast.values()))
    out = cp.empty((64, 64), np.float16)
    args = (a, np.int64(0), *plan.lhs_args, b, np.int64(0), *plan.rhs_args, out, np.int64(0), *plan.size_args)
    return eng, a, b, out, plan, args


def main():
    import torch
    eng, a, b, out, plan, args = tiny_plan()
    cp, rt = eng.runtime.cp, eng.runtime
    ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
    kernel, cubes, units, shared = plan.kernels[0]
    rows = {
        "engine.matmul": us(lambda: eng.matmul(a, b)),
        "cupy.matmul": us(lambda: cp.matmul(a, b)),
        "torch.matmul": us(lambda: torch.matmul(ta, tb)),
        "cupy.empty": us(lambda: cp.empty((64, 64), np.float16)),
        "rt.empty": us(lambda: rt.empty((64, 64), np.float16)),
        "kernel launch (cupy Function)": us(lambda: kernel((cubes,), (units,), args, shared_mem=shared)),
        "rt.launch_converted": us(lambda: rt.launch_converted(kernel, cubes, units, args, shared)),
        "getDevice": us(lambda: cp.cuda.runtime.getDevice()),
        "a.data.ptr": us(lambda: a.data.ptr),
    }
    cp.cuda.get_current_stream().synchronize()
    for k, v in rows.items():
        print(f"{k:32s} {v:8.2f} us")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(20000):
        eng.matmul(a, b)
    prof.disable()
    cp.cuda.get_current_stream().synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
