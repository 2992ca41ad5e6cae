"""The rings of gemm_engine/distributed/order.py simulated for every group size: each rank multiplies
every block once, sends only what it holds, receives exactly what its neighbour sends at that step,
and the reduce-scatter brings every rank's partial of a block to the block's owner."""
from __future__ import annotations

import pytest

from gemm_engine.distributed.order import blocks_of, even_blocks, gather_steps, scatter_steps


@pytest.mark.parametrize("world", range(1, 7))
def test_the_gather_ring_delivers_every_block_before_its_gemm(world):
    held = {r: {r} for r in range(world)}
    computed = {r: [] for r in range(world)}
    steps = {r: gather_steps(r, world) for r in range(world)}
    for s in range(world):
        for r in range(world):
            st = steps[r][s]
            assert st.block in held[r], (r, s)
            computed[r].append(st.block)
            if st.send is not None:
                assert st.send in held[r]
                peer = steps[st.to][s]
                assert peer.receive == st.send and peer.source == r
        for r in range(world):
            if steps[r][s].receive is not None:
                held[r].add(steps[r][s].receive)
    for r in range(world):
        assert computed[r][0] == r                      # the local block's GEMM starts at once
        assert sorted(computed[r]) == list(range(world))


@pytest.mark.parametrize("world", range(1, 7))
def test_the_scatter_ring_sums_every_rank_into_each_owner(world):
    steps = {r: scatter_steps(r, world) for r in range(world)}
    inbox = {r: None for r in range(world)}            # (block, contributors) arrived for the next step
    result = {}
    for s in range(world):
        sent = {}
        for r in range(world):
            st = steps[r][s]
            acc = {r}
            if inbox[r] is not None:
                block, contributors = inbox[r]
                assert block == st.block, (r, s)
                acc |= contributors
            if st.send is None:
                assert st.block == r
                result[r] = acc
            else:
                assert st.send == st.block
                sent[st.to] = (st.block, acc)
        for r in range(world):
            if steps[r][s].receive is not None:
                assert sent[r][0] == steps[r][s].receive
            inbox[r] = sent.get(r)
    assert result == {r: set(range(world)) for r in range(world)}


def test_blocks_checks_sizes_and_names_the_argument():
    b = blocks_of([3, 0, 5], 3)
    assert b.starts == (0, 3, 3) and b.total == 8 and b.rows(2) == slice(3, 8) and not b.even
    with pytest.raises(ValueError, match="shard_sizes: expected one size per rank"):
        blocks_of([1, 2], 3)
    with pytest.raises(ValueError, match="shard_sizes: sizes must be non-negative"):
        blocks_of([1, -2], 2)
    with pytest.raises(ValueError, match="scatter_dim.*do not split evenly"):
        even_blocks(7, 2, "x's dim 0 (scatter_dim)")
