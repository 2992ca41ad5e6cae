"""tools/benchsuite/runner.py: a result's derived numbers (TFLOP/s, the native baseline and ratio,
the tuning speedup), inputs seeded by the problem, the sampled-row error against float64 (and its
detection of a wrong row), what cannot be measured here and why, and one smoke row run on PoCL."""
from __future__ import annotations

import math

import numpy as np
import pytest

from gemm_engine.tools.benchsuite.baselines import NATIVE
from gemm_engine.tools.benchsuite.rows import Row, rows_for
from gemm_engine.tools.benchsuite.runner import TOLERANCE, RowResult, _unsupported, make_inputs, relative_error, run_row

ROW = Row("37x29x41", "unaligned", 2, 37, 41, 29, "float32", fused=True)


def test_derived_numbers():
    r = RowResult(ROW, engine_s=1e-3, baselines={NATIVE[-1]: 2e-3, "other": 1e-4}, tuned_s=5e-4)
    assert r.tflops == pytest.approx(ROW.flops / 1e-3 / 1e12)
    assert r.native == NATIVE[-1] and r.ratio == pytest.approx(2.0) and r.tuned_speedup == pytest.approx(2.0)
    empty = RowResult(ROW)
    assert empty.tflops is None and empty.native is None and empty.ratio is None and empty.tuned_speedup is None


def test_inputs_are_seeded_by_the_problem():
    a, b, bias = make_inputs(ROW)
    assert a.shape == (2, 37, 29) and b.shape == (2, 29, 41) and bias.shape == (41,) and a.dtype == np.float32
    again = make_inputs(ROW)
    assert all(np.array_equal(x, y) for x, y in zip((a, b, bias), again))
    assert not np.array_equal(make_inputs(ROW, seed=1)[0], a)
    assert make_inputs(Row("x", "square", 1, 4, 4, 4, "float16"))[2] is None


def test_relative_error_checks_sampled_rows():
    a, b, bias = make_inputs(ROW)
    ref = np.maximum(a.astype(np.float64) @ b + bias, 0)
    assert relative_error(ref, a, b, bias, ROW) < 1e-15
    wrong = ref.copy()
    wrong[1, -1] += 1.0                       # the last row is always among the sampled ones
    assert relative_error(wrong, a, b, bias, ROW) > 1e-3
    wrong[0, 0, 0] = np.nan
    assert relative_error(wrong, a, b, bias, ROW) == math.inf


def test_what_cannot_be_measured_here(opencl_engine):
    tf32 = Row("x", "square", 1, 8, 8, 8, "float32", precision="tf32")
    assert "tf32 needs CUDA tensor cores" in _unsupported(opencl_engine, tf32)
    assert _unsupported(opencl_engine, ROW) is None


def test_a_smoke_row_on_pocl(opencl_engine):
    row = rows_for("smoke", dtypes="float32", groups="fused")[0]
    result = run_row(opencl_engine, row, [], repeat=1, warmup=0)
    assert result.ok and result.error <= TOLERANCE["float32"] and result.engine_s > 0
    assert result.algorithm and result.skipped is None and result.failure is None
