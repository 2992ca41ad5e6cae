"""codegen/signature.py: Param rendering and conversion, KernelSignature's checks, order and packing,
and a Packer agreeing with a full pack."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.codegen.signature import (ARRAY, BY_VALUE, INDEX, SCALAR, KernelSignature, Param, array, index,
                                           operand_params)

CUDA = dialect_for(nominal_cuda_device())
OPENCL = dialect_for(DeviceInfo("opencl", "cpu", 2, 65536, 1024, 32))


def _sig() -> KernelSignature:
    return KernelSignature((*operand_params("a", "bf16_bits"), *operand_params("c", "f32", writable=True),
                            *index("m", "n"), Param("alpha", SCALAR, "f32"),
                            Param("map", BY_VALUE, size=128, align=64)))


def test_operand_params_are_base_offset_ld_and_batch_stride():
    params = operand_params("x", "f16_bits", writable=True)
    assert [p.name for p in params] == ["x_base", "x_offset", "x_ld", "x_batch_stride"]
    assert params[0].kind == ARRAY and params[0].writable and params[0].word == "f16_bits"
    assert all(p.kind == INDEX for p in params[1:])


@pytest.mark.parametrize("d, const_array, written", [
    (CUDA, "const GLOBAL unsigned short* RESTRICT a_base", "GLOBAL float* RESTRICT c_base"),
    (OPENCL, "const GLOBAL ushort* RESTRICT a_base", "GLOBAL float* RESTRICT c_base")])
def test_render_each_kind(d, const_array, written):
    text = _sig().render(d)
    lines = text.split(",\n    ")
    assert len(lines) == len(_sig().params)
    assert lines[0] == const_array and lines[4] == written
    assert lines[1] == "i64 a_offset" and "float alpha" in lines
    assert lines[-1].endswith("map") and "ge_bytes128_a64" in lines[-1]


def test_by_value_param_is_grid_constant_on_cuda_and_its_struct_is_defined_on_use():
    d = dialect_for(nominal_cuda_device())
    text = Param("tmap", BY_VALUE, size=128, align=64).render(d)
    assert text == "const __grid_constant__ ge_bytes128_a64 tmap"
    helpers = d.helpers_for(f"KERNEL void k({text}) {{}}")
    assert "struct __align__(64) ge_bytes128_a64 { unsigned char bytes[128]; };" in helpers


def test_unknown_kind_is_refused_by_name():
    with pytest.raises(ValueError, match="weird"):
        Param("weird", "pointer").render(CUDA)


def test_convert_by_kind():
    assert type(Param("n", INDEX).convert(7)) is np.int64
    assert type(Param("s", SCALAR, "f32").convert(0.1)) is np.float32
    assert Param("s", SCALAR, "f64").convert(0.1) == np.float64(0.1)
    marker = object()
    assert Param("p", ARRAY, "f32").convert(marker) is marker
    assert Param("b", BY_VALUE, size=4).convert(bytearray(b"abcd")) == b"abcd"
    with pytest.raises(ValueError, match="b: expected 4 bytes, got 3"):
        Param("b", BY_VALUE, size=4).convert(b"abc")


def test_duplicate_names_are_refused():
    with pytest.raises(ValueError, match=r"\['m'\]"):
        KernelSignature((*index("m", "n"), *index("m")))
    sig = KernelSignature(index("m"))
    with pytest.raises(ValueError):
        sig.extended(*index("m"))


def test_extended_appends_in_order_and_positions_find_names():
    sig = KernelSignature(index("m", "n")).extended(array("w", "f32", True), *index("k"))
    assert sig.names == ("m", "n", "w", "k")
    assert sig.positions(["k", "m"]) == (3, 0)
    with pytest.raises(ValueError):
        sig.positions(["nope"])


def _values():
    return {"a_base": "A", "a_offset": 1, "a_ld": 2, "a_batch_stride": 3, "c_base": "C", "c_offset": 4, "c_ld": 5,
            "c_batch_stride": 6, "m": 7, "n": 8, "alpha": 0.5, "map": bytes(range(128))}


def test_pack_orders_and_converts_and_names_what_is_missing():
    sig = _sig()
    packed = sig.pack(_values())
    assert packed[0] == "A" and packed[4] == "C"
    assert [int(x) for x in packed[1:4]] == [1, 2, 3] and type(packed[8]) is np.int64
    assert type(packed[10]) is np.float32 and packed[11] == bytes(range(128))
    values = _values()
    del values["n"], values["c_ld"]
    with pytest.raises(KeyError, match=r"\['c_ld', 'n'\]"):
        sig.pack(values)


def test_packer_fills_only_the_changing_values_and_agrees_with_pack():
    sig = _sig()
    fixed = {k: v for k, v in _values().items() if k not in ("a_base", "c_base", "alpha")}
    packer = sig.packer(fixed)
    assert packer.changing_names == ("a_base", "c_base", "alpha")
    assert packer.fixed == fixed and packer.fixed is not fixed
    call = {"a_base": "A2", "c_base": "C2", "alpha": 2.0}
    assert packer.pack(call) == sig.pack({**fixed, **call})
    # The template is not changed by a call: a second call with other values packs those.
    assert packer.pack({"a_base": "A3", "c_base": "C3", "alpha": 3.0})[0] == "A3"
    assert packer.pack(call)[0] == "A2"
