"""runtime/tensor_map.py with a stand-in driver binding (no GPU, no cuda-bindings): what the encoder
passes cuTensorMapEncodeTiled for a spec, its cache (per address and spec, least recently used
first out), and a driver error naming the address."""
from __future__ import annotations

import ctypes

import pytest

from gemm_engine.runtime import tensor_map
from gemm_engine.runtime.tensor_map import MAP_BYTES, TensorMapEncoder, TensorMapSpec


class _Names:
    def __getattr__(self, name):
        return name


class _Map:
    def __init__(self, fill: int):
        self.buf = ctypes.create_string_buffer(bytes([fill]) * MAP_BYTES, MAP_BYTES)

    def getPtr(self):
        return ctypes.addressof(self.buf)


class _Driver:
    CUtensorMapDataType = CUtensorMapInterleave = CUtensorMapSwizzle = CUtensorMapL2promotion = _Names()
    CUtensorMapFloatOOBfill = _Names()

    def __init__(self, err=0):
        self.calls, self.err = [], err

    @staticmethod
    def cuuint64_t(x):
        return ("u64", x)

    @staticmethod
    def cuuint32_t(x):
        return ("u32", x)

    def cuTensorMapEncodeTiled(self, *args):
        self.calls.append(args)
        return self.err, _Map(len(self.calls))


def _encoder(driver):
    enc = TensorMapEncoder()
    enc._driver = driver
    return enc


SPEC = TensorMapSpec("bf16_bits", dims=(4096, 1024), strides=(8192,), box=(64, 128), swizzle=128, l2_promotion=256)


def test_encode_passes_the_spec_to_the_driver():
    drv = _Driver()
    data = _encoder(drv).encode(0x7000_0000, SPEC)
    assert data == bytes([1]) * MAP_BYTES
    [args] = drv.calls
    (dtype, rank, address, dims, strides, box, elem_strides, interleave, swizzle, promotion, fill) = args
    assert dtype == "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16" and rank == 2 and address == 0x7000_0000
    assert dims == [("u64", 4096), ("u64", 1024)] and strides == [("u64", 8192)]
    assert box == [("u32", 64), ("u32", 128)] and elem_strides == [("u32", 1)] * 2
    assert swizzle == "CU_TENSOR_MAP_SWIZZLE_128B" and promotion == "CU_TENSOR_MAP_L2_PROMOTION_L2_256B"
    assert interleave == "CU_TENSOR_MAP_INTERLEAVE_NONE" and fill == "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE"


@pytest.mark.parametrize("word, name", [("f32", "FLOAT32"), ("i8", "UINT8"), ("f8e5m2", "UINT8"), ("f16_bits", "FLOAT16")])
def test_element_words_map_to_driver_types(word, name):
    drv = _Driver()
    _encoder(drv).encode(0, TensorMapSpec(word, (16, 16), (64,), (16, 16), swizzle=0, l2_promotion=0))
    assert drv.calls[0][0] == f"CU_TENSOR_MAP_DATA_TYPE_{name}"
    assert drv.calls[0][8] == "CU_TENSOR_MAP_SWIZZLE_NONE" and drv.calls[0][9] == "CU_TENSOR_MAP_L2_PROMOTION_NONE"


def test_maps_are_cached_per_address_and_spec(monkeypatch):
    monkeypatch.setattr(tensor_map, "_CACHE_MAX", 2)
    drv = _Driver()
    enc = _encoder(drv)
    a = enc.encode(0x1000, SPEC)
    assert enc.encode(0x1000, SPEC) is a and len(drv.calls) == 1
    enc.encode(0x2000, SPEC)
    enc.encode(0x1000, SPEC)                        # the most recent again
    enc.encode(0x1000, TensorMapSpec("bf16_bits", (4096, 1024), (8192,), (64, 64)))   # another box
    assert len(drv.calls) == 3
    enc.encode(0x1000, SPEC)
    assert len(drv.calls) == 3                      # kept
    enc.encode(0x2000, SPEC)
    assert len(drv.calls) == 4                      # was dropped


def test_a_driver_error_names_the_address():
    with pytest.raises(RuntimeError, match="cuTensorMapEncodeTiled failed .* address 0xabc0"):
        _encoder(_Driver(err=1)).encode(0xABC0, SPEC)


def test_readdressed_rewrites_only_addresses_it_can_tell_apart():
    from gemm_engine.runtime.tensor_map import MAP_BYTES, readdressed

    def m(address):
        return address.to_bytes(8, "little") + b"\x07" * (MAP_BYTES - 8)
    old = (0x1000, 0x2000, 0x3000)
    assert readdressed([m(0x1000), m(0x2000), m(0x3000)], old, (0x5000, 0x6000, 0x7000)) == [m(0x5000), m(0x6000), m(0x7000)]
    assert readdressed([m(0x1000)], old, (0x5008, 0x6000, 0x7000)) is None            # not 16-byte aligned
    assert readdressed([m(0x1800)], old, (0x5000, 0x6000, 0x7000)) is None            # not one of the old addresses
    assert readdressed([m(0x1000)], (0x1000, 0x1000, 0x3000), (0x5000, 0x6000, 0x7000)) is None   # a shared one split
    assert readdressed([m(0x1000)], (0x1000, 0x1000, 0x3000), (0x5000, 0x5000, 0x7000)) == [m(0x5000)]
    zero = bytes(MAP_BYTES)        # an output TMA could not address: kept only at the same alignments
    assert readdressed([zero], (0x1000, 0x2000, 0x3008), (0x5000, 0x6000, 0x7008)) == [zero]
    assert readdressed([zero], (0x1000, 0x2000, 0x3008), (0x5000, 0x6000, 0x7000)) is None
    assert readdressed([b"short"], old, old) is None
