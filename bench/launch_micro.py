"""Microseconds of each step of a driver launch (codegen/cuda_launch.py) on a tiny matmul plan:
the slot refill, the current-stream query, cuLaunchKernel itself, the whole launch, the prepared
launch of a cached plan (three addresses written), and the call levels above them.

    python3 bench/launch_micro.py
"""
from __future__ import annotations

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


def main():
    eng = gemm_engine.Engine("cuda")
    cp, rt = eng.runtime.cp, eng.runtime
    a = cp.asarray(np.random.rand(64, 64).astype(np.float16))
    b = cp.asarray(np.random.rand(64, 64).astype(np.float16))
    eng.matmul(a, b)
    plan = next(iter(eng._fast.values()))
    kernel, cubes, units, shared = plan.kernels[0]
    out = cp.empty((64, 64), np.float16)
    args = (a, np.int64(0), *plan.lhs_args, b, np.int64(0), *plan.rhs_args, out, np.int64(0), *plan.size_args)
    dl = rt._driver_launch
    dl(kernel, cubes, units, args, shared)
    block = dl._local.blocks[len(args)]
    fn = dl.function(kernel)
    stream = cp.cuda.get_current_stream().ptr
    nd, i64 = cp.ndarray, np.int64
    rows = {
        "refill slots": us(lambda: block.slots.__setitem__(slice(None), [
            x.data.ptr if type(x) is nd else int(x) if type(x) is i64 else 0 for x in args])),
        "get_current_stream().ptr": us(lambda: cp.cuda.get_current_stream().ptr),
        "driver.launchKernel": us(lambda: cp.cuda.driver.launchKernel(fn, cubes, 1, 1, units, 1, 1, shared,
                                                                      stream, block.address, 0)),
        "DriverLauncher call": us(lambda: dl(kernel, cubes, units, args, shared)),
        "rt.launch_converted": us(lambda: rt.launch_converted(kernel, cubes, units, args, shared)),
        "prepared launch (plan.direct)": us(lambda: plan.direct(a, b, out)),
        "engine._run_fast": us(lambda: eng._run_fast(plan, a, b, None)),
        "engine.matmul": us(lambda: eng.matmul(a, b)),
    }
    cp.cuda.get_current_stream().synchronize()
    for k, v in rows.items():
        print(f"{k:28s} {v:7.2f} us")


if __name__ == "__main__":
    main()
