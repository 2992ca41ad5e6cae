"""tile/wgmma.py: the warpgroup tile's setup (kinds per dtype, fp8 mixing, K-major-only kinds, the
instruction n, the device check), its accumulator layout (128 units hold the 64 x n tile once;
``columns`` selects whole 8-column groups), and SwizzledOperandLayout's offsets and descriptors."""
from __future__ import annotations

import re

import dataclasses
import types

import pytest

from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME, FLOAT16, FLOAT32, INT8, INT32
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.tile.wgmma import SwizzledOperandLayout, WgmmaTile, check_wgmma_device, operand_swizzle
from helpers import acc_coverage

SM90, SM80 = dialect_for(nominal_cuda_device(9, 0)), dialect_for(nominal_cuda_device(8, 0))
BF16, E4M3, E5M2 = BY_NAME["bfloat16"], BY_NAME["float8_e4m3fn"], BY_NAME["float8_e5m2"]


def _sel(tn=128):
    return types.SimpleNamespace(tile_n=tn)


def _p(lhs, rhs=None, out=None, **kw):
    """A problem with K-major operands (a column-major rhs) unless ``kw`` says otherwise."""
    kw.setdefault("rhs_layout", Layout.COL)
    return MatmulProblem(1, 256, 256, 256, lhs, rhs or lhs, out or (lhs if lhs.compute != "i32" else INT32), **kw)


@pytest.mark.parametrize("problem, kind, rhs_kind, k, compute", [
    (_p(FLOAT16), "f16", "", 16, "f32"), (_p(BF16), "bf16", "", 16, "f32"),
    (_p(FLOAT32, precision="tf32"), "tf32", "", 8, "f32"), (_p(INT8), "s8", "", 32, "i32"),
    (_p(E4M3, out=FLOAT32), "e4m3", "", 32, "f32"), (_p(E4M3, E5M2, FLOAT32), "e4m3", "e5m2", 32, "f32"),
])
def test_kinds(problem, kind, rhs_kind, k, compute):
    cfg = WgmmaTile().setup(problem, _sel(), SM90)
    assert (cfg.kind, cfg.rhs_kind, cfg.tile_m, cfg.tile_n, cfg.tile_k, cfg.compute) == (kind, rhs_kind, 64, 128, k, compute)
    assert cfg.acc_regs == 64
    assert cfg.acc_ptx == ("s32" if kind == "s8" else "f32")


def test_transposes_follow_the_layouts_for_16_bit_kinds():
    cfg = WgmmaTile().setup(_p(BF16, lhs_layout=Layout.COL, rhs_layout=Layout.ROW), _sel(64), SM90)
    assert cfg.lhs_mn_major and cfg.rhs_mn_major
    cfg = WgmmaTile().setup(_p(BF16, rhs_layout=Layout.COL), _sel(64), SM90)
    assert not cfg.lhs_mn_major and not cfg.rhs_mn_major


@pytest.mark.parametrize("problem, sel, dialect, needle", [
    (_p(FLOAT32), _sel(), SM90, "opt in with precision='tf32'"),
    (_p(INT8, rhs_layout=Layout.ROW), _sel(), SM90, "only K-major"),
    (_p(FLOAT16, BF16, FLOAT32), _sel(), SM90, "must share a dtype"),
    (_p(BY_NAME["float64"]), _sel(), SM90, "not float64"),
    (_p(FLOAT16), _sel(80), SM90, "tile_n=80"),
    (_p(FLOAT16), _sel(), SM80, "needs wgmma"),
    (_p(FLOAT16), _sel(), dialect_for(dataclasses.replace(nominal_cuda_device(), plane_size=64)), "4 warps of 32"),
])
def test_refusals(problem, sel, dialect, needle):
    with pytest.raises(SetupError) as info:
        WgmmaTile().setup(problem, sel, dialect)
    assert needle in str(info.value)


def test_k_major_requirement_is_the_kinds():
    tile = WgmmaTile()
    assert tile.requires_k_major(_p(INT8)) and tile.requires_k_major(_p(FLOAT32, precision="tf32"))
    assert not tile.requires_k_major(_p(BF16))
    check_wgmma_device("x", SM90)
    with pytest.raises(SetupError, match="x: needs wgmma"):
        check_wgmma_device("x", dialect_for(nominal_cuda_device(10, 0)))


@pytest.mark.parametrize("tn", [64, 128, 256])
def test_warpgroup_holds_the_tile_once(tn):
    tile = WgmmaTile()
    cfg = tile.setup(_p(BF16), _sel(tn), SM90)
    held = acc_coverage(tile, cfg, 128)
    assert set(held) == {(r, c) for r in range(64) for c in range(tn)}
    assert all(len(v) == 1 for v in held.values())


def test_columns_select_whole_groups():
    tile = WgmmaTile()
    cfg = tile.setup(_p(BF16), _sel(64), SM90)
    held = acc_coverage(tile, cfg, 128, columns=range(16, 40, 8))
    assert {c for _, c in held} == set(range(16, 40))
    assert {r for r, _ in held} == set(range(64))


@pytest.mark.parametrize("mn_major, itemsize, swizzle", [(False, 2, 128), (True, 2, 128), (False, 1, 128),
                                                       (False, 4, 128), (True, 2, 64)])
def test_tile_offsets_agree_in_both_forms(mn_major, itemsize, swizzle):
    layout = SwizzledOperandLayout(mn_major=mn_major, extent=256, stage_k=64, itemsize=itemsize, swizzle=swizzle)
    for x0 in (0, 64, 192) if swizzle == 128 else (0, 32, 96, 224):
        for k0 in (0, 16, 32, 48):
            expr = layout.tile_offset(str(x0), k0)
            assert eval(expr.replace("/", "//")) == layout.tile_offset_bytes(x0, k0)
    assert layout.smem_bytes == 256 * 64 * itemsize and layout.row_elems == swizzle // itemsize


def test_mn_major_tiles_of_rows_not_whole_128_bytes_take_the_64_byte_swizzle():
    """A 96-column row-major rhs (192-byte rows of n): 64-byte rows of 32 n, x atoms stage_k x 64
    bytes apart (LBO), 8-row k groups 512 apart (SBO), mode 2 in bits 62-63; K-major operands and
    whole 128-byte rows keep the 128-byte swizzle; the stage refuses neither-nor (`check`)."""
    assert operand_swizzle(True, 96, 2) == 64 and operand_swizzle(True, 128, 2) == 128
    assert operand_swizzle(False, 96, 2) == 128 and operand_swizzle(True, 64, 2) == 128
    mn = SwizzledOperandLayout(True, 96, 64, 2, 64)
    bits = mn.descriptor_bits()
    assert bits >> 62 == 2 and (bits >> 16) & 0x3FFF == (64 * 64) >> 4 and (bits >> 32) & 0x3FFF == 512 >> 4
    assert (mn.row_elems, mn.atom_stride, mn.tile_offset_bytes(32, 16)) == (32, 64 * 64, 4096 + 16 * 64)
    mn.check("stage", "rhs")
    with pytest.raises(SetupError, match="not whole 64-byte swizzled rows"):
        SwizzledOperandLayout(True, 80, 64, 2, 64).check("stage", "rhs")


def test_descriptor_fields():
    k_major = SwizzledOperandLayout(False, 128, 64)
    bits = k_major.descriptor_bits()
    assert (bits >> 16) & 0x3FFF == 16 >> 4 and (bits >> 32) & 0x3FFF == k_major.sbo >> 4
    assert bits >> 62 == 1                                   # the 128-byte swizzle mode
    mn = SwizzledOperandLayout(True, 128, 64)
    assert ((mn.descriptor_bits() >> 16) & 0x3FFF) == (64 * 128) >> 4
    expr = k_major.descriptor("addr")
    for addr in (0x400, 0x3_FFF0, 0x1_0400):                 # high address bits are dropped
        value = eval(re.sub(r"(\b(?:0x[0-9A-Fa-f]+|\d+))u\b", r"\1", expr.replace("(u64)", "")), {}, {"addr": addr})
        assert value == bits | ((addr >> 4) & 0x3FFF)
        assert value & 0x3FFF == (addr >> 4) & 0x3FFF and value >> 14 << 14 == bits
