"""numpy's rules: the result dtype and out_dtype, named in every message."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.call.numpy_rules import result_types


@pytest.mark.parametrize("out_dtype", ["no_such_dtype", np.complex64, np.int64, "float8_e4m3fn"])
def test_bad_out_dtypes_name_out_dtype(opencl_engine, out_dtype):
    a = np.ones((2, 2), np.float32)
    with pytest.raises(TypeError, match="out_dtype"):
        opencl_engine.matmul(a, a, out_dtype=out_dtype)


def test_the_one_dtype_rule():
    f32, i8 = np.dtype(np.float32), np.dtype(np.int8)
    assert result_types(i8, i8).result == np.int32
    assert result_types(i8, i8, scales="vector").result == np.float32            # W8A8
    assert result_types(np.float16, np.float16, scales="block").product == np.float32
    assert result_types(f32, f32, c=np.float64).result == np.float64
    assert result_types(f32, f32, c=i8).result == np.float32                      # int8 c: float result
    with pytest.raises(TypeError, match="floating-point result"):
        result_types(i8, i8, c=f32)
    assert result_types(i8, i8, c=f32, out_dtype=np.float32).result == np.float32
    with pytest.raises(TypeError, match="casting rule 'safe'"):
        result_types(f32, f32, out_dtype=np.float16, casting="safe")
