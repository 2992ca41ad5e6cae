"""A one-rank gloo group in the test process (a HashStore: no sockets, no workers), for tests of the
distributed modules' steps that need an initialized torch.distributed but no peers."""
from __future__ import annotations

import pytest


@pytest.fixture
def gloo_world_of_one():
    torch = pytest.importorskip("torch")
    dist = torch.distributed
    if not dist.is_available():
        pytest.skip("torch.distributed is not available in this torch build")
    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


class TorchEngine:
    """An engine stand-in computing with torch (the steps under test, not the engine's kernels);
    counts its calls."""

    def __init__(self):
        self.calls = 0

    def compute(self, a, b, out=None, bias=None):
        self.calls += 1
        y = a.double() @ b.double()
        if bias is not None:
            y = y + bias.double()
        y = y.to(out.dtype if out is not None else a.dtype)
        if out is None:
            return y
        out.copy_(y)
        return out
