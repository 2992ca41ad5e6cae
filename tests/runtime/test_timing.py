"""runtime/timing.py: time_batch on the host clock and with device events (a stand-in CuPy), the
batch size a call gets from min_window (capped at MAX_BATCH), and device_time as the one-call case.
(Samples in turns: tests/test_timing.py.)"""
from __future__ import annotations

import time

import pytest

from gemm_engine.runtime import timing


class _Host:
    backend = "opencl"

    def __init__(self):
        self.syncs = 0

    def synchronize(self):
        self.syncs += 1


class _Event:
    log: list = []

    def __init__(self):
        self.at = None

    def record(self):
        self.at = len(_Event.log)
        _Event.log.append("record")

    def synchronize(self):
        _Event.log.append("sync")


class _CuPy:
    """Events whose elapsed time is 2 ms per call recorded between them."""

    class cuda:
        Event = _Event

        @staticmethod
        def get_elapsed_time(start, stop):
            calls = _Event.log[start.at:stop.at].count("call")
            return 2.0 * calls          # milliseconds


def test_time_batch_host_clock_divides_by_the_count():
    rt = _Host()
    per_call = timing.time_batch(rt, lambda: time.sleep(0.002), 3, None)
    assert 0.0015 < per_call < 0.05 and rt.syncs == 1


@pytest.mark.parametrize("lead, calls", [(True, 5), (False, 4)])
def test_time_batch_with_events_times_only_the_batch(lead, calls):
    _Event.log = []
    per_call = timing.time_batch(_Host(), lambda: _Event.log.append("call"), 4, _CuPy, lead=lead)
    assert per_call == pytest.approx(2e-3)
    assert _Event.log.count("call") == calls
    assert _Event.log.index("record") == calls - 4      # the lead call runs before the start event


def test_batches_are_capped():
    count = [0]

    def instant():
        count[0] += 1
    timing.device_times(_Host(), {"f": instant}, repeat=1, warmup=0, min_window=10.0)
    assert count[0] == 1 + timing.MAX_BATCH           # the probe, then one batch of the largest size


def test_device_time_is_the_median_of_one_function(monkeypatch):
    times = iter([0.004, 0.001, 0.009, 0.002, 0.003])
    monkeypatch.setattr(timing, "time_batch", lambda runtime, fn, count, cp, lead=True: next(times))
    assert timing.device_time(_Host(), lambda: None, repeat=5, warmup=0, min_window=0) == 0.003


class _Profiled(_Host):
    """An OpenCL runtime whose queue keeps profiling times: each call's kernel runs 3 ms, 1 ms apart."""

    profiling = True

    def __init__(self):
        super().__init__()
        self.calls = 0

    def span_seconds(self, fn, count):
        start = self.calls
        for _ in range(count):
            fn()
        return (self.calls - start) * 4e-3 - 1e-3


def test_time_batch_reads_opencl_profiling_times_where_the_queue_keeps_them():
    rt = _Profiled()

    def call():
        rt.calls += 1
    per_call = timing.time_batch(rt, call, 4, None)
    assert per_call == pytest.approx(15e-3 / 4) and rt.calls == 5 and rt.syncs == 0
