"""global_/read/tma_loader.py: the TMA loader's setup (boxes of one 128-byte row by the tile's
lines, copies per slot, bytes a slot receives, shares among cluster cubes) and refusals, the L2
promotion rule, and the tensor-map spec of an operand (extents, byte strides, box, batch)."""
from __future__ import annotations

import pytest

from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT16, FLOAT32, FLOAT64, INT8
from gemm_engine.errors import SetupError
from gemm_engine.global_.read.swizzled_loader import SwizzledOperandTile
from gemm_engine.global_.read.tma_loader import MAX_BOX, TmaLoader, l2_promotion
from gemm_engine.problem import Layout
from gemm_engine.tile.wgmma import SwizzledOperandLayout

SM90 = dialect_for(nominal_cuda_device(9, 0))


def _tile(et=FLOAT16, layout=Layout.ROW, rows=128, cols=64, align=8, ident="lhs", line_extent=0):
    mn_major = (layout is Layout.COL) == (ident == "lhs")
    swz = SwizzledOperandLayout(mn_major, rows if ident == "lhs" else cols, cols if ident == "lhs" else rows,
                                et.itemsize)
    return SwizzledOperandTile(ident, et, layout, rows, cols, False, False, 0, k_along_rows=ident == "rhs",
                               smem_word=et.storage, align=align, swizzle=swz, line_extent=line_extent)


@pytest.mark.parametrize("tile, copies, box", [
    (_tile(), 1, (64, 128)),                                   # K-major lhs: one 128-byte run of k
    (_tile(cols=128), 2, (64, 128)),
    (_tile(layout=Layout.COL, rows=128, cols=64, align=8), 2, (64, 64)),   # MN-major: 64 m by stage_k lines
    (_tile(FLOAT32, cols=32, align=4), 1, (32, 128)),
    (_tile(INT8, cols=128, align=16), 1, (128, 128)),
])
def test_boxes_and_copies(tile, copies, box):
    cfg = TmaLoader().setup(tile, 128)
    assert cfg.units == 1 and cfg.copies == copies == cfg.tasks and cfg.box == box
    assert cfg.issued == copies
    assert cfg.slot_bytes == tile.contiguous_extent * tile.lines * tile.element.itemsize
    assert cfg.smem_bytes == tile.swizzle.smem_bytes


@pytest.mark.parametrize("extent, read", [(32, 32), (1, 8), (17, 24), (64, 64), (127, 128), (128, 128), (5000, 128),
                                          (0, 128)])
def test_lines_past_the_problem_are_left_unread(extent, read):
    """A problem with fewer rows (K-major lhs) than the tile's lines: each copy reads whole 8-line
    swizzle atoms up to them and the slot expects only those bytes; the smem layout is the tile's."""
    cfg = TmaLoader().setup(_tile(cols=128, line_extent=extent), 128)
    assert cfg.box == (64, read) and cfg.lines_read == read
    assert cfg.slot_bytes == 2 * 64 * read * 2 and cfg.smem_bytes == 128 * 128 * 2
    # Shared (multicast) slots split the lines among the cubes: they read all of them.
    assert TmaLoader().setup(_tile(cols=128, line_extent=extent), 128, shared_by=2).box == (64, 128)


def test_shared_slots_split_copies_or_lines_among_cubes():
    two = TmaLoader().setup(_tile(cols=128), 128, shared_by=2)
    assert two.line_split == 1 and two.issued == 1 and two.box == (64, 128)
    split = TmaLoader().setup(_tile(cols=64), 128, shared_by=2)
    assert split.line_split == 2 and split.box == (64, 64) and split.issued == 1
    with pytest.raises(SetupError, match="cannot share a 8-line tile"):
        TmaLoader().setup(_tile(rows=8, cols=64), 128, shared_by=2)


def test_a_96_column_mn_major_tile_takes_three_64_byte_boxes():
    """A row-major rhs of 96 columns a warpgroup (64-byte swizzle, tile/wgmma.py `operand_swizzle`):
    three 32-wide boxes by stage_k lines, each one 32-wide atom (64 rows x 64 bytes) on, the map's
    swizzle 64; two cubes of a cluster split each copy's lines (three copies do not divide), at
    multiples of the 512-byte atom."""
    swz = SwizzledOperandLayout(True, 96, 64, 2, 64)
    tile = SwizzledOperandTile("rhs", FLOAT16, Layout.ROW, 64, 96, False, False, 0, k_along_rows=True,
                               smem_word="f16_bits", align=8, swizzle=swz)
    cfg = TmaLoader().setup(tile, 128)
    assert (cfg.copies, cfg.box, cfg.slot_bytes) == (3, (32, 64), 96 * 64 * 2)
    src = TmaLoader().issue(cfg, SM90, "rhs_map", "0", "slot", "bar", "k0", "n0")
    assert [f"slot + {j * 4096}u" in src for j in (1, 2)] == [True, True] and "n0 + 64" in src
    assert TmaLoader.tensor_map_spec(cfg, 1536, 1536, 1536, 0, 1).swizzle == 64
    shared = TmaLoader().setup(tile, 128, shared_by=2)
    assert (shared.line_split, shared.box, shared.issued) == (2, (32, 32), 3)
    assert "(rank) * 2048u" in TmaLoader().issue(shared, SM90, "rhs_map", "0", "slot", "bar", "k0", "n0",
                                                  "rank")


def test_refusals():
    loader = TmaLoader()
    with pytest.raises(SetupError, match="aligned to 4"):
        loader.setup(_tile(align=4), 128)
    with pytest.raises(SetupError, match="got float64"):
        loader.setup(_tile(FLOAT64, align=2), 128)
    with pytest.raises(SetupError, match=f"at most {MAX_BOX} lines"):
        loader.setup(_tile(rows=512), 128)
    with pytest.raises(SetupError, match="not whole boxes"):
        loader.setup(_tile(cols=32), 128)


def test_l2_promotion():
    assert l2_promotion(8192) == 256 and l2_promotion(8192 + 64) == 128 and l2_promotion(128) == 256


@pytest.mark.parametrize("layout, ld, batch_stride, batch", [(Layout.ROW, 4096, 0, 1), (Layout.ROW, 4104, 4104 * 1000, 3),
                                                             (Layout.COL, 1024, 0, 4)])
def test_tensor_map_spec(layout, ld, batch_stride, batch):
    cfg = TmaLoader().setup(_tile(layout=layout, rows=128, cols=64), 128)
    rows, cols = 1000, 4096 if layout is Layout.ROW else 1024
    spec = TmaLoader.tensor_map_spec(cfg, rows, cols, ld, batch_stride, batch)
    contiguous, lines = (cols, rows) if layout is Layout.ROW else (rows, cols)
    assert spec.word == "f16_bits" and spec.swizzle == 128
    assert spec.dims == (contiguous, lines, batch if batch_stride else 1)
    assert spec.strides == (ld * 2, batch_stride * 2 if batch_stride else ld * 2 * lines)
    assert spec.box == (*cfg.box, 1) and spec.l2_promotion == l2_promotion(ld * 2)
