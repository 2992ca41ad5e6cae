"""global_/read/async_loader.py: the chunk loader's setup -- 16-byte chunks of the operand in its
global layout (which axis is contiguous per operand and layout), the copy width from the alignment
(register path under 4 bytes), the refusals naming the operand -- and its lines arithmetic."""
from __future__ import annotations

import dataclasses
import re

import pytest

from gemm_engine.dtypes import BY_NAME, FLOAT16, FLOAT32, INT8
from gemm_engine.errors import SetupError
from gemm_engine.global_.read.async_loader import ChunkLoader, ChunkOperandTile
from gemm_engine.global_.read.loaders import OperandTile
from gemm_engine.problem import Layout
from gemm_engine.tile.swizzle import ChunkSwizzle


def _tile(ident="lhs", et=FLOAT16, layout=Layout.ROW, rows=64, cols=32, align=8, ld=None, smem_word=None):
    contiguous = cols if layout is Layout.ROW else rows
    return ChunkOperandTile(ident, et, layout, rows, cols, False, False, ld or contiguous + 16 // et.itemsize,
                            k_along_rows=ident == "rhs", smem_word=smem_word or et.storage, align=align)


def test_lines_follow_the_global_layout():
    row, col = _tile(), _tile(layout=Layout.COL)
    assert (row.lines, row.contiguous_extent, row.line_axis) == (64, 32, "rows")
    assert (col.lines, col.contiguous_extent, col.line_axis) == (32, 64, "cols")
    assert row.k_contiguous and not col.k_contiguous                  # lhs: k is its columns
    assert _tile("rhs", layout=Layout.COL).k_contiguous
    assert row.smem_index("r", "c") == "(r) * 40 + (c)" and col.smem_index("r", "c") == "(c) * 72 + (r)"
    loader = ChunkLoader()
    assert loader.k_contiguous(Layout.ROW, True) and loader.k_contiguous(Layout.COL, False)
    assert not loader.k_contiguous(Layout.ROW, False)


@pytest.mark.parametrize("et, align, vec, piece, registers", [
    (FLOAT16, 8, 8, 8, False), (FLOAT16, 2, 8, 2, False), (FLOAT16, 1, 8, 1, True),
    (FLOAT32, 4, 4, 4, False), (INT8, 16, 16, 16, False), (INT8, 2, 16, 2, True),
])
def test_chunks_and_copy_width(et, align, vec, piece, registers):
    cfg = ChunkLoader().setup(_tile(et=et, align=align, cols=64), 128)
    assert (cfg.vec, cfg.piece, cfg.registers, cfg.size) == (vec, piece, registers, et.itemsize)
    assert cfg.chunks_per_line == 64 // vec and cfg.line_step == 128 // cfg.chunks_per_line
    assert cfg.tasks == -(-(64 * cfg.chunks_per_line) // 128)
    assert cfg.smem_bytes == 64 * cfg.operand.smem_ld * et.itemsize


def test_refusals_name_the_operand_and_reason():
    loader = ChunkLoader()
    plain = OperandTile("lhs", FLOAT16, Layout.ROW, 64, 32, False, False, 40, False, smem_word="f16_bits")
    with pytest.raises(SetupError, match="needs a ChunkOperandTile"):
        loader.setup(plain, 128)
    with pytest.raises(SetupError, match="copies bits; float16 would need converting to f32"):
        loader.setup(_tile(smem_word="f32"), 128)
    with pytest.raises(SetupError, match="lhs: lines of 12 elements"):
        loader.setup(_tile(cols=12), 128)
    with pytest.raises(SetupError, match="rhs: lines of 32 elements \\(ld 36\\)"):
        loader.setup(_tile("rhs", ld=36), 128)
    with pytest.raises(SetupError, match="rhs: 102 units do not tile lines of 4 chunks"):
        loader.setup(_tile("rhs"), 102)
    assert loader.setup(_tile(et=BY_NAME["bfloat16"]), 128).vec == 8


# -- swizzled lines (ChunkOperandTile.swizzle): where every unit's every task puts its chunk
class _Names:
    """Stands in for a dialect in `ChunkLoader.declare`: types and shared addresses as written."""

    @staticmethod
    def c_type(word: str) -> str:
        return "T"

    @staticmethod
    def shared_address(pointer: str) -> str:
        return pointer


def _swizzled(ident, layout, rows, cols):
    contiguous = cols if layout is Layout.ROW else rows
    return ChunkOperandTile(ident, FLOAT16, layout, rows, cols, False, False, contiguous,
                            k_along_rows=ident == "rhs", smem_word=FLOAT16.storage, align=8,
                            swizzle=ChunkSwizzle(contiguous * 2, 2))


@pytest.mark.parametrize("ident, layout, rows, cols, units", [
    ("lhs", Layout.ROW, 128, 32, 128),    # 64-byte lines, 32 lines a task step
    ("rhs", Layout.ROW, 32, 128, 128),    # 256-byte lines, 8 lines a step
    ("rhs", Layout.ROW, 32, 256, 128),    # 512-byte lines, 4 lines a step: odd tasks get their own address
    ("lhs", Layout.COL, 64, 32, 256),     # 128-byte lines, 32 lines a step
    ("rhs", Layout.COL, 32, 64, 64),      # 64-byte lines, 16 lines a step
])
def test_swizzled_chunks_land_where_the_swizzle_says(ident, layout, rows, cols, units):
    op = _swizzled(ident, layout, rows, cols)
    loader = ChunkLoader()
    cfg = loader.setup(op, units)
    src = type("Src", (), {"ptr": "P", "ld": "LD"})
    declared = loader.declare(cfg, _Names, src, "S", "0", "0")
    addresses = dict(re.findall(r"const unsigned (\w+) = &S\[(.*?)\];", declared.replace("\n", " ")))
    p, sw, cpl = f"{ident}_ld8", op.swizzle, cfg.chunks_per_line
    assert (f"{p}_dst1" in addresses) == (cfg.line_step % 8 != 0)
    seen = set()
    for unit in range(units):
        env = {f"{p}_line0": unit // cpl, f"{p}_off0": unit % cpl * cfg.vec}
        env.update({name: eval(index, {}, env) * 2 for name, index in addresses.items()})
        for t in range(cfg.tasks):
            line = unit // cpl + t * cfg.line_step
            got = eval(loader._task_dst(cfg, t, "1"), {}, env)
            assert got == cfg.smem_bytes + sw.byte_of(line, unit % cpl * cfg.vec), (unit, t)
            seen.add(got)
    assert len(seen) == op.lines * cpl      # a permutation of the slot's chunks


def test_swizzled_lines_must_be_the_stage_rows():
    op = _swizzled("lhs", Layout.ROW, 128, 32)
    with pytest.raises(SetupError, match="swizzled lines of 128 bytes, but the stage's rows are 64 bytes"):
        ChunkLoader().setup(dataclasses.replace(op, swizzle=ChunkSwizzle(128, 2)), 128)
