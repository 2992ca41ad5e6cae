"""global_/read/loaders.py: OperandTile's indexing and guarded reads, LoaderConfig's bytes, and the
cyclic and tilewise task loaders run alone on PoCL: every unit runs the tasks, and the stage must
hold each tile element (k-major, zero outside the operand) wherever the tile lies."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.batch.base import OperandRef
from gemm_engine.codegen.device import DeviceInfo
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT16, FLOAT32, FLOAT64
from gemm_engine.errors import SetupError
from gemm_engine.global_.read.loaders import CyclicLoader, LoaderConfig, OperandTile, TilewiseLoader
from gemm_engine.problem import Layout
from helpers import run_loader

CL = dialect_for(DeviceInfo("opencl", "cpu", 2, 65536, 1024, 32))


def _tile(ident="lhs", et=FLOAT32, layout=Layout.ROW, rows=16, cols=8, checks=(True, True), pad=4):
    k_rows = ident == "rhs"
    ld = (cols if k_rows else rows) + pad
    return OperandTile(ident, et, layout, rows, cols, *checks, ld, k_along_rows=k_rows)


def test_indexing_follows_layout_and_orientation():
    lhs = _tile()
    assert lhs.global_index("r", "c", "ld") == "(r) * ld + (c)"
    assert _tile(layout=Layout.COL).global_index("r", "c", "ld") == "(c) * ld + (r)"
    assert lhs.smem_index("r", "c") == "(c) * 20 + (r)" and lhs.k_extent == 8
    rhs = _tile("rhs")
    assert rhs.smem_index("r", "c") == "(r) * 12 + (c)" and rhs.k_extent == 16


def test_reads_are_guarded_only_on_checked_axes_and_convert():
    src = OperandRef("p", "ld")
    assert _tile(checks=(False, False)).read(CL, src, "gr", "gc", "M", "K") == "p[(gr) * ld + (gc)]"
    guarded = _tile(checks=(True, False)).read(CL, src, "gr", "gc", "M", "K")
    assert guarded.startswith("(gr < M) ? (float)(") and "gc < K" not in guarded
    half = _tile(et=FLOAT16, checks=(False, False))
    assert half.converts and "f16_to_f32" in half.read(CL, src, "gr", "gc", "M", "K")   # half as ushort bits
    raw = OperandTile("lhs", FLOAT16, Layout.ROW, 16, 8, True, False, 20, False, smem_word="f16_bits")
    assert not raw.converts and raw.read(CL, src, "a", "b", "M", "K").endswith(": (ushort)0")   # raw bits


def test_smem_bytes():
    assert LoaderConfig(_tile(), 64, 2).smem_bytes == 8 * 20 * 4
    assert LoaderConfig(_tile("rhs", et=FLOAT64), 64, 2).smem_bytes == 16 * 12 * 8


def test_setup_counts_tasks_and_refuses_bad_unit_counts():
    assert CyclicLoader().setup(_tile(), 48).tasks == -(-128 // 48)
    with pytest.raises(SetupError, match="cyclic: needs at least one unit"):
        CyclicLoader().setup(_tile(), 0)
    assert TilewiseLoader(32).setup(_tile(), 64).tasks == 2
    with pytest.raises(SetupError, match="48 units are not whole groups of 32"):
        TilewiseLoader(32).setup(_tile(), 48)


@pytest.mark.parametrize("loader, units, ident, layout", [
    (CyclicLoader(), 48, "lhs", Layout.ROW), (CyclicLoader(), 32, "rhs", Layout.COL),
    (TilewiseLoader(8), 48, "lhs", Layout.COL), (TilewiseLoader(32), 64, "rhs", Layout.ROW),
], ids=["cyclic-lhs-row", "cyclic-rhs-col", "tilewise8-lhs-col", "tilewise32-rhs-row"])
def test_loaders_fill_the_stage_on_pocl(opencl_engine, rng, loader, units, ident, layout):
    tile = _tile(ident, layout=layout, rows=13 if ident == "lhs" else 8, cols=8 if ident == "lhs" else 13)
    cfg = loader.setup(tile, units)
    src = rng.standard_normal((20, 19)).astype(np.float32)
    # Inside, straddling both edges, one element left.
    for got, want in run_loader(opencl_engine, loader, cfg, src, [(0, 0), (12, 9), (19, 18)]):
        mask = ~np.isnan(want)
        np.testing.assert_array_equal(got[mask], want[mask].astype(np.float32))
