"""runtime/cuda_launch.py without a GPU: ByValueBlock's aligned structure buffers and refill, and
the per-position slot encoders agreeing with the slot values of the runtime's converted arguments.
(ParamBlock slots and PreparedLaunch with a stand-in driver: tests/codegen/test_cuda_launch.py.)"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from gemm_engine.runtime.cuda_launch import ByValueBlock, _slot_value, slot_encoder


class _Array:
    class data:
        ptr = 0x7F00_0000_2000


def test_by_value_arguments_point_at_aligned_copies_and_refill():
    first = bytes(range(128))
    block = ByValueBlock((np.int64(5), first, np.float32(2.0), bytes(64)))
    [(pos, address, size), (pos2, _, size2)] = block.by_value
    assert (pos, size, pos2, size2) == (1, 128, 3, 64)
    assert address % 64 == 0 and block.addresses[1] == address
    assert ctypes.string_at(address, 128) == first
    # Plain slots keep pointing at their 8-byte slots.
    assert block.addresses[0] == ctypes.addressof(block.slots) and block.addresses[2] == ctypes.addressof(block.slots) + 16
    second = bytes(reversed(range(128)))
    block.fill((0, second, 0, bytes(range(64))))
    assert ctypes.string_at(address, 128) == second
    with pytest.raises(ValueError, match="kernel argument 1: 100 bytes, the block holds 128"):
        block.fill((0, bytes(100), 0, bytes(64)))


@pytest.mark.parametrize("prepared, new", [
    (np.float32(1.0), 0.1), (np.float32(1.0), np.float32(-3.5)), (np.float32(1.0), 1e39),   # past float32: inf
    (np.float64(1.0), -0.1), (np.float64(1.0), np.float64(2.0) ** 70),
    (np.int64(3), 2 ** 40), (np.int64(3), np.int64(-7)),
])
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_encoders_write_what_the_runtimes_conversion_would(prepared, new):
    encode = slot_encoder(prepared)
    converted = type(prepared)(new)                 # what the runtime's Param.convert makes of it
    want = _slot_value(converted, _Array)
    got = encode(new)
    # The slot is 8 bytes; a float parameter reads only the low 4.
    mask = 0xFFFF_FFFF if type(prepared) is np.float32 else (1 << 64) - 1
    assert got & mask == want & mask


def test_array_positions_take_arrays_or_addresses():
    encode = slot_encoder(_Array())
    assert encode(_Array()) == _Array.data.ptr and encode(0x1234) == 0x1234
