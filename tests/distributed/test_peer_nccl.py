"""The peer strategy (distributed/peer.py) on two GPUs over NCCL: equal to the float64 product of
the whole on every rank, for uneven and empty shards, both layouts, several calls in a row (both
buffer sets, the flags' counters), gradients and the MLP block; "auto" (its rule is
test_collective.py's) equal too. Runs where
two CUDA GPUs are (the GPU machines); skipped elsewhere. On gloo it is refused by name."""
from __future__ import annotations

import os
import time

import pytest

torch = pytest.importorskip("torch")

from gemm_engine.distributed import collective  # noqa: E402

TOL = 1e-4          # float32 products of K <= 1024 terms, every element written (a lost block is O(1))


@pytest.fixture(scope="module")
def nccl_pair():
    if "cuda" not in os.environ.get("GEMM_ENGINE_TEST_BACKENDS", "cuda"):
        pytest.skip("backend cuda excluded by GEMM_ENGINE_TEST_BACKENDS")
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("the peer strategy runs on two CUDA GPUs of one host; this machine has fewer")
    import dist_pool
    pool = dist_pool.Pool(2, backend="nccl")
    try:
        yield pool
    finally:
        pool.close()


def test_peer_is_refused_off_cuda_by_name():
    with pytest.raises(ValueError, match="strategy='peer' cannot run here: not a CUDA device"):
        collective.choose("peer", torch.device("cpu"), 64, 2)
    assert collective.choose("auto", torch.device("cpu"), 1 << 30, 2) == "sequential"


@pytest.mark.parametrize("strategy", ["peer", "auto"])
@pytest.mark.parametrize("sizes, k, n, layouts", [
    ((1024, 1024), 2048, 512, ("row", "row")),
    ((130, 77), 96, 40, ("col", "row")),          # uneven shards, a column-major shard
    ((0, 96), 64, 24, ("row", "col")),            # an empty shard, a column-major w
])
def test_all_gather_matmul_peer(nccl_pair, strategy, sizes, k, n, layouts):
    errs = nccl_pair.run("gather", strategy, sizes, k, n, *layouts, 0, (), True, True, 3)
    assert max(errs) < TOL, errs


@pytest.mark.parametrize("strategy", ["peer", "auto"])
@pytest.mark.parametrize("m, k_sizes, n, sizes, layouts", [
    (2048, (1024, 1024), 1024, None, ("row", "row")),
    (21, (17, 30), 20, (15, 6), ("col", "col")),   # uneven row blocks and contraction slices
    (9, (8, 8), 12, (0, 9), ("row", "row")),       # an empty block
])
def test_matmul_reduce_scatter_peer(nccl_pair, strategy, m, k_sizes, n, sizes, layouts):
    errs = nccl_pair.run("scatter", strategy, m, k_sizes, n, *layouts, sizes, 0, (), 3)
    assert max(errs) < TOL, errs


@pytest.mark.parametrize("strategy", ["peer", "sequential"])
def test_matmul_reduce_scatter_adds_the_bias_once_peer(nccl_pair, strategy):
    errs = nccl_pair.run("scatter", strategy, 2048, (1024, 1024), 1024, "row", "row", None, 0, (), 3, True)
    assert max(errs) < TOL, errs


def test_fp8_blocks_with_scales_peer(nccl_pair):
    assert max(nccl_pair.run("scaled_gather", "peer", (96, 33), 128, 48)) < 1e-2
    assert max(nccl_pair.run("scaled_scatter", "peer", 64, (64, 96), 40)) < 1e-2


def test_auto_takes_the_peer_strategy_across_streams_and_growing_shapes(nccl_pair):
    """With auto's threshold at 0 (in the workers): auto runs the peer strategy (its buffer's call
    count moves), on the default stream and a side stream in turn, the shapes growing (the buffer
    made again), both kinds; equal to the whole product."""
    for errs in nccl_pair.run("auto_peer"):
        assert max(errs) < TOL, errs


@pytest.mark.parametrize("strategy", ["peer", "auto"])
def test_calls_back_to_back_without_host_synchronization_peer(nccl_pair, strategy):
    """Six pairs of calls enqueued while the GPU is held, alternating streams, checked at the end."""
    errs = nccl_pair.run("back_to_back", strategy, (300, 211), 96, 64)
    assert max(errs) < TOL, errs


def test_gradients_through_both_peer(nccl_pair):
    for errs in nccl_pair.run("gradients", "peer", (12, 5), 24, 16):
        assert max(errs.values()) < TOL, errs


def test_mlp_block_peer(nccl_pair):
    for errs in nccl_pair.run("mlp", "peer", True, 8, 2, 32, 64):
        assert max(errs.values()) < TOL, errs


def test_a_rank_that_never_sends_stops_the_wait_with_an_error():
    """Last, on a pool of its own: rank 0's wait for a block that never comes stops its CUDA context
    within seconds (the kernel prints which rank's block did not arrive: seen in the GPU run's log;
    torch's NCCL watchdog then ends the process), rather than hanging."""
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("the peer strategy runs on two CUDA GPUs of one host; this machine has fewer")
    import dist_pool
    pool = dist_pool.Pool(2, backend="nccl")
    start = time.monotonic()
    try:
        answers = pool.run("late_peer", 1.0)
    except dist_pool.PoolStopped as stopped:
        assert stopped.ended == [0], str(stopped)       # the process ended: bounded, not hung
    else:
        waited, message = answers[0]
        assert waited < 30 and message, answers       # or the error reached Python first
    finally:
        pool.close()
    assert time.monotonic() - start < 60
