"""The one-launch split-K batch level: the last cube of each tile adds the ranges' partial sums in
range order, through the epilogue; the same bits every call; its counters left zero; one kernel."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.algorithms import REGISTRY
from gemm_engine.batch.split_k_fixup import SplitKFixupBatchMatmul
from gemm_engine.quant import quantize
from helpers import BF16, rel_error


def test_last_cube_adds_in_order(opencl_engine, rng):
    if BF16 is None:
        pytest.skip("bfloat16 needs ml_dtypes")
    e = opencl_engine
    q = quantize(rng.standard_normal((1000, 40)), "int4", 32, symmetric=False, scale_dtype="bfloat16")
    x = rng.standard_normal((3, 1000)).astype(BF16)
    bias = rng.standard_normal(40).astype(np.float32)
    alg = REGISTRY["quantized_decode_split_k"](split_k=4, column_loads=1, unroll=1)
    assert isinstance(alg.components, SplitKFixupBatchMatmul)
    ys = [e.quantized_matmul(x, q, algorithm=alg, bias=bias, activation="relu") for _ in range(3)]
    cfg = e.last_choice[1]
    assert cfg.batch.splits == 4
    assert all(np.array_equal(y, ys[0]) for y in ys[1:])                     # deterministic
    ref = np.maximum(x.astype(np.float64) @ q.dequantize(rounded_to="bfloat16").astype(np.float64) + bias, 0)
    assert rel_error(ys[0], ref) < 1e-5                                    # float32 result (bias is float32)
    tiles = alg.components.tiles(cfg.batch, e.problem_for(x, q))
    launches = alg.launches(cfg, e.problem_for(x, q))
    assert len(launches) == 1 and launches[0].cubes == tiles * 4
    kept = e.runtime.kept_scratch(tiles, np.int32)
    assert not e.runtime.download(kept, np.int32)[:tiles].any()             # every counter reset
