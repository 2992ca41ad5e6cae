"""Host-side check of the DMMA tile (mma.sync m8n8k4 f64) against the PTX ISA, without a GPU.

Two levels, both evaluating the index expressions the tile and the stage actually render (they use
only parentheses, +, *, /, %, &, >>, <<; ``/`` becomes Python's ``//``, the same on the non-negative
values here):

* per lane: which shared-memory element each of the 32 lanes loads into its A and B fragment, and
  which output element each accumulator register is written to, against the fragment tables of
  PTX ISA 9.7.14.5.2 ("Matrix Fragments for mma.m8n8k4 with .f64 floating point type"):
  a0 = A[g][t], b0 = B[t][g], c_i = C[g][2t + i] (g = lane >> 2, t = lane % 4); plus the bank
  conflicts of those loads for the leading dimensions the plane stage gives the tile;
* a whole stage: the plane-partitioned stage's rendered declare / init / execute / write code is
  run by a small interpreter over every unit of the cube at once (numpy arrays over units), the
  ``mma.sync`` statements executed as the ISA defines the instruction (the 8 x 4 A and 4 x 8 B
  gathered from the lanes' registers by the tables above, D = A B + C scattered back), on operands
  stored in shared memory in either orientation with NaN padding; the written output must be
  exactly (small integers) the product, every element written once.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from gemm_engine.algorithms.dmma import DmmaSelection, PipelinedDmmaSelection
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT64
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.stage.events import StageEventListener
from gemm_engine.stage.plane_partitioned import PlanePartitionedStage
from gemm_engine.tile.base import SmemTile
from gemm_engine.tile.dmma import DmmaTile, DmmaTileConfig
from helpers import lane_env

SM80 = dialect_for(nominal_cuda_device(8, 0))
LANES = np.arange(32)
K0, X0, LD = 12, 40, 132        # where a tile starts in a stage (k row, m or n column), row pitch


def c_eval(expr: str, env: dict):
    """Evaluate a rendered C integer expression (numpy arrays allowed in ``env``)."""
    return eval(re.sub(r"(?<![/*])/(?![/*])", "//", expr), {}, env)


def cfg() -> DmmaTileConfig:
    return DmmaTile().setup(MatmulProblem(1, 64, 64, 64, FLOAT64, FLOAT64, FLOAT64), DmmaSelection(), SM80)


# -- the ISA's tables -------------------------------------------------------------------------------
def isa_a(lane):        # (row m, col k) of a0
    return lane >> 2, lane % 4


def isa_b(lane):        # (row k, col n) of b0
    return lane % 4, lane >> 2


def isa_c(lane, i):     # (row m, col n) of c_i
    return lane >> 2, (lane % 4) * 2 + (i & 1)


# -- per lane ---------------------------------------------------------------------------------------
def loaded_index(operand: str, k_contiguous: bool, ld: int = LD) -> np.ndarray:
    """The shared-memory element index each lane's rendered fragment load reads."""
    tile = DmmaTile()
    load = tile.load_lhs if operand == "lhs" else tile.load_rhs
    code = load(cfg(), SM80, "frag", SmemTile("S", ld, str(K0), str(X0), k_contiguous))
    index = re.fullmatch(r"frag = S\[(.*)\];", code.strip()).group(1)
    return np.array([c_eval(index, lane_env(DmmaTile, lane)) for lane in LANES])


def stored_index(k: int, x: int, k_contiguous: bool, ld: int = LD) -> int:
    """Where element (k, x) of the tile starting at (K0, X0) lives, per the SmemTile contract."""
    return (X0 + x) * ld + K0 + k if k_contiguous else (K0 + k) * ld + X0 + x


@pytest.mark.parametrize("k_contiguous", [False, True], ids=["k_major", "k_contiguous"])
def test_lhs_fragment_matches_isa(k_contiguous):
    got = loaded_index("lhs", k_contiguous)
    for lane in LANES:
        m, k = isa_a(lane)
        assert got[lane] == stored_index(k, m, k_contiguous), lane


@pytest.mark.parametrize("k_contiguous", [False, True], ids=["k_major", "k_contiguous"])
def test_rhs_fragment_matches_isa(k_contiguous):
    got = loaded_index("rhs", k_contiguous)
    for lane in LANES:
        k, n = isa_b(lane)
        assert got[lane] == stored_index(k, n, k_contiguous), lane


def test_accumulator_elements_match_isa():
    elements = list(DmmaTile().acc_elements(cfg(), "acc"))
    assert [v for _, _, v in elements] == ["acc[0]", "acc[1]"]
    for lane in LANES:
        for i, (row, col, _) in enumerate(elements):
            got = (c_eval(row, lane_env(DmmaTile, lane)), c_eval(col, lane_env(DmmaTile, lane)))
            assert got == isa_c(lane, i), (lane, i)


def test_instruction_and_declarations():
    c, t = cfg(), DmmaTile()
    assert (c.tile_m, c.tile_n, c.tile_k, c.compute, c.smem_word) == (8, 8, 4, "f64", "f64")
    assert t.declare_lhs(c, SM80, "a") == "double a;" and t.declare_acc(c, SM80, "acc") == "double acc[2];"
    code = t.execute(c, SM80, "a", "b", "acc")
    assert code == "ptx_dmma_m8n8k4(acc, a, b);"
    helper = SM80.helpers_for(code)
    assert "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};" in helper
    assert re.search(r'"\+d"\(c\[0\]\), "\+d"\(c\[1\]\) : "d"\(a\), "d"\(b\)', helper)


def stage_lds():
    """(selection, layouts, lhs_ld, rhs_ld, lhs_kc, rhs_kc) the plane stage gives this tile."""
    out = []
    stage = PlanePartitionedStage(DmmaTile())
    sels = [DmmaSelection(), DmmaSelection(planes_m=2, partition_m=2, partition_n=2, stage_k=8),
            PipelinedDmmaSelection(), PipelinedDmmaSelection(partition_m=4, stage_k=32)]
    for sel in sels:
        for lhs, rhs in [("row", "row"), ("col", "col"), ("row", "col"), ("col", "row")]:
            p = MatmulProblem(1, 256, 256, 256, FLOAT64, FLOAT64, FLOAT64, Layout(lhs), Layout(rhs))
            st = stage.setup(p, sel, SM80)
            out += [(st.lhs_ld, st.lhs_k_contiguous), (st.rhs_ld, st.rhs_k_contiguous)]
    return sorted(set(out))


@pytest.mark.parametrize("ld, k_contiguous", stage_lds())
@pytest.mark.parametrize("operand", ["lhs", "rhs"])
def test_fragment_loads_are_conflict_free(operand, ld, k_contiguous):
    """A warp's 8-byte shared loads are served one half-warp (128 bytes) at a time: the 16 lanes of
    each half must read 16 distinct 8-byte words modulo 16 (all 32 banks once)."""
    assert (ld * 8) % 16 == 0                         # rows of whole 16-byte chunks (cp.async)
    got = loaded_index(operand, k_contiguous, ld)
    for half in (got[:16], got[16:]):
        assert len({int(i) % 16 for i in half}) == 16, (ld, sorted(int(i) % 16 for i in half))


# -- a whole stage, interpreted -----------------------------------------------------------------------
#: The DMMA intrinsic (codegen/ptx.py: mma.sync.aligned.m8n8k4.row.col.f64, c[0..2) += a * b).
MMA = re.compile(r"ptx_dmma_m8n8k4\((\w+), (\w+), (\w+)\);")
STATEMENTS = [
    ("comment", re.compile(r"/\*.*?\*/", re.S)),
    ("pragma", re.compile(r"#pragma unroll")),
    ("for", re.compile(r"for \(int (\w+) = 0; \1 < (\d+); \+\+\1\) \{")),
    ("end", re.compile(r"\}")),
    ("const", re.compile(r"const int (\w+) = ([^;]*);")),
    ("decl", re.compile(r"double (\w+)(\[2\])?;")),
    ("zero", re.compile(r"(\w+)\[([01])\] = 0\.0;")),
    ("load", re.compile(r"(\w+) = (lhs_smem|rhs_smem)\[([^;]*)\];")),
    ("mma", MMA),
    ("store", re.compile(r"STORE ([^@;]*) @@ ([^@;]*) @@ (\w+)\[([01])\];")),
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


def mma_sync(acc: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The instruction, per plane, as the ISA defines it: D = A B + C with A[g][t] = a of lane
    4g + t, B[t][g] = b of lane 4g + t, C[g][2t + i] = acc[i] of lane 4g + t."""
    planes = a.shape[0] // 32
    g, t = LANES >> 2, LANES % 4
    A = np.zeros((planes, 8, 4))
    B = np.zeros((planes, 4, 8))
    C = np.zeros((planes, 8, 8))
    a, b, acc = a.reshape(planes, 32), b.reshape(planes, 32), acc.reshape(planes, 32, 2)
    A[:, g, t] = a
    B[:, t, g] = b
    for i in range(2):
        C[:, g, 2 * t + i] = acc[:, :, i]
    D = A @ B + C
    return np.stack([D[:, g, 2 * t + i] for i in range(2)], axis=-1).reshape(-1, 2)


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
        if kind == "const":
            env[g[0]] = np.broadcast_to(c_eval(g[1], env), env["UNIT_ID"].shape)
        elif kind == "decl":
            env[g[0]] = np.full((len(env["UNIT_ID"]), 2) if g[1] else len(env["UNIT_ID"]), np.nan)
        elif kind == "zero":
            env[g[0]][:, int(g[1])] = 0.0
        elif kind == "load":
            index = c_eval(g[2], env)
            array = smem[g[1]]
            assert np.all((index >= 0) & (index < len(array))), f"{g[1]} read out of bounds"
            env[g[0]] = array[index]
        elif kind == "mma":
            acc, a, b = g
            env[acc] = mma_sync(env[acc], env[a], env[b])
        elif kind == "store":
            rows, cols = c_eval(g[0], env), c_eval(g[1], env)
            out.append((np.broadcast_to(rows, env["UNIT_ID"].shape), np.broadcast_to(cols, env["UNIT_ID"].shape),
                        env[g[2]][:, int(g[3])]))


class Commenting(StageEventListener):
    """Injects a comment after every event: the stage then unrolls its k tiles instead of looping."""

    def on_event(self, event):
        return f"/* {event!r} */"


def simulate(sel, layouts, listener=None, seed=0):
    p = MatmulProblem(1, 512, 512, 512, FLOAT64, FLOAT64, FLOAT64, Layout(layouts[0]), Layout(layouts[1]))
    stage = PlanePartitionedStage(DmmaTile())
    st = stage.setup(p, sel, SM80)
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
        stage.declare(st, SM80),
        stage.init_accumulators(st, SM80),
        stage.execute(st, SM80, "lhs_smem", "rhs_smem", listener or StageEventListener()),
        stage.write(st, SM80, lambda row, col, value: f"STORE {row} @@ {col} @@ {value};"),
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


SIM_CASES = [
    (DmmaSelection(), ("row", "row"), None),                                    # simple_dmma's default
    (DmmaSelection(), ("col", "col"), Commenting()),                            # unrolled k tiles
    (DmmaSelection(planes_m=2, planes_n=1, partition_m=2, partition_n=3, stage_k=8), ("row", "row"), None),
    (PipelinedDmmaSelection(), ("row", "row"), None),                           # fragment buffering
    (PipelinedDmmaSelection(), ("col", "col"), None),
    (PipelinedDmmaSelection(), ("row", "col"), None),                           # both k-contiguous
    (PipelinedDmmaSelection(planes_n=2, partition_m=4, partition_n=3, stage_k=32), ("col", "row"), None),
    (PipelinedDmmaSelection(fragment_buffering=False), ("row", "col"), Commenting()),
]


@pytest.mark.parametrize("sel, layouts, listener", SIM_CASES,
                         ids=[f"case{i}-{'-'.join(c[1])}" for i, c in enumerate(SIM_CASES)])
def test_stage_computes_the_product(sel, layouts, listener):
    st, c, written, ref = simulate(sel, layouts, listener)
    smem_layout = getattr(sel, "smem_layout", "k_major")
    assert st.lhs_k_contiguous == (smem_layout == "global" and layouts[0] == "row")
    assert st.rhs_k_contiguous == (smem_layout == "global" and layouts[1] == "col")
    assert np.all(written == 1), f"elements written {np.unique(written)} times"
    np.testing.assert_array_equal(c, ref)


def test_the_interpreter_sees_a_wrong_fragment():
    """The check has teeth: a tile reading A[g][t] transposed (A[t][g]) must fail it."""

    class Transposed(DmmaTile):
        def load_lhs(self, cfg, d, frag, src):
            return f"{frag} = {src.at('(((UNIT_ID & 31) >> 2) & 3)', '((UNIT_ID & 31) & 3)')};"

    stage = PlanePartitionedStage(Transposed())
    p = MatmulProblem(1, 512, 512, 512, FLOAT64, FLOAT64, FLOAT64)
    st = stage.setup(p, DmmaSelection(planes_m=1, planes_n=1, partition_m=1, partition_n=1, stage_k=4), SM80)
    rng = np.random.default_rng(1)
    a = rng.integers(-8, 9, (8, 4)).astype(np.float64)
    b = rng.integers(-8, 9, (4, 8)).astype(np.float64)
    lhs, rhs = np.full(st.lhs_smem_elems, np.nan), np.full(st.rhs_smem_elems, np.nan)
    for k in range(4):
        lhs[k * st.lhs_ld: k * st.lhs_ld + 8] = a[:, k]
        rhs[k * st.rhs_ld: k * st.rhs_ld + 8] = b[k]
    code = "\n".join([stage.declare(st, SM80), stage.init_accumulators(st, SM80),
                      stage.execute(st, SM80, "lhs_smem", "rhs_smem", StageEventListener()),
                      stage.write(st, SM80, lambda r, c, v: f"STORE {r} @@ {c} @@ {v};")])
    stores = []
    run(parse(code), {"UNIT_ID": np.arange(32)}, {"lhs_smem": lhs, "rhs_smem": rhs}, stores)
    c = np.zeros((8, 8))
    for rows, cols, values in stores:
        c[rows, cols] = values
    assert not np.array_equal(c, a @ b)
