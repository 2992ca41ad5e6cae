"""Host-side check of the DMMA tile (f64 mma.sync: m8n8k4, and m16n8k4 / k8 / k16 on sm_90) against
the PTX ISA, without a GPU.

Two levels, both evaluating the index expressions the tile and the stage actually render (they use
only parentheses, +, *, /, %, &, >>, <<; ``/`` becomes Python's ``//``, the same on the non-negative
values here):

* per lane: which shared-memory element each of the 32 lanes loads into its A and B fragment, and
  which output element each accumulator register is written to, against the fragment tables of
  PTX ISA 9.7.14.5.2 ("Matrix Fragments for mma.m8n8k4 with .f64 floating point type":
  a0 = A[g][t], b0 = B[t][g], c_i = C[g][2t + i]) and 9.7.14.5.8 ("... mma.m16n8k16 with floating
  point type", .f64: a_i at row g (i even) or g + 8 (odd), column 2i + t (even) or 2i - 2 + t
  (odd); b_i = B[t + 4i][g]; c_i at row g (i < 2) or g + 8, column 2t + (i & 1)), whose k = 4 and
  k = 8 shapes keep the first 2 / 4 a's and 1 / 2 b's (g = lane >> 2, t = lane % 4); plus the bank
  conflicts of those loads for the leading dimensions the plane stage gives the tile;
* a whole stage: the plane-partitioned stage's rendered declare / init / execute / write code is
  run by a small interpreter over every unit of the cube at once (numpy arrays over units), the
  ``mma.sync`` statements executed as the ISA defines the instruction (the m x k A and k x 8 B
  gathered from the lanes' registers by the tables above, D = A B + C scattered back), on operands
  stored in shared memory in either orientation with NaN padding; the written output must be
  exactly (small integers) the product, every element written once.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from gemm_engine.algorithms.dmma import DmmaSelection, PipelinedDmmaSelection
from gemm_engine.selector.dmma import select_dmma_tiling, select_pipelined_dmma_tiling
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT64
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.stage.events import StageEventListener
from gemm_engine.stage.plane_partitioned import PlanePartitionedStage
from gemm_engine.tile.base import SmemTile
from gemm_engine.tile.dmma import DmmaTile, DmmaTileConfig
from helpers import lane_env
from renders import flat, joined_literals

SM80 = dialect_for(nominal_cuda_device(8, 0))
SM90 = dialect_for(nominal_cuda_device(9, 0))
LANES = np.arange(32)
K0, X0, LD = 12, 40, 132        # where a tile starts in a stage (k row, m or n column), row pitch
#: Every instruction shape (m, n, k) with the dialect that has it.
SHAPES = [((8, 8, 4), SM80), ((16, 8, 4), SM90), ((16, 8, 8), SM90), ((16, 8, 16), SM90)]
SHAPE_IDS = ["m%dn%dk%d" % s for s, _ in SHAPES]
BIG = MatmulProblem(1, 4096, 4096, 4096, FLOAT64, FLOAT64, FLOAT64)


def c_eval(expr: str, env: dict):
    """Evaluate a rendered C integer expression (numpy arrays allowed in ``env``)."""
    return eval(re.sub(r"(?<![/*])/(?![/*])", "//", expr), {}, env)


def cfg(shape=(8, 8, 4), dialect=SM80) -> DmmaTileConfig:
    sel = DmmaSelection(tile_m=shape[0], tile_n=shape[1], tile_k=shape[2])
    return DmmaTile().setup(MatmulProblem(1, 64, 64, 64, FLOAT64, FLOAT64, FLOAT64), sel, dialect)


# -- the ISA's tables (written from the ISA's formulas, not from the tile) -------------------------
def isa_a(lane, i, m):        # (row m, col k) of a_i
    g, t = lane >> 2, lane % 4
    if m == 8:
        return g, t
    return (g, i * 2 + t) if i % 2 == 0 else (g + 8, i * 2 - 2 + t)


def isa_b(lane, i):           # (row k, col n) of b_i
    return lane % 4 + 4 * i, lane >> 2


def isa_c(lane, i):           # (row m, col n) of c_i
    return (lane >> 2) + (8 if i >= 2 else 0), (lane % 4) * 2 + (i & 1)


# -- per lane ---------------------------------------------------------------------------------------
def loaded_index(operand: str, k_contiguous: bool, ld: int = LD, shape=(8, 8, 4), dialect=SM80) -> np.ndarray:
    """The shared-memory element index each lane's rendered fragment load reads: (lanes, registers)."""
    tile = DmmaTile()
    load = tile.load_lhs if operand == "lhs" else tile.load_rhs
    code = load(cfg(shape, dialect), dialect, "frag", SmemTile("S", ld, str(K0), str(X0), k_contiguous))
    indices = []
    for line in code.strip().splitlines():
        m = re.fullmatch(r"frag(?:\[(\d+)\])? = S\[(.*)\];", line.strip())
        assert m and int(m.group(1) or 0) == len(indices), line
        indices.append(m.group(2))
    return np.array([[c_eval(index, lane_env(DmmaTile, lane)) for index in indices] for lane in LANES])


def stored_index(k: int, x: int, k_contiguous: bool, ld: int = LD) -> int:
    """Where element (k, x) of the tile starting at (K0, X0) lives, per the SmemTile contract."""
    return (X0 + x) * ld + K0 + k if k_contiguous else (K0 + k) * ld + X0 + x


@pytest.mark.parametrize("shape, dialect", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("k_contiguous", [False, True], ids=["k_major", "k_contiguous"])
def test_lhs_fragment_matches_isa(k_contiguous, shape, dialect):
    got = loaded_index("lhs", k_contiguous, shape=shape, dialect=dialect)
    assert got.shape == (32, shape[0] * shape[2] // 32)
    for lane in LANES:
        for i in range(got.shape[1]):
            m, k = isa_a(lane, i, shape[0])
            assert got[lane, i] == stored_index(k, m, k_contiguous), (lane, i)


@pytest.mark.parametrize("shape, dialect", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("k_contiguous", [False, True], ids=["k_major", "k_contiguous"])
def test_rhs_fragment_matches_isa(k_contiguous, shape, dialect):
    got = loaded_index("rhs", k_contiguous, shape=shape, dialect=dialect)
    assert got.shape == (32, shape[2] // 4)
    for lane in LANES:
        for i in range(got.shape[1]):
            k, n = isa_b(lane, i)
            assert got[lane, i] == stored_index(k, n, k_contiguous), (lane, i)


@pytest.mark.parametrize("shape, dialect", SHAPES, ids=SHAPE_IDS)
def test_accumulator_elements_match_isa(shape, dialect):
    elements = list(DmmaTile().acc_elements(cfg(shape, dialect), "acc"))
    assert [v for _, _, v in elements] == [f"acc[{i}]" for i in range(shape[0] // 4)]
    for lane in LANES:
        for i, (row, col, _) in enumerate(elements):
            got = (c_eval(row, lane_env(DmmaTile, lane)), c_eval(col, lane_env(DmmaTile, lane)))
            assert got == isa_c(lane, i), (lane, i)


def test_instruction_and_declarations():
    c, t = cfg(), DmmaTile()
    assert (c.tile_m, c.tile_n, c.tile_k, c.compute, c.smem_word, c.acc_regs) == (8, 8, 4, "f64", "f64", 4)
    assert t.declare_lhs(c, SM80, "a") == "double a;" and t.declare_acc(c, SM80, "acc") == "double acc[2];"
    code = t.execute(c, SM80, "a", "b", "acc")
    assert code == "ptx_dmma_m8n8k4(acc, a, b);"
    helper = SM80.helpers_for(code)
    assert "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};" in helper
    assert re.search(r'"\+d"\(c\[0\]\), "\+d"\(c\[1\]\) : "d"\(a\), "d"\(b\)', flat(helper))


@pytest.mark.parametrize("shape, a, b", [((16, 8, 4), 2, 1), ((16, 8, 8), 4, 2), ((16, 8, 16), 8, 4)])
def test_sm90_instructions_and_declarations(shape, a, b):
    c, t = cfg(shape, SM90), DmmaTile()
    assert (c.tile_m, c.tile_k, c.acc_regs) == (16, shape[2], 8)
    assert t.declare_acc(c, SM90, "acc") == "double acc[4];"
    assert t.declare_lhs(c, SM90, "x") == f"double x[{a}];"
    assert t.declare_rhs(c, SM90, "y") == ("double y;" if b == 1 else f"double y[{b}];")
    helper = joined_literals(SM90.helpers_for(t.execute(c, SM90, "x", "y", "acc")))
    regs = lambda lo, n: ", ".join(f"%{lo + i}" for i in range(n))   # noqa: E731
    assert (f"mma.sync.aligned.m16n8k{shape[2]}.row.col.f64.f64.f64.f64 {{{regs(0, 4)}}}, {{{regs(4, a)}}}, "
            f"{{{regs(4 + a, b)}}}, {{{regs(0, 4)}}};") in helper


@pytest.mark.parametrize("shape", [(16, 8, 4), (16, 8, 8), (16, 8, 16)])
def test_sm90_shapes_are_refused_below_sm90(shape):
    with pytest.raises(SetupError, match=r"needs sm_90.*sm_80"):
        cfg(shape, SM80)


@pytest.mark.parametrize("shape", [(16, 8, 32), (8, 8, 8), (16, 16, 8), (32, 8, 8)])
def test_other_shapes_are_refused(shape):
    with pytest.raises(SetupError, match="not an f64 instruction shape"):
        cfg(shape, SM90)


def stage_lds():
    """(ld, k_contiguous) the plane stage gives this tile, over selections, shapes and layouts."""
    out = []
    stage = PlanePartitionedStage(DmmaTile())
    sels = [(DmmaSelection(), SM80), (DmmaSelection(planes_m=2, partition_m=2, partition_n=2, stage_k=8), SM80),
            (PipelinedDmmaSelection(), SM80), (PipelinedDmmaSelection(partition_m=4, stage_k=32), SM80),
            (PipelinedDmmaSelection(**select_pipelined_dmma_tiling(BIG, SM90)), SM90),
            (PipelinedDmmaSelection(tile_m=16, tile_k=16, partition_m=2, stage_k=16), SM90),
            (DmmaSelection(**select_dmma_tiling(BIG, SM90)), SM90)]
    for sel, dialect in sels:
        for lhs, rhs in [("row", "row"), ("col", "col"), ("row", "col"), ("col", "row")]:
            p = MatmulProblem(1, 256, 256, 256, FLOAT64, FLOAT64, FLOAT64, Layout(lhs), Layout(rhs))
            st = stage.setup(p, sel, dialect)
            out += [(st.lhs_ld, st.lhs_k_contiguous), (st.rhs_ld, st.rhs_k_contiguous)]
    return sorted(set(out))


@pytest.mark.parametrize("shape, dialect", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("ld, k_contiguous", stage_lds())
@pytest.mark.parametrize("operand", ["lhs", "rhs"])
def test_fragment_loads_are_conflict_free(operand, ld, k_contiguous, shape, dialect):
    """A warp's 8-byte shared loads are served one half-warp (128 bytes) at a time: the 16 lanes of
    each half must read 16 distinct 8-byte words modulo 16 (all 32 banks once), for every register."""
    assert (ld * 8) % 16 == 0                         # rows of whole 16-byte chunks (cp.async)
    got = loaded_index(operand, k_contiguous, ld, shape, dialect)
    for reg in got.T:
        for half in (reg[:16], reg[16:]):
            assert len({int(i) % 16 for i in half}) == 16, (ld, sorted(int(i) % 16 for i in half))


# -- a whole stage, interpreted -----------------------------------------------------------------------
#: The DMMA intrinsics (codegen/ptx.py: mma.sync.aligned.m{m}n8k{k}.row.col.f64, c += a @ b).
MMA = re.compile(r"ptx_dmma_m(\d+)n8k(\d+)\((\w+), (\w+), (\w+)\);")
STATEMENTS = [
    ("comment", re.compile(r"/\*.*?\*/", re.S)),
    ("pragma", re.compile(r"#pragma unroll")),
    ("for", re.compile(r"for \(int (\w+) = 0; \1 < (\d+); \+\+\1\) \{")),
    ("end", re.compile(r"\}")),
    ("const", re.compile(r"const int (\w+) = ([^;]*);")),
    ("decl", re.compile(r"double (\w+)(?:\[(\d+)\])?;")),
    ("zero", re.compile(r"(\w+)\[(\d+)\] = 0\.0;")),
    ("load", re.compile(r"(\w+)(?:\[(\d+)\])? = (lhs_smem|rhs_smem)\[([^;]*)\];")),
    ("mma", MMA),
    ("store", re.compile(r"STORE ([^@;]*) @@ ([^@;]*) @@ (\w+)\[(\d+)\];")),
]


def parse(code: str) -> list:
    """The statements of the stage's code, loops nested: [(kind, groups) or ("for", var, n, body)]."""
    pos, stack = 0, [[]]
    while True:
        while pos < len(code) and code[pos].isspace():
            pos += 1
        if pos == len(code):
            break
        for kind, pattern in STATEMENTS:
            m = pattern.match(code, pos)
            if m:
                break
        else:
            raise AssertionError(f"statement the interpreter does not know: {code[pos:pos + 120]!r}")
        pos = m.end()
        if kind in ("comment", "pragma"):
            continue
        if kind == "for":
            stack.append([])
            stack[-2].append(("for", m.group(1), int(m.group(2)), stack[-1]))
        elif kind == "end":
            stack.pop()
        else:
            stack[-1].append((kind, m.groups()))
    assert len(stack) == 1, "unbalanced braces"
    return stack[0]


def mma_sync(m: int, k: int, acc: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The instruction, per plane, as the ISA defines it: D = A B + C with A, B and C gathered from
    (scattered to) the lanes' registers by the ISA's tables (isa_a, isa_b, isa_c)."""
    planes = a.shape[0] // 32
    A, B, C = np.full((planes, m, k), np.nan), np.full((planes, k, 8), np.nan), np.full((planes, m, 8), np.nan)
    a, b = a.reshape(planes, 32, -1), b.reshape(planes, 32, -1)
    acc = acc.reshape(planes, 32, -1)
    assert a.shape[2] == m * k // 32 and b.shape[2] == k // 4 and acc.shape[2] == m // 4
    for lane in LANES:
        for i in range(a.shape[2]):
            A[(slice(None),) + isa_a(lane, i, m)] = a[:, lane, i]
        for i in range(b.shape[2]):
            B[(slice(None),) + isa_b(lane, i)] = b[:, lane, i]
        for i in range(acc.shape[2]):
            C[(slice(None),) + isa_c(lane, i)] = acc[:, lane, i]
    assert not np.isnan(A).any() and not np.isnan(B).any(), "a register the ISA reads was never loaded"
    D = A @ B + C
    out = np.empty_like(acc)
    for lane in LANES:
        for i in range(acc.shape[2]):
            out[:, lane, i] = D[(slice(None),) + isa_c(lane, i)]
    return out.reshape(-1, acc.shape[2])


def run(stmts, env, smem, out):
    for st in stmts:
        if st[0] == "for":
            _, var, n, body = st
            for i in range(n):          # one environment: registers written in the loop persist
                env[var] = i
                run(body, env, smem, out)
            del env[var]
            continue
        kind, g = st
        units = len(env["UNIT_ID"])
        if kind == "const":
            env[g[0]] = np.broadcast_to(c_eval(g[1], env), env["UNIT_ID"].shape)
        elif kind == "decl":       # a scalar register is an array of one
            env[g[0]] = np.full((units, int(g[1] or 1)), np.nan)
        elif kind == "zero":
            env[g[0]][:, int(g[1])] = 0.0
        elif kind == "load":
            index = c_eval(g[3], env)
            array = smem[g[2]]
            assert np.all((index >= 0) & (index < len(array))), f"{g[2]} read out of bounds"
            env[g[0]][:, int(g[1] or 0)] = array[index]
        elif kind == "mma":
            m, k, acc, a, b = g
            env[acc] = mma_sync(int(m), int(k), env[acc], env[a], env[b])
        elif kind == "store":
            rows, cols = c_eval(g[0], env), c_eval(g[1], env)
            out.append((np.broadcast_to(rows, env["UNIT_ID"].shape), np.broadcast_to(cols, env["UNIT_ID"].shape),
                        env[g[2]][:, int(g[3])]))


class Commenting(StageEventListener):
    """Injects a comment after every event: the stage then unrolls its k tiles instead of looping."""

    def on_event(self, event):
        return f"/* {event!r} */"


def simulate(sel, layouts, listener=None, seed=0, dialect=SM80, tile=None):
    p = MatmulProblem(1, 512, 512, 512, FLOAT64, FLOAT64, FLOAT64, Layout(layouts[0]), Layout(layouts[1]))
    stage = PlanePartitionedStage(tile or DmmaTile())
    st = stage.setup(p, sel, dialect)
    rng = np.random.default_rng(seed)
    a = rng.integers(-8, 9, (st.stage_m, st.stage_k)).astype(np.float64)
    b = rng.integers(-8, 9, (st.stage_k, st.stage_n)).astype(np.float64)
    lhs, rhs = np.full(st.lhs_smem_elems, np.nan), np.full(st.rhs_smem_elems, np.nan)   # padding: NaN
    for k in range(st.stage_k):
        for m in range(st.stage_m):
            lhs[m * st.lhs_ld + k if st.lhs_k_contiguous else k * st.lhs_ld + m] = a[m, k]
        for n in range(st.stage_n):
            rhs[n * st.rhs_ld + k if st.rhs_k_contiguous else k * st.rhs_ld + n] = b[k, n]
    code = "\n".join([
        stage.declare(st, dialect),
        stage.init_accumulators(st, dialect),
        stage.execute(st, dialect, "lhs_smem", "rhs_smem", listener or StageEventListener()),
        stage.write(st, dialect, lambda row, col, value: f"STORE {row} @@ {col} @@ {value};"),
    ])
    stores = []
    run(parse(code), {"UNIT_ID": np.arange(st.units)}, {"lhs_smem": lhs, "rhs_smem": rhs}, stores)
    c = np.full((st.stage_m, st.stage_n), np.nan)
    written = np.zeros(c.shape, int)
    for rows, cols, values in stores:
        assert rows.min() >= 0 and rows.max() < st.stage_m and cols.min() >= 0 and cols.max() < st.stage_n
        np.add.at(written, (rows, cols), 1)
        c[rows, cols] = values
    return st, c, written, a @ b


SM90_AUTO = PipelinedDmmaSelection(**select_pipelined_dmma_tiling(BIG, SM90))
SIM_CASES = [
    (DmmaSelection(), ("row", "row"), None, SM80),                              # simple_dmma's default
    (DmmaSelection(), ("col", "col"), Commenting(), SM80),                      # unrolled k tiles
    (DmmaSelection(planes_m=2, planes_n=1, partition_m=2, partition_n=3, stage_k=8), ("row", "row"), None, SM80),
    (PipelinedDmmaSelection(), ("row", "row"), None, SM80),                     # fragment buffering
    (PipelinedDmmaSelection(), ("col", "col"), None, SM80),
    (PipelinedDmmaSelection(), ("row", "col"), None, SM80),                     # both k-contiguous
    (PipelinedDmmaSelection(planes_n=2, partition_m=4, partition_n=3, stage_k=32), ("col", "row"), None, SM80),
    (PipelinedDmmaSelection(fragment_buffering=False), ("row", "col"), Commenting(), SM80),
    (SM90_AUTO, ("row", "row"), None, SM90),                                    # auto's sm_90 tiling
    (SM90_AUTO, ("row", "col"), None, SM90),
    (SM90_AUTO, ("col", "row"), Commenting(), SM90),
    (DmmaSelection(**select_dmma_tiling(BIG, SM90)), ("col", "col"), None, SM90),
    (PipelinedDmmaSelection(tile_m=16, tile_k=16, partition_m=2, partition_n=3, stage_k=32), ("row", "col"), None, SM90),
    (PipelinedDmmaSelection(tile_m=16, tile_k=4, partition_m=1, partition_n=2, fragment_buffering=False),
     ("col", "row"), Commenting(), SM90),
]


@pytest.mark.parametrize("sel, layouts, listener, dialect", SIM_CASES,
                         ids=[f"case{i}-m{c[0].tile_m}k{c[0].tile_k}-{'-'.join(c[1])}" for i, c in enumerate(SIM_CASES)])
def test_stage_computes_the_product(sel, layouts, listener, dialect):
    st, c, written, ref = simulate(sel, layouts, listener, dialect=dialect)
    smem_layout = getattr(sel, "smem_layout", "k_major")
    assert st.lhs_k_contiguous == (smem_layout == "global" and layouts[0] == "row")
    assert st.rhs_k_contiguous == (smem_layout == "global" and layouts[1] == "col")
    assert np.all(written == 1), f"elements written {np.unique(written)} times"
    np.testing.assert_array_equal(c, ref)


class Transposed(DmmaTile):
    """m8n8k4 reading A[t][g] instead of A[g][t]."""

    def load_lhs(self, cfg, d, frag, src):
        return f"{frag} = {src.at('(((UNIT_ID & 31) >> 2) & 3)', '((UNIT_ID & 31) & 3)')};"


class RowsSwapped(DmmaTile):
    """m16n8: a_1 and a_2 exchanged (the rows g + 8 of k t read as the rows g of k t + 4)."""

    def load_lhs(self, cfg, d, frag, src):
        lines = super().load_lhs(cfg, d, frag, src).splitlines()
        lines[1], lines[2] = lines[2].replace("[2] =", "[1] ="), lines[1].replace("[1] =", "[2] =")
        return "\n".join(lines)


@pytest.mark.parametrize("tile, sel, dialect", [
    (Transposed(), DmmaSelection(planes_m=1, planes_n=1, partition_m=1, partition_n=1, stage_k=4), SM80),
    (RowsSwapped(), DmmaSelection(planes_m=1, planes_n=1, partition_m=1, partition_n=1, stage_k=8, tile_m=16,
                                  tile_k=8), SM90)], ids=["m8n8k4", "m16n8k8"])
def test_the_interpreter_sees_a_wrong_fragment(tile, sel, dialect):
    """The check has teeth: a tile reading a fragment from the wrong elements must fail it."""
    _, c, written, ref = simulate(sel, ("row", "row"), dialect=dialect, tile=tile)
    assert np.all(written == 1)
    assert not np.array_equal(c, ref)
