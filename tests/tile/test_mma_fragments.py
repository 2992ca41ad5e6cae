"""Host-side check of MmaTile's fragment addressing against the PTX ISA fragment layouts.

No GPU needed: the rendered index expressions are evaluated in Python for each of the 32 lanes
(they use only parentheses, +, *, &, >>, <<, which mean the same in C and Python), ``ldmatrix`` is
emulated as the ISA describes it, and every register element is compared with the (row, col) the
ISA assigns to it for ``mma.m16n8k16`` (f16 / bf16) and ``mma.m16n8k8`` (tf32). Bank conflicts of
the fragment reads are checked for the stage's padded leading dimension as well.
"""
from __future__ import annotations

import re

import pytest

from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import CudaDialect
from gemm_engine.stage.plane_partitioned import SMEM_PAD
from gemm_engine.tile.base import SmemTile
from helpers import lane_env
from gemm_engine.tile.mma import MmaTileConfig, MmaTile

LD = 128 + SMEM_PAD
K0, X0 = 16, 40          # where the tile starts in the stage: k row, m (or n) column


class RecordingDialect(CudaDialect):
    """Records the pointers handed to shared_address (the rows ldmatrix reads)."""

    def __init__(self):
        super().__init__(nominal_cuda_device(9, 0))
        self.pointers = []

    def shared_address(self, pointer):
        self.pointers.append(pointer)
        return "ADDR"


def lane_index(expr: str, array: str, lane: int) -> int:
    """Evaluate ``array[index]`` (or ``&array[index]``) for one lane: the element index."""
    inner = re.fullmatch(rf"&?{array}\[(.*)\]", expr.strip()).group(1)
    return eval(inner, {}, lane_env(MmaTile, lane))


# -- the ISA's fragment layouts (groupID g = lane >> 2, threadID_in_group t = lane % 4) ------------
def isa_a(kind, lane, i):
    """(row m, col k) of element a_i of multiplicand A."""
    g, t = lane >> 2, lane & 3
    if kind == "tf32":                      # a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4)
        return g + 8 * (i & 1), t + 4 * (i >> 1)
    # f16 / bf16: rows g for i in {0,1,4,5}, g+8 otherwise; cols 2t + (i & 1), +8 for i >= 4
    return g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2)


def isa_b(kind, lane, i):
    """(row k, col n) of element b_i of multiplicand B."""
    g, t = lane >> 2, lane & 3
    if kind == "tf32":                      # b0 (t, g), b1 (t+4, g)
        return t + 4 * i, g
    return 2 * t + (i & 1) + 8 * (i >> 1), g


def isa_c(lane, i):
    g, t = lane >> 2, lane & 3
    return g + 8 * (i >> 1), 2 * t + (i & 1)


def ldmatrix_trans(row_addr, lane, matrix):
    """Elements (low, high half) lane receives from 8x8 block ``matrix`` of ldmatrix .trans: row
    r of the block is the 8 elements at row_addr[8 * matrix + r]; .trans hands lane l the column
    l / 4, rows 2 (l % 4) and 2 (l % 4) + 1."""
    rows = [row_addr[8 * matrix + r] for r in range(8)]
    return [rows[2 * (lane & 3) + h] + (lane >> 2) for h in (0, 1)]


def cfg(kind):
    k = 8 if kind == "tf32" else 16
    smem = {"f16": "f16_bits", "bf16": "bf16_bits", "tf32": "f32"}[kind]
    return MmaTileConfig(tile_m=16, tile_n=8, tile_k=k, compute="f32", smem=smem, kind=kind)


def loaded_elements(kind, operand):
    """{(lane, element i): shared-memory element index} as the rendered load reads them."""
    d, tile, c = RecordingDialect(), MmaTile(), cfg(kind)
    load = tile.load_lhs if operand == "lhs" else tile.load_rhs
    code = load(c, d, "frag", SmemTile("S", LD, str(K0), str(X0)))
    out = {}
    if kind == "tf32":
        exprs = re.findall(r"= ptx_cvt_rna_tf32\((S\[.*?\])\);", code)
        for lane in range(32):
            for i, e in enumerate(exprs):
                out[lane, i] = lane_index(e, "S", lane)
        return out
    (pointer,) = d.pointers
    rows = [lane_index(pointer, "S", lane) for lane in range(32)]
    blocks = 4 if operand == "lhs" else 2
    for lane in range(32):
        for j in range(blocks):                  # register j holds elements 2j (low), 2j+1 (high)
            for h, index in enumerate(ldmatrix_trans(rows, lane, j)):
                out[lane, 2 * j + h] = index
    return out


@pytest.mark.parametrize("kind", ["f16", "bf16", "tf32"])
def test_lhs_fragment_matches_isa(kind):
    for (lane, i), index in loaded_elements(kind, "lhs").items():
        m, k = isa_a(kind, lane, i)
        assert index == (K0 + k) * LD + X0 + m, (lane, i)     # lhs (k, m) is stored k-major


@pytest.mark.parametrize("kind", ["f16", "bf16", "tf32"])
def test_rhs_fragment_matches_isa(kind):
    for (lane, i), index in loaded_elements(kind, "rhs").items():
        k, n = isa_b(kind, lane, i)
        assert index == (K0 + k) * LD + X0 + n, (lane, i)


@pytest.mark.parametrize("kind", ["f16", "tf32"])
def test_accumulator_elements_match_isa(kind):
    elements = list(MmaTile().acc_elements(cfg(kind), "acc"))
    assert [v for _, _, v in elements] == [f"acc[{i}]" for i in range(4)]
    for lane in range(32):
        for i, (row, col, _) in enumerate(elements):
            got = (eval(row, {}, lane_env(MmaTile, lane)), eval(col, {}, lane_env(MmaTile, lane)))
            assert got == isa_c(lane, i), (lane, i)


@pytest.mark.parametrize("operand", ["lhs", "rhs"])
def test_ldmatrix_rows_aligned_and_conflict_free(operand):
    d = RecordingDialect()
    load = MmaTile().load_lhs if operand == "lhs" else MmaTile().load_rhs
    load(cfg("f16"), d, "frag", SmemTile("S", LD, str(K0), str(X0)))
    rows = [lane_index(d.pointers[0], "S", lane) for lane in range(32)]
    assert all(r % 8 == 0 for r in rows)                   # 16-byte rows of 2-byte elements
    for j in range(4 if operand == "lhs" else 2):          # one block per shared-memory phase
        banks = {(rows[8 * j + r] * 2 // 4 + w) % 32 for r in range(8) for w in range(4)}
        assert len(banks) == 32


@pytest.mark.parametrize("operand", ["lhs", "rhs"])
def test_tf32_scalar_reads_conflict_free(operand):
    reads = loaded_elements("tf32", operand)
    for i in range(4 if operand == "lhs" else 2):
        assert len({reads[lane, i] % 32 for lane in range(32)}) == 32


# -- int8: mma.m16n8k32 .s8, fragments packed from single-byte reads ---------------------------------
def isa_s8_a(lane, j, byte):
    """(row m, col k) of byte ``byte`` of A register ``j`` (PTX ISA, "Matrix Fragments for
    mma.m16n8k32", .s8: a_i with i = 4 j + byte; row g for i < 4 or 8 <= i < 12, else g + 8;
    col 4t + (i & 3), + 16 for i >= 8)."""
    g, t, i = lane >> 2, lane & 3, 4 * j + byte
    return g + 8 * ((i >> 2) & 1), 4 * t + (i & 3) + 16 * (i >> 3)


def isa_s8_b(lane, j, byte):
    """(row k, col n) of byte ``byte`` of B register ``j``: b_i with i = 4 j + byte; row 4t + (i & 3),
    + 16 for i >= 4; col g."""
    g, t, i = lane >> 2, lane & 3, 4 * j + byte
    return 4 * t + (i & 3) + 16 * (i >> 2), g


S8_CFG = MmaTileConfig(tile_m=16, tile_n=8, tile_k=32, compute="i32", smem="i8", kind="s8")


def s8_registers(operand: str, k_contiguous: bool, data: list[int], ld: int) -> dict:
    """{(lane, register j): the 32-bit value the rendered load computes}, evaluated in Python for
    every lane over shared memory ``data`` (signed bytes). The C casts ``(unsigned)(unsigned char)x``
    become ``(x & 0xFF)``; shifts and ``|`` mean the same in both languages."""
    tile = MmaTile()
    load = tile.load_lhs if operand == "lhs" else tile.load_rhs
    code = load(S8_CFG, RecordingDialect(), "frag", SmemTile("S", ld, str(K0), str(X0), k_contiguous))
    statements = re.findall(r"frag\[(\d)\] = (.*?);", code)
    assert [int(j) for j, _ in statements] == list(range(4 if operand == "lhs" else 2))
    out = {}
    for j, expr in statements:
        py = re.sub(r"\(unsigned\)\(unsigned char\)(S\[[^\[\]]*\])", r"(\1 & 0xFF)", expr)
        assert "unsigned" not in py, py
        for lane in range(32):
            out[lane, int(j)] = eval(py, {}, {"S": data, **lane_env(MmaTile, lane)})
    return out


@pytest.mark.parametrize("k_contiguous", [False, True], ids=["k_major", "k_contiguous"])
@pytest.mark.parametrize("operand", ["lhs", "rhs"])
def test_s8_fragments_match_isa(operand, k_contiguous):
    import random as _random
    rnd = _random.Random(7)
    ld = LD if not k_contiguous else 64 + SMEM_PAD          # k-contiguous rows: stage_k + pad
    data = [rnd.randrange(-128, 128) for _ in range((max(K0, X0) + 64) * ld)]

    def at(k, x):   # element (k, x) of the tile, in either orientation (SmemTile's definition)
        return data[(X0 + x) * ld + K0 + k] if k_contiguous else data[(K0 + k) * ld + X0 + x]

    regs = s8_registers(operand, k_contiguous, data, ld)
    for (lane, j), value in regs.items():
        assert 0 <= value < 2 ** 32
        for byte in range(4):
            if operand == "lhs":
                m, k = isa_s8_a(lane, j, byte)
                want = at(k, m)
            else:
                k, n = isa_s8_b(lane, j, byte)
                want = at(k, n)
            assert (value >> (8 * byte)) & 0xFF == want & 0xFF, (lane, j, byte)


def test_s8_instruction_and_accumulators():
    d = RecordingDialect()
    code = MmaTile().execute(S8_CFG, d, "a", "b", "acc")
    assert code == "ptx_mma_m16n8k32_s32_s8(acc, a, b);"
    helper = d.helpers_for(code)
    assert "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in helper and "INLINE void ptx_mma_m16n8k32_s32_s8(int* c" in helper
    assert helper.count('"+r"(c[') == 4 and '"+f"' not in helper
    assert MmaTile().declare_acc(S8_CFG, d, "acc") == "int acc[4];"
    assert "0.0" not in MmaTile().init_acc(S8_CFG, d, "acc")
    assert MmaTile().load_rhs_pair(S8_CFG, d, "x", "y", SmemTile("S", LD, "0", "0")) == ""   # none: two load_rhs
    elements = list(MmaTile().acc_elements(S8_CFG, "acc"))   # s32 C fragment: the f32 layout
    for lane in range(32):
        for i, (row, col, _) in enumerate(elements):
            got = (eval(row, {}, lane_env(MmaTile, lane)), eval(col, {}, lane_env(MmaTile, lane)))
            assert got == isa_c(lane, i), (lane, i)


def test_s8_byte_reads_conflict_free():
    # k-major with the plane stage's padded rows (128 + 8 bytes): for every byte of every register,
    # the 32 lanes read distinct banks or the same 4-byte word (a broadcast).
    d, tile = RecordingDialect(), MmaTile()
    for load, count in ((tile.load_lhs, 4), (tile.load_rhs, 2)):
        code = load(S8_CFG, d, "frag", SmemTile("S", LD, str(K0), str(X0)))
        for j, expr in re.findall(r"frag\[(\d)\] = (.*?);", code):
            for index_expr in re.findall(r"S\[([^\[\]]*)\]", expr):
                words = {eval(index_expr, {}, lane_env(MmaTile, lane)) // 4 for lane in range(32)}
                assert len({w % 32 for w in words}) == len(words), (j, index_expr)
