"""Batch dispatch: every order of output tiles, one cube per tile or persistent cubes, computes the
same result (bitwise) as row-major; every order is a bijection onto the tiles of every batch entry."""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np
import pytest

from cuda_compile import archs_for, compile_jobs, failures_of, nvcc_or_skip, prefetched
from gemm_engine.algorithms import REGISTRY, UnitSelection
from gemm_engine.algorithms.accelerated import PlaneSelection
from gemm_engine.algorithms.pipelined import PipelinedSelection
from gemm_engine.algorithms.simple import SimpleUnitAlgorithm
from gemm_engine.algorithms.wgmma import WgmmaSelection
from gemm_engine.batch.dispatch import DISPATCHES, Dispatch, DispatchScope, dispatch_for, register_dispatch
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME, FLOAT32
from gemm_engine.errors import SetupError
from gemm_engine.global_.simple import SimpleGlobalMatmul
from gemm_engine.problem import MatmulProblem
from helpers import assert_close, np_dtype, random

# -- every order is a bijection ------------------------------------------------------------------
#: Orders the bijection harness renders, with widths below, equal to and above the grid sizes.
HARNESS_ORDERS = ([("row_major", 1), ("col_major", 1)]
                  + [(name, w) for name in ("swizzled", "grouped") for w in (1, 2, 3, 5, 16)])
MAX_BATCH, MAX_CUBES = 3, 9


def _grids():
    """(batch, cubes_m, cubes_n) in the order the harness walks them."""
    return [(b, m, n) for b in range(1, MAX_BATCH + 1) for m in range(1, MAX_CUBES + 1)
            for n in range(1, MAX_CUBES + 1)]


#: The harness's own names (none of the kernels'), so an order that reads or defines anything but
#: its scope's names does not compile.
HARNESS_SCOPE = DispatchScope(cube="h_cube", cubes_m="h_cubes_m", cubes_n="h_cubes_n", batch="h_batch",
                              b="h_b", row="h_row", col="h_col", prefix="h_dispatch_")


def _harness(d, orders) -> str:
    """One unit runs each order's code (``define`` for `HARNESS_SCOPE`) for every cube of every grid
    of `_grids`, writing (b, cube_row, cube_col) one after the other."""
    s = HARNESS_SCOPE
    lines = [d.preamble([FLOAT32]), "KERNEL void dispatch_harness(GLOBAL i64* out) {", "i64 at = 0;"]
    for order in orders:
        lines += [
            f"for (i64 h_batch = 1; h_batch <= {MAX_BATCH}; ++h_batch)",
            f"for (i64 h_cubes_m = 1; h_cubes_m <= {MAX_CUBES}; ++h_cubes_m)",
            f"for (i64 h_cubes_n = 1; h_cubes_n <= {MAX_CUBES}; ++h_cubes_n)",
            "for (i64 h_cube = 0; h_cube < h_batch * h_cubes_m * h_cubes_n; ++h_cube) {",
            order.define(s),
            f"out[at] = {s.b}; out[at + 1] = {s.row}; out[at + 2] = {s.col}; at += 3;",
            "}",
        ]
    return "\n".join(lines + ["}"])


def _run_harness(engine, orders) -> list[dict]:
    """Per order: {(batch, cubes_m, cubes_n): (b, cube_row, cube_col) of each cube}, as the rendered
    code computes it in a kernel (not a Python copy of it)."""
    rt = engine.runtime
    per_order = sum(b * m * n for b, m, n in _grids())
    out = rt.to_device(np.full(3 * per_order * len(orders), -1, np.int64))
    rt.launch(rt.kernel(_harness(rt.dialect, orders), "dispatch_harness"), 1, 1, [rt.ptr_arg(out)[0]])
    walks = []
    for seq in rt.to_host(out).reshape(len(orders), per_order, 3):
        at, grids = 0, {}
        for batch, m, n in _grids():
            grids[batch, m, n] = seq[at:at + batch * m * n]
            at += batch * m * n
        walks.append(grids)
    return walks


_walks: dict = {}


def _walk(engine) -> dict:
    """{(order, width): {(batch, cubes_m, cubes_n): (b, cube_row, cube_col) of each cube}}; run once
    per backend."""
    if engine.backend not in _walks:
        orders = [dispatch_for(name, width, scope=HARNESS_SCOPE) for name, width in HARNESS_ORDERS]
        _walks[engine.backend] = dict(zip(HARNESS_ORDERS, _run_harness(engine, orders)))
    return _walks[engine.backend]


def test_every_order_is_a_bijection(engine):
    built_in = {name for name, cls in DISPATCHES.items() if cls.__module__.startswith("gemm_engine.")}
    assert {name for name, _ in HARNESS_ORDERS} == built_in     # (a user's order: tests/algorithms/test_extending.py)
    for (name, width), grids in _walk(engine).items():
        for (batch, m, n), tiles in grids.items():
            b, row, col = tiles.T
            where = f"{name} width {width}, batch {batch}, {m} x {n} tiles"
            in_range = ((0 <= b) & (b < batch) & (0 <= row) & (row < m) & (0 <= col) & (col < n)).all()
            assert in_range, f"{where}: out of range"
            assert (np.bincount((b * m + row) * n + col, minlength=batch * m * n) == 1).all(), \
                f"{where}: not a bijection"
            # Batch indices are part of the dispatch: entry after entry, as the cube index says.
            assert (b == np.arange(batch * m * n) // (m * n)).all(), where
            if name == "swizzled":
                # Each tile shares its lhs row block or its rhs column block with the one before.
                same_b = b[1:] == b[:-1]
                shared = (row[1:] == row[:-1]) | (col[1:] == col[:-1])
                assert shared[same_b].all(), f"{where}: a jump between consecutive tiles"


def test_named_orders(engine):
    """Each order's sequence on a 3 x 4 grid of tiles."""
    def walk(name, width):
        return [tuple(t[1:]) for t in _walk(engine)[name, width][1, 3, 4].tolist()]

    assert walk("row_major", 1)[:5] == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    assert walk("col_major", 1)[:4] == [(0, 0), (1, 0), (2, 0), (0, 1)]
    # Strips 3 and 1 wide: down the first (right, left, right), up the second.
    assert walk("swizzled", 3) == [(0, 0), (0, 1), (0, 2), (1, 2), (1, 1), (1, 0), (2, 0), (2, 1),
                                   (2, 2), (2, 3), (1, 3), (0, 3)]
    # Groups of 2 rows, column by column, then the last row alone.
    assert walk("grouped", 2) == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (0, 3), (1, 3),
                                  (2, 0), (2, 1), (2, 2), (2, 3)]


# -- every order computes the same result ------------------------------------------------------------
#: Register-tile algorithms on 8 x 8 stages: 5 x 6 tiles per batch entry of 37 x 45 (partial tiles).
UNIT = UnitSelection(tile_m=2, tile_n=2, stage_m=8, stage_n=8, stage_k=4)
M, N, K = 37, 45, 19
#: (dispatch, dispatch_width): width 4 leaves a partial strip (6 = 4 + 2 tile columns) and a
#: partial group (5 = 4 + 1 tile rows).
ORDERS = [("row_major", 4), ("col_major", 4), ("swizzled", 1), ("swizzled", 4), ("grouped", 4)]


def _cases():
    for d, w in ORDERS:
        for persistent in (0, 1):
            if (d, persistent) != ("row_major", 0):
                yield "simple_unit", d, w, persistent
    for alg in ("double_buffering_unit", "ordered", "specialized"):
        yield from [(alg, "row_major", 4, 1), (alg, "swizzled", 3, 0), (alg, "grouped", 3, 1)]
    # CUDA only (skipped elsewhere): the pipelined rings, persistent.
    for alg in ("pipelined_mma", "pipelined_wgmma"):
        yield from [(alg, "swizzled", 3, 1), (alg, "grouped", 2, 1)]


#: The CUDA-only algorithms' smallest tilings (64 x 64 stages), half precision.
CUDA_SELECTIONS = {
    "pipelined_mma": PipelinedSelection(planes_m=2, planes_n=2, partition_m=2, partition_n=4, stage_k=32, stages=4),
    "pipelined_wgmma": WgmmaSelection(warpgroups_m=1, warpgroups_n=1, partition_m=1, tile_n=64),
}


def _run(engine, name, sel, a, b):
    out = np.full(a.shape[:-1] + b.shape[-1:], np.nan, a.dtype)   # unwritten tiles stay NaN
    try:
        engine.matmul(a, b, algorithm=REGISTRY[name](sel), out=out)
    except SetupError as exc:
        pytest.skip(f"{name} does not set up on {engine.backend}: {exc}")
    return out


@pytest.mark.parametrize("algorithm,dispatch,width,persistent", list(_cases()))
def test_order_gives_identical_results(engine, rng, algorithm, dispatch, width, persistent):
    if algorithm in CUDA_SELECTIONS:
        dtype, sel, (m, n, k) = "float16", CUDA_SELECTIONS[algorithm], (200, 200, 70)
    else:
        dtype, sel, (m, n, k) = "float32", UNIT, (M, N, K)
    # Enough batch entries that persistent cubes (one per compute unit) loop over 3 tiles or more.
    tiles = -(-m // sel.stage_m) * -(-n // sel.stage_n)
    batch = max(2, -(-3 * engine.runtime.device.compute_units // tiles))
    a, b = random(rng, (batch, m, k), np_dtype(dtype)), random(rng, (batch, k, n), np_dtype(dtype))
    expected = _run(engine, algorithm, sel, a, b)
    got = _run(engine, algorithm, replace(sel, dispatch=dispatch, dispatch_width=width,
                                          persistent=persistent), a, b)
    if persistent:
        cfg = engine.last_choice[1]
        cubes = engine.last_choice[0].cube_count(cfg, MatmulProblem(batch, m, n, k, *[BY_NAME[dtype]] * 3))
        assert cubes == min(batch * tiles, engine.runtime.device.compute_units) < batch * tiles
    assert np.array_equal(got, expected), f"{dispatch} (width {width}, persistent={persistent}) differs from row_major"
    assert_close(got, a, b, dtype)


# -- setup: spelling, compile keys, cube counts, refusals ---------------------------------------------
def _problem(batch=3, m=65, n=130):
    return MatmulProblem(batch, m, n, 16, FLOAT32, FLOAT32, FLOAT32)


def test_dispatch_parameters_are_in_the_compile_key():
    d = dialect_for(nominal_cuda_device())
    def cfg(**kw):
        return SimpleUnitAlgorithm(replace(UnitSelection(), **kw)).setup(_problem(), d)

    assert cfg(dispatch="swizzled", dispatch_width=3) != cfg(dispatch="swizzled", dispatch_width=4)
    assert cfg(dispatch="grouped", dispatch_width=3) != cfg(dispatch="swizzled", dispatch_width=3)
    # An order without a width ignores it: one kernel, whatever the field says.
    assert cfg(dispatch="row_major", dispatch_width=3) == cfg(dispatch="row_major", dispatch_width=8)
    assert cfg(persistent=1) != cfg(persistent=2) != cfg()


def test_persistent_cube_count():
    d = dialect_for(nominal_cuda_device())          # 132 compute units
    for persistent, batch, expect in [(0, 3, 3 * 2 * 3), (1, 3, 18), (1, 100, 132), (2, 100, 264)]:
        alg = SimpleUnitAlgorithm(UnitSelection(persistent=persistent))
        p = _problem(batch)
        assert alg.cube_count(alg.setup(p, d), p) == expect
    alg = SimpleUnitAlgorithm(UnitSelection(persistent=1))
    src = alg.render(alg.setup(_problem(), d), d)
    assert "cube < batch * cubes_m * cubes_n; cube += CUBE_COUNT" in src   # the batch count is an argument
    assert alg.setup(_problem(3), d) == alg.setup(_problem(4), d)           # so one kernel serves every batch


class OnceGlobal(SimpleGlobalMatmul):
    name = "once_global"
    reentrant = False


class OnceAlgorithm(SimpleUnitAlgorithm):
    name = "once"
    global_ = OnceGlobal


def test_refusals():
    d = dialect_for(nominal_cuda_device())
    OnceAlgorithm(UnitSelection()).setup(_problem(), d)
    with pytest.raises(SetupError, match="once_global is not reentrant"):
        OnceAlgorithm(UnitSelection(persistent=1)).setup(_problem(), d)
    with pytest.raises(SetupError, match="unknown dispatch 'diagonal'"):
        SimpleUnitAlgorithm(UnitSelection(dispatch="diagonal")).setup(_problem(), d)
    with pytest.raises(SetupError, match="dispatch_width=0"):
        SimpleUnitAlgorithm(UnitSelection(dispatch="grouped", dispatch_width=0)).setup(_problem(), d)
    with pytest.raises(SetupError, match="persistent=-1"):
        SimpleUnitAlgorithm(UnitSelection(persistent=-1)).setup(_problem(), d)


# -- the contract: what an order reads and defines is its scope's, checked before any compile ----------
@dataclass(frozen=True)
class NoColumnDispatch(Dispatch):
    """Defines the batch entry and the row, but no column."""

    name: ClassVar[str] = "test_no_column"

    def render(self, s: DispatchScope) -> str:
        return f"const i64 {s.b} = {s.cube} / ({s.cubes_m} * {s.cubes_n});\nconst i64 {s.row} = 0;"


@dataclass(frozen=True)
class OldNoColumnDispatch(Dispatch):
    """The old form (no scope), defining b and cube_row only."""

    name: ClassVar[str] = "test_old_no_column"

    def render(self) -> str:
        return "const i64 b = 0;\nconst i64 cube_row = cube;"


@dataclass(frozen=True)
class UnprefixedDispatch(Dispatch):
    """Row-major, with a helper whose name lacks the scope's prefix (it could clash with the kernel's)."""

    name: ClassVar[str] = "test_unprefixed"

    def render(self, s: DispatchScope) -> str:
        return "\n".join([f"const i64 tiles = {s.cubes_m} * {s.cubes_n};", f"const i64 {s.b} = {s.cube} / tiles;",
                          f"const i64 {s.row} = ({s.cube} % tiles) / {s.cubes_n};",
                          f"const i64 {s.col} = ({s.cube} % tiles) % {s.cubes_n};"])


@dataclass(frozen=True)
class OldReversedDispatch(Dispatch):
    """The old form: row-major walked backwards, fixed names (the README's example before scopes)."""

    name: ClassVar[str] = "test_old_reversed"

    def render(self) -> str:
        return "\n".join(["const i64 per_batch = cubes_m * cubes_n;",
                          "const i64 backwards = batch * per_batch - 1 - cube;",
                          "const i64 b = backwards / per_batch;",
                          "const i64 cube_row = (backwards % per_batch) / cubes_n;",
                          "const i64 cube_col = (backwards % per_batch) % cubes_n;"])


for _order in (NoColumnDispatch, OldNoColumnDispatch, UnprefixedDispatch, OldReversedDispatch):
    register_dispatch(_order, replace=True)


@pytest.mark.parametrize("order", ["test_no_column", "test_old_no_column"])
@pytest.mark.parametrize("algorithm,batch_level", [("simple_unit", "partitioned_batch"),
                                                   ("split_k_unit", "split_k_batch"),
                                                   ("specialized_wgmma", "tma_k_major_batch")])
def test_an_order_that_does_not_define_its_outputs_is_refused_at_setup(order, algorithm, batch_level):
    """A SetupError naming the order and the batch level, at setup: before any source is rendered."""
    d = dialect_for(nominal_cuda_device(9, 0))
    dtype = FLOAT32 if algorithm != "specialized_wgmma" else BY_NAME["float16"]
    p = MatmulProblem(2, 300, 300, 4096, dtype, dtype, dtype)
    with pytest.raises(SetupError) as info:
        REGISTRY[algorithm](dispatch=order).setup(p, d)
    err = info.value
    assert err.component == batch_level and DISPATCHES[order].__name__ in err.reason, err
    assert "does not define cube_col" in err.reason, err


def test_an_order_declaring_a_name_without_the_prefix_is_refused():
    d = dialect_for(nominal_cuda_device())
    with pytest.raises(SetupError, match=r"UnprefixedDispatch.*declares tiles.*'dispatch_'") as info:
        SimpleUnitAlgorithm(UnitSelection(dispatch="test_unprefixed")).setup(_problem(), d)
    assert info.value.component == "partitioned_batch"


@pytest.mark.parametrize("name", ["row_major", "col_major", "swizzled", "grouped"])
def test_an_order_renders_the_names_its_scope_gives(name):
    s = DispatchScope(cube="(c + 1)", cubes_m="rows", cubes_n="cols", batch="nb", b="bb", row="r", col="cc",
                      prefix="q_")
    code = dispatch_for(name, 3, scope=s).define(s)
    assert "const i64 bb = (c + 1) / q_per_batch;" in code and "const i64 r = " in code and "const i64 cc = " in code
    names = set(re.findall(r"[A-Za-z_]\w*", code))
    assert not names & {"cube", "cubes_m", "cubes_n", "batch", "b", "cube_row", "cube_col"}, names
    assert all(n.startswith("q_") for n in names - {"const", "i64", "c", "rows", "cols", "nb", "bb", "r", "cc"}), names


def test_old_form_orders_keep_working_in_any_scope(engine):
    """An order written as ``render(self)`` (fixed names) renders unchanged where the scope uses those
    names, and in a block of its own that reads and defines the scope's names where it does not; the
    kernel computes the same tiles either way."""
    old = OldReversedDispatch()
    assert old.define() == old.render()
    rebound = old.define(HARNESS_SCOPE)
    assert "const i64 cube = h_dispatch_in_cube;" in rebound and "const i64 h_b = h_dispatch_out_b;" in rebound
    (walk,) = _run_harness(engine, [old])
    for (batch, m, n), tiles in walk.items():
        rev = np.arange(batch * m * n)[::-1]
        assert (tiles == np.stack([rev // (m * n), (rev % (m * n)) // n, rev % n], axis=1)).all(), (batch, m, n)


def test_scope_inputs_are_names_numbers_or_parenthesized():
    with pytest.raises(ValueError, match="'c \\+ 1' must be a name"):
        DispatchScope(cube="c + 1")
    with pytest.raises(ValueError, match="'b b' is not a C name"):
        DispatchScope(b="b b")


def test_an_order_without_render_is_refused():
    @dataclass(frozen=True)
    class Blank(Dispatch):
        name: ClassVar[str] = "test_blank"

    with pytest.raises(SetupError, match="Blank.*has no render"):
        Blank().define(DispatchScope(), "partitioned_batch")


# -- CUDA sources of the new options compile ----------------------------------------------------------
def dispatch_jobs() -> list:
    d = dialect_for(nominal_cuda_device(9, 0))
    f16 = BY_NAME["float16"]
    half = MatmulProblem(2, 200, 136, 70, f16, f16, f16)
    cases = [
        ("simple_unit", UNIT, _problem(), "swizzled", 1),
        ("specialized", UnitSelection(), _problem(), "grouped", 1),
        ("simple_mma", PlaneSelection(), half, "col_major", 2),
        ("pipelined_mma", CUDA_SELECTIONS["pipelined_mma"], half, "grouped", 1),
        ("pipelined_wgmma", CUDA_SELECTIONS["pipelined_wgmma"], half, "swizzled", 1),
    ]
    jobs = []
    for name, sel, problem, dispatch, persistent in cases:
        alg = REGISTRY[name](replace(sel, dispatch=dispatch, dispatch_width=3, persistent=persistent))
        src = alg.render(alg.setup(problem, d), d)
        jobs += [(f"{name} {dispatch} persistent={persistent}", src, arch)
                 for arch in archs_for(getattr(REGISTRY[name], "min_arch", None))]
    return jobs


@pytest.mark.nvcc
@prefetched(dispatch_jobs)
def test_cuda_sources_compile():
    nvcc = nvcc_or_skip()
    failures = failures_of(compile_jobs(dispatch_jobs(), nvcc))
    assert not failures, "\n\n".join(f"{k}:\n{v[-2000:]}" for k, v in list(failures.items())[:3])
