"""tuning/key.py: the anchor of a size (the smallest 2^j or 3 * 2^j at least it, exact up to 16),
checked against a brute-force search, and the key's fields: what is pooled and what is kept."""
from __future__ import annotations

import dataclasses

import pytest

from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.dtypes import FLOAT16, FLOAT32
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.tuning.key import EXACT_UP_TO, anchor, problem_key

_ANCHORS = sorted({b << j for b in (1, 3) for j in range(40)})


@pytest.mark.parametrize("size", list(range(0, 200)) + [1000, 1024, 1025, 1536, 1537, 4093, 11008, 12288, 2**31 + 1])
def test_anchor(size):
    want = size if size <= EXACT_UP_TO else next(a for a in _ANCHORS if a >= size)
    assert anchor(size) == want


def test_key_pools_sizes_and_keeps_the_rest():
    dev = nominal_cuda_device()
    p = MatmulProblem(1, 1000, 4093, 11008, FLOAT16, FLOAT16, FLOAT16, Layout.ROW, Layout.COL, 8, 1)
    key = problem_key(p, dev)
    assert key == (f"cuda|{dev.name}|sm_90|float16,float16,float16|default|row,col|align8,1|1x1024x4096x12288")
    assert problem_key(dataclasses.replace(p, m=1024, n=4096, k=12288), dev) == key
    for change in ({"m": 1025}, {"lhs_align": 4}, {"rhs_layout": Layout.ROW}, {"precision": "tf32"},
                   {"batch": 2}):
        assert problem_key(dataclasses.replace(p, **change), dev) != key
    assert problem_key(p, nominal_cuda_device(8, 0)) != key
    cl = DeviceInfo("opencl", "pocl", 2, 65536, 1024, 32)
    assert problem_key(dataclasses.replace(p, lhs=FLOAT32, rhs=FLOAT32, out=FLOAT32), cl).startswith("opencl|pocl|-|")
