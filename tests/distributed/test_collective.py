"""distributed/collective.py: the strategy choice, the local GEMM's empty case, and both strategies of
both row-block collectives in a one-rank gloo group (an engine stand-in computing with torch)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from gemm_engine.distributed.collective import (STRATEGIES, all_gather_matmul_2d, choose,  # noqa: E402
                                                Product, gather_rows, matmul_reduce_scatter_2d,
                                                reduce_scatter_rows)
from gemm_engine.distributed.order import Blocks  # noqa: E402
from single_gloo import TorchEngine, gloo_world_of_one  # noqa: E402,F401

CPU = torch.device("cpu")


def test_choose_auto_is_sequential_off_cuda_and_explicit_stands():
    assert choose("auto", CPU, 1 << 30, 8) == "sequential"
    assert choose("overlap", CPU, 1, 2) == "overlap"
    assert choose("sequential", CPU, 1, 2) == "sequential"
    assert set(STRATEGIES) == {"auto", "sequential", "overlap", "peer"}


def test_auto_takes_the_peer_strategy_for_large_blocks_on_any_number_of_ranks(monkeypatch):
    from gemm_engine.distributed import collective
    monkeypatch.setattr(collective, "peer_available", lambda device, group: None)
    big, small = 64 << 20, 4 << 20        # bytes a block moves
    for world in (2, 3, 4, 8):
        assert choose("auto", CPU, big, world) == "peer"
        assert choose("auto", CPU, small, world) == "sequential"
    assert choose("auto", CPU, big, 1) == "sequential"
    monkeypatch.setattr(collective, "peer_available", lambda device, group: "no peers")
    assert choose("auto", CPU, big, 2) == "sequential"


def test_choose_refuses_unknown_strategy():
    with pytest.raises(ValueError, match="strategy"):
        choose("ring", CPU, 1, 2)


def test_product_empty_rows_skip_the_engine():
    eng = TorchEngine()
    a, b = torch.zeros((0, 3)), torch.ones((3, 5))
    assert Product(eng, b)(a, slice(0, 0)).shape == (0, 5) and eng.calls == 0
    out = torch.empty((0, 5))
    assert Product(eng, b)(a, slice(0, 0), out=out) is out
    y = Product(eng, b, bias=torch.arange(5.0))(torch.ones((2, 3)), slice(0, 2))
    assert eng.calls == 1 and torch.equal(y, 3 + torch.arange(5.0).expand(2, 5))


def test_product_takes_the_rows_of_a_per_row_scale(monkeypatch):
    seen = {}

    class Recording(TorchEngine):
        def compute(self, a, b, out=None, bias=None, **terms):
            seen.update(terms)
            return super().compute(a, b, out=out, bias=bias)
    scale = torch.arange(6.0).reshape(6, 1)
    Product(Recording(), torch.ones((3, 2)), scale_a=scale, scale_b=2.0)(torch.ones((2, 3)), slice(3, 5))
    assert torch.equal(seen["scale_a"], scale[3:5]) and seen["scale_b"] == 2.0 and "c" not in seen


@pytest.mark.parametrize("strategy", ["sequential", "overlap"])
def test_all_gather_matmul_one_rank(gloo_world_of_one, strategy):
    x, w = torch.randn(6, 4, dtype=torch.float64), torch.randn(4, 3, dtype=torch.float64)
    y, full = all_gather_matmul_2d(x, Product(TorchEngine(), w), Blocks((6,)), None, 0, strategy, timeout=5.0)
    assert torch.equal(full, x)
    torch.testing.assert_close(y, x @ w)


@pytest.mark.parametrize("strategy", ["sequential", "overlap"])
def test_matmul_reduce_scatter_one_rank(gloo_world_of_one, strategy):
    x, w = torch.randn(5, 4, dtype=torch.float64), torch.randn(4, 2, dtype=torch.float64)
    y = matmul_reduce_scatter_2d(x, Product(TorchEngine(), w), Blocks((5,)), None, 0, strategy, timeout=5.0)
    torch.testing.assert_close(y, x @ w)


def test_gather_and_reduce_scatter_rows_one_rank(gloo_world_of_one):
    x = torch.arange(12.0).reshape(4, 3)
    assert torch.equal(gather_rows(x, Blocks((4,)), None, 0), x)
    out = torch.full((4, 3), float("nan"))
    assert reduce_scatter_rows(x, Blocks((4,)), None, 0, out=out) is out and torch.equal(out, x)
