"""global_/read/swizzled_loader.py: the swizzled chunk loader's setup (chunks per 128-byte line,
tasks, copy width, shared bytes from the swizzled layout) and refusals, and where each chunk lands:
every chunk of the stage at a distinct 16-byte slot inside it (the XOR swizzle is a permutation)."""
from __future__ import annotations

import pytest

from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT16, FLOAT32, FLOAT64, INT8
from gemm_engine.errors import SetupError
from gemm_engine.global_.read.swizzled_loader import SwizzledChunkLoader, SwizzledOperandTile
from gemm_engine.problem import Layout
from gemm_engine.tile.wgmma import SwizzledOperandLayout

SM90 = dialect_for(nominal_cuda_device())


def _tile(et=FLOAT16, layout=Layout.ROW, rows=128, cols=64, align=8, ident="lhs"):
    mn_major = (layout is Layout.COL) == (ident == "lhs")
    extent = rows if ident == "lhs" else cols
    stage_k = cols if ident == "lhs" else rows
    swz = SwizzledOperandLayout(mn_major, extent, stage_k, et.itemsize)
    return SwizzledOperandTile(ident, et, layout, rows, cols, False, False, 0, k_along_rows=ident == "rhs",
                               smem_word=et.storage, align=align, swizzle=swz)


@pytest.mark.parametrize("et, units, cpl, tasks", [(FLOAT16, 128, 8, 8), (FLOAT32, 128, 16, 16), (INT8, 256, 4, 2)])
def test_setup_arithmetic(et, units, cpl, tasks):
    cfg = SwizzledChunkLoader().setup(_tile(et), units)
    assert cfg.vec == 16 // et.itemsize and cfg.chunks_per_line == cpl and cfg.tasks == tasks
    assert cfg.step == units // cpl and cfg.smem_bytes == cfg.operand.swizzle.smem_bytes
    assert not cfg.registers


def test_refusals():
    loader = SwizzledChunkLoader()
    with pytest.raises(SetupError, match="needs a SwizzledOperandTile"):
        loader.setup(SwizzledOperandTile("lhs", FLOAT16, Layout.ROW, 8, 8, False, False, 0, False), 32)
    with pytest.raises(SetupError, match="copies int8, fp8, 16-bit or 32-bit float elements; got float64"):
        loader.setup(_tile(FLOAT64), 128)
    with pytest.raises(SetupError, match="lhs: 100 units do not tile lines of 64 elements"):
        loader.setup(_tile(), 100)
    with pytest.raises(SetupError, match="chunks do not split over 512 units"):
        loader.setup(_tile(rows=32), 512)


@pytest.mark.parametrize("layout, ident", [(Layout.ROW, "lhs"), (Layout.COL, "lhs"), (Layout.ROW, "rhs")])
def test_every_chunk_lands_in_its_own_slot(layout, ident):
    tile = _tile(layout=layout, ident=ident, rows=64 if ident == "lhs" else 64, cols=64)
    loader = SwizzledChunkLoader()
    cfg = loader.setup(tile, 128)
    slots = set()
    p, cpl = f"{ident}_sw", cfg.chunks_per_line
    for unit in range(cfg.units):
        env = {f"{p}_line0": unit // cpl, f"{p}_cc": unit % cpl}
        env[f"{p}_dst"] = eval(loader._offset(cfg, f"{p}_line0").replace("(unsigned)", ""), {}, env)
        for t in range(cfg.tasks):
            slots.add(eval(loader._dst(cfg, t).replace("(unsigned)", ""), {}, env))
    total = tile.lines * cfg.chunks_per_line
    assert len(slots) == total
    assert all(s % 16 == 0 and 0 <= s < cfg.smem_bytes for s in slots)
