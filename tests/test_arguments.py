"""Arguments as numpy takes them: lists and Python scalars for a, b, c and bias; numpy's casting
rules for out_dtype and out; numpy's results for empty vectors; errors that name the argument."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.dtypes import bfloat16_dtype
from helpers import random, reference, rel_error


def test_lists_and_scalars_as_numpy_takes_them(engine):
    got = engine.matmul([[1.0, 2.0], [3.0, 4.0]], [[1.0], [2.0]])
    np.testing.assert_allclose(got, [[5.0], [11.0]])
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((3, 2), np.float32)
    np.testing.assert_allclose(engine.matmul(a, b, c=1.0), a @ b + 1)            # c broadcasts
    np.testing.assert_allclose(engine.matmul(a, b, bias=[1.0, -1.0]), a @ b + [1, -1])
    np.testing.assert_allclose(engine.matmul(a, b, c=[[1.0], [2.0]], beta=2.0), a @ b + [[2.0], [4.0]])


@pytest.mark.parametrize("value", [1.0, 1, 2.5])
@pytest.mark.parametrize("name", ["c"])     # bias is one value per output row or column (1-D)
def test_python_numbers_keep_the_operands_dtype(engine, name, value):
    """numpy's rule for Python numbers (NEP 50): float32 operands and ``c=1.0`` give float32, as
    ``a @ b + 1.0`` does in numpy; a Python int is accepted the same way."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((3, 2), np.float32)
    got = engine.matmul(a, b, **{name: value})
    assert got.dtype == (a @ b + value).dtype == np.float32
    np.testing.assert_allclose(got, a @ b + value)


@pytest.mark.parametrize("name, value, needle", [("bias", "abc", "bias has dtype"),
                                                 ("c", [object()], "c must be numbers"),
                                                 ("bias", [1.0, 2.0, 3.0], "bias must be 1-D with one value per output")])
def test_bad_epilogue_arguments_are_named(engine, name, value, needle):
    a, b = np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)
    with pytest.raises((TypeError, ValueError), match=needle):
        engine.matmul(a, b, **{name: value})


def test_out_dtype_follows_numpys_casting_rule(engine, rng):
    a, b = random(rng, (4, 5), "float32"), random(rng, (5, 3), "float32")
    with pytest.raises(TypeError, match="from dtype\\('float32'\\) to out_dtype dtype\\('int32'\\) with casting rule 'same_kind'"):
        engine.matmul(a, b, out_dtype=np.int32)
    with pytest.raises(TypeError, match="casting rule 'safe'"):
        engine.matmul(a, b, out_dtype=np.float16, casting="safe")
    got = engine.matmul(a, b, out_dtype=np.int32, casting="unsafe")   # numpy's truncation, asked for
    assert got.dtype == np.int32
    with pytest.raises(TypeError, match="casting rule 'same_kind'"):
        engine.matmul(a, b, out=np.empty((4, 3), np.int32))
    with pytest.raises(ValueError, match="casting: expected"):
        engine.matmul(a, b, casting="sometimes")


def test_empty_vectors_give_numpys_scalar(engine):
    got = engine.matmul(np.ones(0, np.float32), np.ones(0, np.float32))
    want = np.matmul(np.ones(0, np.float32), np.ones(0, np.float32))
    assert type(got) is type(want) and got == want


def test_bfloat16_product_is_bfloat16_by_the_librarys_rule(engine, rng):
    bf16 = bfloat16_dtype()
    if bf16 is None:
        pytest.skip("ml_dtypes is not installed")
    a, b = random(rng, (8, 16), "bfloat16"), random(rng, (16, 4), "bfloat16")
    assert np.matmul(a, b).dtype == np.float32          # numpy with ml_dtypes promotes...
    assert engine.matmul(a, b).dtype == bf16             # ...a GEMM library keeps bfloat16 (documented)
    got = engine.matmul(a, b, out_dtype=np.float32)       # numpy's result type, asked for
    assert got.dtype == np.float32 and rel_error(got, reference(a, b)) < 1e-2
