"""The distributed GEMMs on more than two ranks, where the rings take more than one step and the peer
strategy's reduce-scatter sums several arrivals: three gloo processes on the CPU (an odd group, in
CI), and every GPU of a host with three or more over NCCL (the GPU machines; skipped elsewhere).
Shard sizes differ per rank and one rank's is empty; every result is compared with the float64
product of the whole on every rank (dist_tasks.py)."""
from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

TOL = 1e-4          # float32 products of K <= 1024 terms, every element written (a lost block is O(1))


def _gloo_three():
    import dist_pool
    dist_pool.require_gloo_engine()
    return 3, "gloo", ("sequential", "overlap")


def _nccl_every_gpu():
    if "cuda" not in os.environ.get("GEMM_ENGINE_TEST_BACKENDS", "cuda"):
        pytest.skip("backend cuda excluded by GEMM_ENGINE_TEST_BACKENDS")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count < 3:
        pytest.skip(f"more than two CUDA GPUs of one host wanted; this machine has {count}")
    return count, "nccl", ("peer", "overlap", "sequential", "auto")


@pytest.fixture(scope="module", params=["gloo x 3", "nccl x every GPU"])
def world(request):
    size, backend, strategies = (_gloo_three if request.param.startswith("gloo") else _nccl_every_gpu)()
    import dist_pool
    pool = dist_pool.Pool(size, backend=backend)
    try:
        yield pool, size, strategies
    finally:
        pool.close()


def _uneven(size: int, first: int, step: int, empty: int):
    """Per-rank sizes first, first + step, ... with rank ``empty``'s zero."""
    return tuple(0 if r == empty else first + step * r for r in range(size))


@pytest.mark.parametrize("k, n, layouts, big", [
    (96, 40, ("row", "row"), False),
    (64, 24, ("col", "col"), False),
    (1024, 512, ("row", "row"), True),           # blocks large enough for the GPU's tiled kernels
])
def test_all_gather_matmul(world, k, n, layouts, big):
    pool, size, strategies = world
    sizes = _uneven(size, 512 if big else 7, 64 if big else 5, empty=1)
    for strategy in strategies:
        errs = pool.run("gather", strategy, sizes, k, n, *layouts, 0, (), True, True, 3)
        assert max(errs) < TOL, (strategy, errs)


@pytest.mark.parametrize("n, layouts, big", [
    (20, ("row", "row"), False),
    (24, ("col", "row"), False),
    (512, ("row", "row"), True),
])
def test_matmul_reduce_scatter(world, n, layouts, big):
    """Every rank's partial of every block reaches the block's owner once (the bias added once)."""
    pool, size, strategies = world
    k_sizes = _uneven(size, 256 if big else 9, 32 if big else 4, empty=size - 1)
    rows = _uneven(size, 384 if big else 3, 64 if big else 2, empty=0)
    for strategy in strategies:
        errs = pool.run("scatter", strategy, sum(rows), k_sizes, n, *layouts, rows, 0, (), 3, True)
        assert max(errs) < TOL, (strategy, errs)


def test_gradients_and_the_mlp_block(world):
    pool, size, strategies = world
    for strategy in strategies:
        for errs in pool.run("gradients", strategy, _uneven(size, 6, 3, empty=2), 24, 8):
            assert max(errs.values()) < TOL, (strategy, errs)
        for errs in pool.run("mlp", strategy, True, 4 * size, 2, 32, 16 * size):
            assert max(errs.values()) < TOL, (strategy, errs)


def test_fp8_blocks_with_scales(world):
    """Per-row scale_a gathered with (or summed over) the blocks, bfloat16 partial sums."""
    pool, size, strategies = world
    for strategy in strategies:
        assert max(pool.run("scaled_gather", strategy, _uneven(size, 12, 5, empty=1), 64, 24)) < 1e-2, strategy
        assert max(pool.run("scaled_scatter", strategy, 16 * size, _uneven(size, 32, 16, empty=0), 40)) < 1e-2, \
            strategy


def test_calls_back_to_back_without_host_synchronization(world):
    pool, size, strategies = world
    for strategy in strategies:
        errs = pool.run("back_to_back", strategy, _uneven(size, 160, 48, empty=size - 1), 96, 64)
        assert max(errs) < TOL, (strategy, errs)
