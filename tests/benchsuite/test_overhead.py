"""The JIT and host-overhead benchmarks (gemm_engine.tools.benchsuite.overhead) run end to end on OpenCL
(PoCL in CI): small call counts, one child process pair, so the file stays within a few seconds of
PoCL compile time."""
from __future__ import annotations

import pytest

from gemm_engine.tools.benchsuite import overhead

from conftest import get_engine

FIRST_CALL_KEYS = {"backend", "device", "m", "dtype", "algorithm", "import_s", "engine_s",
                   "first_call_s", "second_call_s", "compile_s", "kernels_compiled", "render_s"}


def test_per_call_reports_both_sides():
    engine = get_engine("opencl")
    r = overhead.per_call(engine, size=16, calls=50, repeats=3)
    assert {"engine_us", "baseline_us", "baseline", "ratio", "engine_host_us", "baseline_host_us",
            "size", "calls", "repeats"} <= set(r)
    assert r["engine_us"] > 0 and r["baseline_us"] > 0 and r["ratio"] > 0
    assert len(r["engine_runs_us"]) == len(r["baseline_runs_us"]) == 3


@pytest.fixture(scope="module")
def first_calls():
    get_engine("opencl")  # skips when OpenCL is unavailable or excluded
    # A small problem: the compile, not the kernel, is what the children time.
    return overhead.warm_first_call("opencl", m=64, dtype="float32")


def test_cold_and_warm_first_calls(first_calls):
    warm, cold = first_calls, first_calls["cold"]
    for r in (cold, warm):
        assert FIRST_CALL_KEYS <= set(r)
        assert r["backend"] == "opencl" and r["m"] == 64 and r["dtype"] == "float32"
        for key in ("import_s", "engine_s", "first_call_s", "second_call_s", "render_s"):
            assert r[key] > 0, key
        assert r["kernels_compiled"] >= 1
    # The second process finds the first one's binaries: its first call skips the compile.
    assert warm["first_call_s"] < cold["first_call_s"]
    assert warm["compile_s"] < cold["compile_s"]


def test_cold_compile_runs_alone():
    get_engine("opencl")
    r = overhead.cold_compile("opencl", m=32, dtype="float32")
    assert r["first_call_s"] > r["second_call_s"] > 0


def test_child_failure_carries_stderr():
    with pytest.raises(RuntimeError, match="ValueError"):
        overhead.cold_compile("no_such_backend", m=8, dtype="float32")


def test_format_overhead(first_calls):
    pc = {"size": 64, "calls": 10, "repeats": 1, "engine_us": 20.0, "baseline": "native",
          "baseline_us": 10.0, "ratio": 2.0}
    warm = {k: v for k, v in first_calls.items() if k != "cold"}
    measured = {"cold_compile_s": first_calls["cold"]["first_call_s"],
                "warm_first_call_s": warm["first_call_s"], "per_call_ratio": 2.0}
    d = {"backend": "opencl", "device": warm["device"], "targets": overhead.TARGETS,
         "measured": measured, "met": {k: measured[k] <= overhead.TARGETS[k] for k in measured},
         "cold": first_calls["cold"], "warm": warm, "per_call": pc}
    text = overhead.format_overhead(d)
    assert "warm-cache first call" in text and "2.00x" in text and "NO" in text
