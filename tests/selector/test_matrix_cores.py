"""selector/matrix_cores.py: the AMD / Intel matrix-core tiling (2 x 2 planes, stage_k by operand width)."""
from __future__ import annotations

import pytest

from gemm_engine.codegen.device import nominal_opencl_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.selector.matrix_cores import select_matrix_tiling

AMD = dialect_for(nominal_opencl_device("gfx90a"))


def problem(dtype):
    et = BY_NAME[dtype]
    return MatmulProblem(1, 256, 256, 256, et, et, et, Layout.ROW, Layout.ROW)


@pytest.mark.parametrize("dtype, stage_k", [("float16", 32), ("bfloat16", 32), ("float32", 16), ("float64", 16)])
def test_stage_k_by_operand_width(dtype, stage_k):
    t = select_matrix_tiling(problem(dtype), AMD, 16)
    assert t == dict(planes_m=2, planes_n=2, partition_m=2, partition_n=2, stage_k=stage_k)


@pytest.mark.parametrize("rows, partition_m", [(16, 2), (8, 4), (32, 1), (64, 1)])
def test_partition_m_covers_32_rows(rows, partition_m):
    assert select_matrix_tiling(problem("float16"), AMD, rows)["partition_m"] == partition_m
