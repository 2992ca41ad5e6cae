"""dtypes.py: element types by dtype (and the refusal naming what is supported), the widened
results of int8 and fp8, the bit dtypes device libraries move bfloat16 / fp8 as, and word sizes."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.dtypes import (BY_NAME, FP8_NAMES, SUPPORTED_NAMES, WIDENED, WORD_BYTES, bits_dtype, device_dtype,
                                element_type, is_fp8, ml_dtype, numpy_dtype, operand_dtypes)


@pytest.mark.parametrize("name", SUPPORTED_NAMES + ("int32",))
def test_element_types_round_trip_and_sizes_agree(name):
    dt = ml_dtype(name) if name in ("bfloat16",) + FP8_NAMES else np.dtype(name)
    if dt is None:
        pytest.skip("ml_dtypes is not installed")
    et = element_type(dt)
    assert et is BY_NAME[name] and et.name == name
    assert et.itemsize == dt.itemsize == WORD_BYTES[et.storage]
    assert numpy_dtype(et) == dt
    assert element_type(dt.name if name not in ("bfloat16",) + FP8_NAMES else dt) is et


@pytest.mark.parametrize("bad", [np.int16, np.uint8, np.complex64, np.bool_])
def test_unsupported_dtypes_are_refused_naming_the_supported(bad):
    with pytest.raises(TypeError, match=f"unsupported dtype '{np.dtype(bad).name}'.*float32, float64"):
        element_type(bad)


def test_compute_words():
    assert BY_NAME["float16"].compute == BY_NAME["bfloat16"].compute == "f32"
    assert BY_NAME["int8"].compute == "i32" and BY_NAME["float64"].compute == "f64"
    assert all(BY_NAME[n].compute == "f32" for n in FP8_NAMES)


def test_widened_results():
    assert WIDENED[np.dtype(np.int8)] == np.dtype(np.int32)
    for name in FP8_NAMES:
        if ml_dtype(name) is not None:
            assert WIDENED[ml_dtype(name)] == np.dtype(np.float32)
    assert np.dtype(np.float16) not in WIDENED


def test_operand_dtypes_keep_widened_operands_else_promote():
    i8, f32, f64 = np.dtype(np.int8), np.dtype(np.float32), np.dtype(np.float64)
    assert operand_dtypes(i8, i8, np.int32) == (i8, i8)
    assert operand_dtypes(f32, f64, f64) == (f64, f64)
    assert operand_dtypes(i8, f32, f32) == (f32, f32)
    e4, e5 = ml_dtype("float8_e4m3fn"), ml_dtype("float8_e5m2")
    if e4 is not None:
        assert operand_dtypes(e4, e5, f32) == (e4, e5)
        assert operand_dtypes(e4, i8, f32) == (f32, f32)     # not both of one widened family


def test_bits_and_device_dtypes():
    assert bits_dtype(np.float32) is None and bits_dtype(np.int8) is None
    assert device_dtype(BY_NAME["float16"]) == np.float16
    bf = ml_dtype("bfloat16")
    if bf is not None:
        assert bits_dtype(bf) == np.uint16 and device_dtype(BY_NAME["bfloat16"]) == np.uint16
        assert bits_dtype(ml_dtype("float8_e5m2")) == np.uint8 and device_dtype(BY_NAME["float8_e4m3fn"]) == np.uint8


def test_is_fp8():
    assert not is_fp8(np.float16) and not is_fp8("not a dtype") and not is_fp8(object())
    if ml_dtype("float8_e4m3fn") is not None:
        assert is_fp8(ml_dtype("float8_e4m3fn")) and is_fp8("float8_e5m2")
