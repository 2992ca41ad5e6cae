"""Device timing shared by the tuner, the CLI and the benchmark suite.

One rule everywhere: a few warm-up calls, then the median of ``repeat`` timed samples, timed on the
device where the backend offers it (CUDA events around the launches) and with the host clock
around ``fn(); synchronize()`` otherwise (OpenCL: PyOpenCL's profiling events would need a queue
created with profiling on, which the engine's queue is not).

Calls compared with each other (the engine and its baselines in one benchmark row) are timed by
`device_times`: their samples taken in turns, so that all of them meet the same clocks. A long
stretch of heavy kernels warms the H100 and its clocks drop (bench/results/h100/timing_batches.md,
notes), so whoever is timed last in a row pays for the ones before it.

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

#: Calls shorter than this are timed in batches (seconds). On CUDA each batch starts behind one
#: untimed call, so the device is busy when the timing starts, as in a loop of calls: a batch that
#: started on an idle device counted its first call's host time and launch latency, and more
#: (bench/results/h100/timing_batches.md).
MIN_WINDOW = 1e-3
#: The largest batch.
MAX_BATCH = 64


def time_batch(runtime, fn, count: int, cp, lead: bool = True) -> float:
    """Seconds per call of ``count`` back-to-back ``fn()``: CUDA events when ``cp`` (CuPy) is
    given (behind one untimed call unless ``lead`` is False: see `MIN_WINDOW`), the kernels'
    profiling times on an OpenCL queue that keeps them, else the host clock up to
    ``runtime.synchronize()``."""
    if cp is not None:
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        if lead:
            fn()
        start.record()
        for _ in range(count):
            fn()
        stop.record()
        stop.synchronize()
        return cp.cuda.get_elapsed_time(start, stop) / 1e3 / count
    if getattr(runtime, "profiling", False):     # an OpenCL queue with profiling times
        if lead:
            fn()
        return runtime.span_seconds(fn, count) / count
    t0 = time.perf_counter()
    for _ in range(count):
        fn()
    runtime.synchronize()
    return (time.perf_counter() - t0) / count


def device_time(runtime, fn, repeat: int = 10, warmup: int = 2, min_window: float = MIN_WINDOW) -> float:
    """Median seconds of one ``fn()`` on ``runtime``'s device (see the module's docstring)."""
    return device_times(runtime, {"fn": fn}, repeat, warmup, min_window)["fn"]


def device_times(runtime, fns: dict, repeat: int = 10, warmup: int = 2, min_window: float = MIN_WINDOW) -> dict:
    """``{name: median seconds of one call}`` of each function of ``fns``, their samples taken in
    turns (one of each, ``repeat`` times), each function in batches of its own size."""
    if repeat < 1:
        raise ValueError(f"repeat: expected a positive count, got {repeat!r}")
    cp = getattr(runtime, "cp", None) if runtime.backend == "cuda" else None
    batches = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
        runtime.synchronize()
        batch = 1
        if min_window > 0:
            first = time_batch(runtime, fn, 1, cp)
            batch = max(1, min(MAX_BATCH, math.ceil(min_window / max(first, 1e-7))))
        batches[name] = batch
    samples = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            samples[name].append(time_batch(runtime, fn, batches[name], cp))
    return {name: statistics.median(v) for name, v in samples.items()}
