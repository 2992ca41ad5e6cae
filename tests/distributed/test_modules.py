"""ColumnParallelLinear -> gelu -> RowParallelLinear on two gloo processes against the two nn.Linear
of one process: the output, the input's gradient and every parameter's gradient (each rank's part),
sequence-parallel (all-gather / reduce-scatter fused with the GEMMs) or replicated (all-reduce)."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("strategy, sequence_parallel", [("sequential", True), ("overlap", True),
                                                         ("auto", False)])
def test_the_parallel_mlp_equals_one_process(gloo_pair, strategy, sequence_parallel):
    for errs in gloo_pair.run("mlp", strategy, sequence_parallel, 8, 3, 32, 64):
        assert max(errs.values()) < 1e-5, errs
