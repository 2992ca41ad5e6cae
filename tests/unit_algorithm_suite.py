"""Numerics every register-tile algorithm runs, shared by the test modules of those algorithms.

A module imports these tests by name (pytest then collects them in that module) and defines an
``algorithm`` fixture naming the algorithm they run; see tests/algorithms/test_specialized.py. Results are
compared with a float64 numpy reference on every backend (CUDA is skipped where there is none).

Few distinct kernels are compiled (each PoCL build costs about a second): float32 runs every shape
of `cases.SHAPES`, the other dtypes two of them, the column-major layouts one shape.
"""
from __future__ import annotations

import pytest

from cases import LAYOUTS, SHAPES
from helpers import DTYPES, assert_close, random
from device_runs import run_device

SHAPE_IDS = ["x".join(map(str, s)) for s in SHAPES]


def operands(rng, shape, dtype):
    batch, m, n, k = shape
    lead = (batch,) if batch > 1 else ()
    return random(rng, lead + (m, k), dtype), random(rng, lead + (k, n), dtype)


def check(engine, algorithm, a, b, dtype, layouts=None):
    """Run ``algorithm`` (numpy operands, or device arrays of ``layouts`` with a NaN-poisoned
    ``out`` so that an element the kernel does not write fails) and compare with float64."""
    result = (engine.matmul(a, b, algorithm=algorithm) if layouts is None
              else run_device(engine, a, b, layouts, algorithm))
    assert engine.last_choice[0].name == algorithm
    assert_close(result, a, b, dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_float32_shapes(engine, rng, algorithm, shape):
    a, b = operands(rng, shape, "float32")
    check(engine, algorithm, a, b, "float32", ("row", "row"))


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d != "float32"])
@pytest.mark.parametrize("shape", [SHAPES[0], SHAPES[2]], ids=[SHAPE_IDS[0], SHAPE_IDS[2]])
def test_other_dtypes(engine, rng, algorithm, dtype, shape):
    a, b = operands(rng, shape, dtype)
    check(engine, algorithm, a, b, dtype)


@pytest.mark.parametrize("layouts", [lay for lay in LAYOUTS if lay != ("row", "row")], ids="-".join)
def test_column_major_operands(engine, rng, algorithm, layouts):
    # Transposed device views: the loaders' other index paths, no copy.
    a, b = operands(rng, SHAPES[3], "float32")
    check(engine, algorithm, a, b, "float32", layouts)


def test_many_k_steps(engine, rng, algorithm):
    # 10 K steps: both shared-memory buffers are reused several times.
    check(engine, algorithm, random(rng, (96, 160), "float32"), random(rng, (160, 70), "float32"), "float32")


def test_broadcast_batch(engine, rng, algorithm):
    m, n, k = SHAPES[1][1:]   # the config of SHAPES[1]: no new compile
    check(engine, algorithm, random(rng, (3, 1, m, k), "float32"), random(rng, (4, k, n), "float32"), "float32")
    # A batched lhs against one rhs (rhs batch stride 0).
    check(engine, algorithm, random(rng, (2, m, k), "float32"), random(rng, (k, n), "float32"), "float32")
