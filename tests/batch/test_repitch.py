"""batch/repitch.py: the row copy's widths, grid and bit types, and the statements it renders (one load
per row held before any store, vector words only where the width allows, an element-wise tail)."""
from __future__ import annotations

import pytest

from gemm_engine.batch.repitch import LANES, ROWS, UNITS, VECTORS, bits_type, body, copy_width, cubes
from gemm_engine.codegen.device import nominal_cuda_device, nominal_opencl_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME

CUDA = dialect_for(nominal_cuda_device(9, 0))
OCL = dialect_for(nominal_opencl_device("gpu"))


def test_tile_constants_agree():
    assert ROWS == UNITS // LANES * VECTORS


@pytest.mark.parametrize("dtype, align, width", [
    ("float16", 8, 8), ("float16", 4, 4), ("float16", 2, 2), ("float16", 1, 1), ("float16", 64, 8),
    ("float32", 4, 4), ("float32", 1, 1), ("float64", 2, 2), ("float64", 1, 1),
    ("float8_e4m3fn", 16, 16), ("float8_e4m3fn", 4, 4), ("float8_e4m3fn", 2, 1)])
def test_copy_width_widest_word_alignment_allows(dtype, align, width):
    assert copy_width(BY_NAME[dtype], align) == width


def test_cubes_cover_every_tile_of_every_entry():
    assert cubes(1, ROWS, 8 * LANES, 8) == 1
    assert cubes(1, ROWS + 1, 8 * LANES, 8) == 2
    assert cubes(3, ROWS, 8 * LANES + 1, 8) == 3 * 2
    assert cubes(0, 0, 0, 1) == 1


def test_bits_type_by_size_and_backend():
    assert [bits_type(CUDA, s) for s in (1, 2, 4, 8)] == ["unsigned char", "unsigned short", "unsigned int",
                                                          "unsigned long long"]
    assert bits_type(OCL, 8) == "ulong"
    with pytest.raises(KeyError):
        bits_type(CUDA, 3)


def render(d, dtype, width):
    return body(d, BY_NAME[dtype], width, "src", "ld", "bs", "dst", "rows", "len", "pitch", "entries")


@pytest.mark.parametrize("d", [CUDA, OCL], ids=["cuda", "opencl"])
def test_loads_before_stores_with_tail(d):
    lines = render(d, "float16", 8)
    loads = [i for i, s in enumerate(lines) if "cp_x" in s and s.lstrip().startswith(("float", "unsigned"))]
    stores = [i for i, s in enumerate(lines) if s.startswith("if (cp_whole")]
    assert len(loads) == len(stores) == VECTORS and max(loads) < min(stores)
    assert all("for (i64 e = 0" in lines[i] for i in stores)       # a partial last vector, element by element
    assert any("if (cp_b >= entries) return;" in s for s in lines)
    assert "float4 cp_x0" in "\n".join(lines)                # 8 halves = 16 bytes = one float4 word


def test_width_one_copies_elements_without_tail():
    text = "\n".join(render(CUDA, "float16", 1))
    assert "unsigned short cp_x0" in text and "for (i64 e" not in text
    assert "cp_src[(cp_r + 0) * (ld)]" in text


def test_one_float_word_for_four_bytes():
    text = "\n".join(render(CUDA, "float16", 2))
    assert "float cp_x0" in text and "(*(const GLOBAL float*)(cp_src +" in text
