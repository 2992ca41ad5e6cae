"""Device timing shared by the tuner, the CLI and the benchmark suite.

One rule everywhere: a few warm-up calls, then the median of ``repeat`` timed samples, timed on the
device where the backend offers it (CUDA events around the launches) and with the host clock
around ``fn(); synchronize()`` otherwise (OpenCL: PyOpenCL's profiling events would need a queue
created with profiling on, which the engine's queue is not).

A sample is one call, or for calls shorter than ``min_window`` a batch of back-to-back calls
divided by their count: a lone short call measures the host's launch latency as much as the
kernel, while a loop of calls (what an application runs) overlaps each call's host work with the
previous call's device work, so that per-call host overhead counts only where it exceeds the
device time. Every row of a benchmark is timed this way, baselines included.
"""
from __future__ import annotations

import math
import statistics
import time

#: Calls shorter than this are timed in batches (seconds). Each batch starts on an idle device (the
#: sample before it is synchronized), so its first call's host time and launch latency count once
#: per batch: at 0.2 ms a 25 us kernel ran in batches of 5 and measured 40 us a call where 200 calls
#: back to back took 26 us each (H100, bf16 2048^3; torch.matmul 32 against 25). At 1 ms the batch
#: is 25 or more, for the engine and the baselines alike.
MIN_WINDOW = 1e-3
#: The largest batch.
MAX_BATCH = 64


def time_batch(runtime, fn, count: int, cp) -> float:
    """Seconds per call of ``count`` back-to-back ``fn()``: CUDA events when ``cp`` (CuPy) is
    given, else the host clock up to ``runtime.synchronize()``."""
    if cp is not None:
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        for _ in range(count):
            fn()
        stop.record()
        stop.synchronize()
        return cp.cuda.get_elapsed_time(start, stop) / 1e3 / count
    t0 = time.perf_counter()
    for _ in range(count):
        fn()
    runtime.synchronize()
    return (time.perf_counter() - t0) / count


def device_time(runtime, fn, repeat: int = 10, warmup: int = 2, min_window: float = MIN_WINDOW) -> float:
    """Median seconds of one ``fn()`` on ``runtime``'s device (see the module's docstring)."""
    if repeat < 1:
        raise ValueError(f"repeat: expected a positive count, got {repeat!r}")
    for _ in range(warmup):
        fn()
    runtime.synchronize()
    cp = getattr(runtime, "cp", None) if runtime.backend == "cuda" else None
    batch = 1
    if min_window > 0:
        first = time_batch(runtime, fn, 1, cp)
        batch = max(1, min(MAX_BATCH, math.ceil(min_window / max(first, 1e-7))))
    return statistics.median(time_batch(runtime, fn, batch, cp) for _ in range(repeat))
