"""global_/read/vector_loader.py: the vector width rule (alignment, knob, problem extent, tile and
shared-memory row, scalar for converted types) and the loader alone on PoCL with whole-vector and
transposing stores, the tile inside and over the operand's edges (branch-free zero fill)."""
from __future__ import annotations

import dataclasses
import types

import numpy as np
import pytest

from gemm_engine.batch.base import OperandRef
from gemm_engine.codegen.device import DeviceInfo
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT16, FLOAT32, FLOAT64
from gemm_engine.global_.read.loaders import OperandTile
from gemm_engine.global_.read.vector_loader import VectorLoader
from gemm_engine.problem import Layout
from helpers import run_loader


def _tile(ident="rhs", et=FLOAT32, layout=Layout.ROW, rows=8, cols=16, align=4, extent=64, pad=4):
    k_rows = ident == "rhs"
    ld = (cols if k_rows else rows) + pad
    return OperandTile(ident, et, layout, rows, cols, True, True, ld, k_along_rows=k_rows, align=align,
                       extent=extent)


@pytest.mark.parametrize("tile, cap, width", [
    (_tile(), 4, 4), (_tile(), 2, 2), (_tile(), 1, 1),
    (_tile(align=2), 4, 2),                           # the operand's alignment
    (_tile(extent=66), 4, 2),                         # a vector must not straddle the problem's edge
    (_tile(cols=6), 4, 2),                            # nor the tile's contiguous extent
    (_tile(pad=2), 4, 2),                             # nor a shared-memory row
    (_tile(et=FLOAT64), 4, 2),                        # 16 bytes at most
    (_tile(et=FLOAT16), 4, 1),                        # converted: scalar
    (_tile(layout=Layout.COL, rows=8, cols=16), 4, 4),
])
def test_width_rule(tile, cap, width):
    assert VectorLoader.width(tile, cap) == width
    cfg = VectorLoader().setup(tile, 32, types.SimpleNamespace(vector_width=cap))
    assert cfg.width == width and cfg.tasks == -(-(tile.rows * tile.cols // width) // 32)


def test_no_selection_means_scalar():
    assert VectorLoader().setup(_tile(), 32).width == 1


def test_stores_whole_vectors_only_along_shared_memory_rows():
    d = dialect_for(DeviceInfo("opencl", "cpu", 2, 65536, 1024, 32))
    sel = types.SimpleNamespace(vector_width=4)
    whole = VectorLoader().tasks(VectorLoader().setup(_tile(), 32, sel), d, OperandRef("p", "ld"), "s", "0", "0", "M", "N")
    assert "(*(__local float4*)(s + " in whole[0]
    lhs = _tile("lhs", rows=16, cols=8)
    split = VectorLoader().tasks(VectorLoader().setup(lhs, 32, sel), d, OperandRef("p", "ld"), "s", "0", "0", "M", "N")
    assert "float4" in split[0] and "__local float4" not in split[0] and "v.w" in split[0]
    assert " if (" not in split[0].split("{", 1)[1]          # no branch around the read itself


@pytest.mark.parametrize("ident, layout", [("rhs", Layout.ROW), ("lhs", Layout.ROW), ("lhs", Layout.COL)])
def test_loader_alone_on_pocl(opencl_engine, rng, ident, layout):
    rows, cols = (8, 16) if ident == "rhs" else (16, 8)
    shape = (24, 20) if layout is Layout.ROW else (20, 24)        # the contiguous extent a multiple of 4
    tile = dataclasses.replace(_tile(ident, layout=layout, rows=rows, cols=cols), extent=shape[1 if layout is Layout.ROW else 0])
    cfg = VectorLoader().setup(tile, 32, types.SimpleNamespace(vector_width=4))
    assert cfg.width == 4
    src = rng.standard_normal(shape).astype(np.float32)
    corners = [(0, 0), (shape[0] - rows // 2, 4 if layout is Layout.ROW else 3),
               (3 if layout is Layout.ROW else 4, shape[1] - 4)]
    for got, want in run_loader(opencl_engine, VectorLoader(), cfg, src, corners):
        mask = ~np.isnan(want)
        np.testing.assert_array_equal(got[mask], want[mask].astype(np.float32))
