"""Microseconds of each step of a driver launch (codegen/cuda_launch.py) on a tiny matmul plan:
the slot refill, the current-stream query, cuLaunchKernel itself, the whole launch, the prepared
launch of a cached plan (three addresses written), and the call levels above them.

    python3 bench/launch_micro.py
"""
from __future__ import annotations

import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])

from fastpath_profile import tiny_plan, us  # noqa: E402


def main():
    eng, a, b, out, plan, args = tiny_plan()
    cp, rt = eng.runtime.cp, eng.runtime
    kernel, cubes, units, shared = plan.kernels[0]
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
