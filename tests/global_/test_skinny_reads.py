"""global_/skinny_reads.py: `read_global` run on PoCL for every element type and width -- one vector
load, each element in its compute type, bit-exact against numpy -- and `clamped`."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BFLOAT16, FLOAT16, FLOAT32, FLOAT64, ml_dtype
from gemm_engine.global_.skinny_reads import clamped, read_global
from helpers import cl_run

#: The widths the skinny level reads (selector/skinny.py VECTOR_WIDTHS), and scalars.
CASES = [(FLOAT32, np.float32, 4), (FLOAT32, np.float32, 2), (FLOAT32, np.float32, 1), (FLOAT64, np.float64, 2),
         (FLOAT16, np.float16, 8), (FLOAT16, np.float16, 4), (FLOAT16, np.float16, 1), (BFLOAT16, "bfloat16", 8),
         (BFLOAT16, "bfloat16", 4)]


@pytest.mark.parametrize("et, dtype, width", CASES, ids=lambda x: getattr(x, "name", str(x)))
def test_read_global_on_pocl(opencl_engine, rng, et, dtype, width):
    dtype = ml_dtype(dtype) if isinstance(dtype, str) else np.dtype(dtype)
    if dtype is None:
        pytest.skip("ml_dtypes is not installed")
    d = dialect_for(opencl_engine.device)
    statements, elements = read_global(d, et, "src", "i * " + str(width), width, "v")
    assert len(elements) == width
    compute = d.compute_type(et)
    src_t = d.storage_type(et)
    body = "\n    ".join(statements + [f"out[i * {width} + {j}] = {e};" for j, e in enumerate(elements)])
    source = d.preamble([et]) + f"""
__kernel void read(__global const {src_t}* src, __global {compute}* out) {{
    const int i = get_global_id(0);
    {body}
}}
"""
    count = 16
    x = rng.standard_normal(count * width).astype(dtype)
    held = x.view(np.uint16) if et is BFLOAT16 else x
    out_dtype = np.float64 if et is FLOAT64 else np.float32
    got = cl_run(opencl_engine, source, "read", [held, np.zeros(count * width, out_dtype)], count)
    np.testing.assert_array_equal(got, x.astype(out_dtype))


def test_clamped():
    assert clamped("i", "n", "n - 1", False) == "i"
    assert clamped("i", "n", "n - 4", True) == "i < n ? i : n - 4"
