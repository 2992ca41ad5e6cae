"""tensors.py: torch dtypes both ways, bit views for bfloat16 / fp8, host results as tensors, and
which calls go to the torch ops (torch_op_wanted). Skipped without torch."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.dtypes import ml_dtype
from gemm_engine.tensors import host_tensor, is_torch, numpy_torch_dtype, torch_bits, torch_numpy_dtype, torch_op_wanted

torch = pytest.importorskip("torch")


def test_is_torch_tells_tensors_and_parameters_from_others():
    assert is_torch(torch.zeros(2)) and is_torch(torch.nn.Parameter(torch.zeros(2)))
    assert not is_torch(np.zeros(2)) and not is_torch([1.0])


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "int8", "int32"])
def test_plain_dtypes_both_ways(name):
    assert torch_numpy_dtype(getattr(torch, name)) == np.dtype(name)
    assert numpy_torch_dtype(np.dtype(name)) == getattr(torch, name)


def test_ml_dtypes_types_and_bit_views():
    bf = ml_dtype("bfloat16")
    if bf is None:
        pytest.skip("ml_dtypes is not installed")
    assert torch_numpy_dtype(torch.bfloat16) == bf
    t = torch.tensor([1.0, -2.5, 3.0e38], dtype=torch.bfloat16)
    bits = torch_bits(t)
    assert bits.dtype == torch.int16
    np.testing.assert_array_equal(bits.numpy().view(np.uint16), t.float().numpy().astype(bf).view(np.uint16))
    f8 = torch.tensor([0.5, -448.0], dtype=torch.float8_e4m3fn)
    assert torch_bits(f8).dtype == torch.uint8 and torch_numpy_dtype(torch.float8_e4m3fn) == ml_dtype("float8_e4m3fn")
    plain = torch.zeros(3)
    assert torch_bits(plain) is plain


def test_host_tensor_keeps_values_shape_and_bfloat16():
    bf = ml_dtype("bfloat16")
    got = host_tensor(np.array([[1.5, -2.0]], np.float32), "cpu")
    assert got.dtype == torch.float32 and got.shape == (1, 2) and got.tolist() == [[1.5, -2.0]]
    scalar = host_tensor(np.float64(3.25), "cpu")
    assert scalar.shape == () and scalar.item() == 3.25
    if bf is not None:
        b = host_tensor(np.array([1.0, 0.5], bf), "cpu")
        assert b.dtype == torch.bfloat16 and b.tolist() == [1.0, 0.5]


def test_which_calls_go_to_the_torch_ops():
    a, b = torch.ones(2, 2), torch.ones(2, 2)
    assert not torch_op_wanted(np.ones(2), np.ones(2))
    assert not torch_op_wanted(a, b)
    g = torch.ones(2, 2, requires_grad=True)
    assert torch_op_wanted(g, b) and torch_op_wanted(a, b, (None, g, None))
    with torch.no_grad():
        assert not torch_op_wanted(g, b)
    assert not torch_op_wanted(a, b, (None, torch.ones(2), None))
    assert torch_op_wanted(a, torch.nn.Parameter(torch.ones(2, 2)))       # a parameter requires grad
    with torch.autocast("cpu"):
        assert torch_op_wanted(a, b)

    class Sub(torch.Tensor):
        pass
    assert torch_op_wanted(a, torch.ones(2, 2).as_subclass(Sub), (None,))


def test_which_calls_go_to_the_torch_ops_never_compares_tensors():
    """Identity checks only: Tensor.__eq__(None) costs a caught TypeError (12 us) in eager calls,
    and torch 2.11's Dynamo cannot trace it (its NotImplemented stops the graph)."""
    class NoEquality(torch.Tensor):
        def __eq__(self, other):
            raise AssertionError("compared with ==")
        __hash__ = torch.Tensor.__hash__

    a, b = torch.ones(2, 2), torch.ones(2, 2)
    odd = torch.ones(2).as_subclass(NoEquality)
    assert torch_op_wanted(a, b, (None, odd, None, None, None))       # a subclass goes to the ops
    assert not torch_op_wanted(a, b, (None, torch.ones(2), None, None, None))
