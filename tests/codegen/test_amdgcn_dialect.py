"""codegen/amdgcn_dialect.py (render only): AMD's OpenCL dialect turns on half precision, names the gfx
target in its build note, packs raw bits into builtin operand vectors and spells MFMA / RDNA3 WMMA."""
from __future__ import annotations

import pytest

from gemm_engine.codegen.amdgcn_dialect import MFMA, WMMA_GFX11, AmdgcnOpenCLDialect
from gemm_engine.codegen.device import nominal_opencl_device
from gemm_engine.codegen.dialect import dialect_for

CDNA = dialect_for(nominal_opencl_device("gfx90a"))


def test_dialect_for_amd_devices():
    assert isinstance(CDNA, AmdgcnOpenCLDialect)
    assert isinstance(dialect_for(nominal_opencl_device("gfx1100")), AmdgcnOpenCLDialect)


def test_preamble_enables_fp16_first():
    assert CDNA.preamble([]).startswith("#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n")


@pytest.mark.parametrize("target", ["gfx90a", "gfx942", "gfx1100"])
def test_compile_note_names_target(target):
    note = dialect_for(nominal_opencl_device(target)).compile_note("")
    assert f"-mcpu={target}" in note and note.startswith("/*") and note.endswith("*/\n")


def test_pack_reinterprets_vectors_and_casts_one():
    assert AmdgcnOpenCLDialect.pack("half4", 4, ["a", "b", "c", "d"], "ushort") == "as_half4((ushort4)(a, b, c, d))"
    assert AmdgcnOpenCLDialect.pack("float", 1, ["x"], "uint") == "(float)(x)"


@pytest.mark.parametrize("kind", sorted(MFMA))
def test_mfma_statement(kind):
    assert CDNA.mfma(kind, "acc", "a", "b") == f"acc = {MFMA[kind][0]}(a, b, acc, 0, 0, 0);"


@pytest.mark.parametrize("kind", sorted(WMMA_GFX11))
def test_wmma_gfx11_statement(kind):
    assert CDNA.wmma_gfx11(kind, "c", "a", "b") == f"c = {WMMA_GFX11[kind][0]}(a, b, c);"
    assert WMMA_GFX11[kind][0].endswith("_w32")


def test_unknown_kind_refused():
    with pytest.raises(KeyError):
        CDNA.mfma("s8", "acc", "a", "b")
