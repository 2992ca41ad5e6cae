"""all_gather_matmul / matmul_reduce_scatter on two gloo processes (the engine's OpenCL backend on
CPU tensors): both strategies equal the float64 product of the whole on every rank, for uneven and
empty shards, row- and column-major operands, other gathered dims, a fused bias; gradients through
both; argument errors; a late rank gives a TimeoutError, not a hang."""
from __future__ import annotations

import pytest

TOL = 1e-5          # float32 sums of K <= 96 terms
STRATEGIES = ("sequential", "overlap")


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("sizes, layouts", [
    ((16, 16), ("row", "row")),
    ((13, 7), ("col", "row")),        # uneven shards, a column-major shard
    ((0, 9), ("row", "col")),         # an empty shard, a column-major w (a linear layer's weight.mT)
])
def test_all_gather_matmul_equals_the_whole_product(gloo_pair, strategy, sizes, layouts):
    errs = gloo_pair.run("gather", strategy, sizes, 40, 24, *layouts)
    assert max(errs) < TOL, errs


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_all_gather_matmul_over_another_dim_with_a_bias_and_exchanged_sizes(gloo_pair, strategy):
    errs = gloo_pair.run("gather", strategy, (5, 3), 16, 12, "row", "row", 1, (2, 3), True, False)
    assert max(errs) < TOL, errs


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("m, k_sizes, sizes, layouts", [
    (32, (24, 24), None, ("row", "row")),
    (21, (17, 30), (15, 6), ("col", "col")),     # uneven row blocks and contraction slices
])
def test_matmul_reduce_scatter_equals_the_whole_products_rows(gloo_pair, strategy, m, k_sizes, sizes, layouts):
    errs = gloo_pair.run("scatter", strategy, m, k_sizes, 20, *layouts, sizes)
    assert max(errs) < TOL, errs


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_matmul_reduce_scatter_adds_the_bias_once(gloo_pair, strategy):
    errs = gloo_pair.run("scatter", strategy, 21, (17, 30), 20, "row", "row", (15, 6), 0, (), 2, True)
    assert max(errs) < TOL, errs


def test_matmul_reduce_scatter_over_another_dim(gloo_pair):
    errs = gloo_pair.run("scatter", "overlap", 6, (8, 8), 10, "row", "row", None, 1, (3,))
    assert max(errs) < TOL, errs


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_gradients_through_both(gloo_pair, strategy):
    for errs in gloo_pair.run("gradients", strategy, (12, 5), 24, 16):
        assert max(errs.values()) < TOL, errs


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_fp8_blocks_with_scales(gloo_pair, strategy):
    assert max(gloo_pair.run("scaled_gather", strategy, (12, 7), 64, 24)) < 1e-2
    assert max(gloo_pair.run("scaled_scatter", strategy, 16, (32, 48), 20)) < 1e-2


def test_scaled_calls_refuse_gradients_and_bad_scales(gloo_pair):
    assert gloo_pair.run("scaled_refused") == [True, True]


@pytest.mark.parametrize("rows", [16, 13])       # even and uneven chunks
def test_dtensor_arguments_give_dtensor_results(gloo_pair, rows):
    for errs in gloo_pair.run("dtensors", rows, 24, 10):
        assert max(errs) < TOL, errs


def test_dtensor_column_parallel_product(gloo_pair):
    for errs in gloo_pair.run("dtensor_columns", 12, 16, 20):
        assert max(errs) < TOL, errs


def test_argument_errors_name_the_argument(gloo_pair):
    assert gloo_pair.run("errors") == [8, 8]


@pytest.mark.parametrize("which", ["gather", "scatter"])
def test_a_late_rank_gives_a_timeout_error(gloo_pair, which):
    waited = gloo_pair.run("late_rank", which, 1.0)[0]
    assert waited < 10, waited
