"""Device timing shared by the tuner, the CLI and the benchmark suite.

One rule everywhere: a few warm-up calls, then the median of ``repeat`` timed calls, timed on the
device where the backend offers it (CUDA events around the launches) and with the host clock
around ``fn(); synchronize()`` otherwise (OpenCL: PyOpenCL's profiling events would need a queue
created with profiling on, which the engine's queue is not).
"""
from __future__ import annotations

import statistics
import time


def device_time(runtime, fn, repeat: int = 10, warmup: int = 2) -> float:
    """Median seconds of one ``fn()`` on ``runtime``'s device."""
    if repeat < 1:
        raise ValueError(f"repeat: expected a positive count, got {repeat!r}")
    for _ in range(warmup):
        fn()
    runtime.synchronize()
    cp = getattr(runtime, "cp", None) if runtime.backend == "cuda" else None
    times = []
    for _ in range(repeat):
        if cp is not None:
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            runtime.synchronize()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)
