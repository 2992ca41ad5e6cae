"""The "double_buffering" family's two-stage members: numerics on OpenCL (through the family name),
the shape of the rendered kernel (loads of the next K slice interleaved with the tile executions,
one barrier per K step), its listener, and nvcc compile checks of its CUDA source.

Only a few distinct kernels are compiled (each PoCL build costs about a second): float32 runs every
shape of `cases.SHAPES` (four configs), the other dtypes two of them.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from cases import SHAPES
from cuda_compile import compile_all, jobs_of, nvcc_or_skip, prefetched
from gemm_engine.algorithms import (AlgorithmFamily, DoubleBufferingMmaAlgorithm, DoubleBufferingUnitAlgorithm,
                                    SimpleAlgorithm)
from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.errors import SetupError
from gemm_engine.global_.double_buffering import DoubleBufferingGlobalMatmul
from gemm_engine.global_.listeners import DoubleBufferingListener
from gemm_engine.problem import Layout
from gemm_engine.stage.events import BeforeStore, Begin, Finish, KernelStart, TileMatmulCompleted
from helpers import DTYPES, assert_close, random
from renders import OPENCL_DEVICE, flat, problem, render

ALG = "double_buffering"
SHAPE_IDS = ["x".join(map(str, s)) for s in SHAPES]
def operands(rng, shape, dtype):
    batch, m, n, k = shape
    lead = (batch,) if batch > 1 else ()
    return random(rng, lead + (m, k), dtype), random(rng, lead + (k, n), dtype)


# -- numerics (OpenCL / PoCL) -----------------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_float32_shapes(opencl_engine, rng, shape):
    a, b = operands(rng, shape, "float32")
    assert_close(opencl_engine.matmul(a, b, algorithm=ALG), a, b, "float32")


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d != "float32"])
@pytest.mark.parametrize("shape", [SHAPES[0], SHAPES[2]], ids=[SHAPE_IDS[0], SHAPE_IDS[2]])
def test_other_dtypes(opencl_engine, rng, dtype, shape):
    a, b = operands(rng, shape, dtype)
    assert_close(opencl_engine.matmul(a, b, algorithm=ALG), a, b, dtype)


def test_many_k_steps_and_column_major(opencl_engine, rng):
    # 10 K steps: both buffers are reused several times; a transposed lhs exercises the other
    # loader path for the next-slice loads.
    a, b = random(rng, (96, 160), "float32"), random(rng, (160, 70), "float32")
    assert_close(opencl_engine.matmul(a, b, algorithm=ALG), a, b, "float32")
    at = np.ascontiguousarray(a.T).T
    assert_close(opencl_engine.matmul(at, b, algorithm=ALG), at, b, "float32")


def test_broadcast_batch(opencl_engine, rng):
    m, n, k = SHAPES[1][1:]   # the config of SHAPES[1]: no new compile
    a, b = random(rng, (3, 1, m, k), "float32"), random(rng, (4, k, n), "float32")
    assert_close(opencl_engine.matmul(a, b, algorithm=ALG), a, b, "float32")
    a2 = random(rng, (2, m, k), "float32")
    b2 = random(rng, (k, n), "float32")
    assert_close(opencl_engine.matmul(a2, b2, algorithm=ALG), a2, b2, "float32")


# -- rendered source (no device) --------------------------------------------------------------------
@pytest.mark.parametrize("device", [nominal_cuda_device(), OPENCL_DEVICE], ids=["cuda", "opencl"])
@pytest.mark.parametrize("shape", [(256, 256, 512), (65, 63, 33)], ids=["big", "odd"])
def test_loads_interleaved_with_tile_executions(device, shape):
    alg, cfg, dialect, src = render(problem(*shape), device)
    src = flat(src)
    g, stage = cfg.batch.global_, cfg.batch.global_.stage
    # Every tile execution of the stage (a unit's partition may hold several tiles per k step).
    st = alg.components.global_.stage
    f = stage.fragments
    tile_execs = [flat(st.tile.execute(stage.tile, dialect, f.lhs(i), f.rhs(j), f.acc(i, j)))
                  for i in range(stage.partition_m) for j in range(stage.partition_n)]
    loop = src.index("for (i64 k0 = 0;")
    execs = sorted(i for e in tile_execs for i in range(len(src)) if src.startswith(e, i))
    n = stage.stage_k * stage.partition_m * stage.partition_n
    assert len(execs) == n and execs[0] > loop, "expected the stage's k loop unrolled"
    for ident, loader in (("lhs", g.lhs_loader), ("rhs", g.rhs_loader)):
        # Global reads only: an element (lhs[...]) or a vector (lhs + ...) of the operand.
        reads = [m.start() for m in re.finditer(rf"\b{ident}(\[| \+ )", src)]
        before = [i for i in reads if i < loop]
        between = [i for i in reads if execs[0] < i < execs[-1]]
        # Prologue loads slice 0; every task of the next slice lands between two tile executions.
        assert len(before) == loader.tasks and len(between) == loader.tasks, (ident, before, between)
    sk = stage.stage_k
    assert src.count(f"if (k0 + {sk} < K) {{") == g.lhs_loader.tasks + g.rhs_loader.tasks
    # One barrier after the prologue and one per K step.
    assert src.count("SYNC_CUBE();") == 2
    assert f"lhs_smem[{2 * stage.lhs_smem_elems}]" in src
    assert f"rhs_smem[{2 * stage.rhs_smem_elems}]" in src


class RecordingDoubleBufferingListener(DoubleBufferingListener):
    """Records the events it is shown and the code it answers, per instance."""

    instances: list = []

    def __init__(self, tasks):
        super().__init__(tasks)
        self.events, self.answers = [], []
        type(self).instances.append(self)

    def on_event(self, event):
        code = super().on_event(event)
        self.events.append(event)
        self.answers.append(code)
        return code


class RecordingGlobal(DoubleBufferingGlobalMatmul):
    listener_class = RecordingDoubleBufferingListener


class RecordingAlgorithm(DoubleBufferingUnitAlgorithm):   # not registered: a swap of one attribute
    global_ = RecordingGlobal


def test_listener_sees_tile_events_in_order():
    RecordingDoubleBufferingListener.instances.clear()
    alg, cfg, _, src = render(problem(65, 63, 33), OPENCL_DEVICE, RecordingAlgorithm())
    (listener,) = RecordingDoubleBufferingListener.instances
    st = cfg.batch.global_.stage
    n = st.stage_k * st.partition_m * st.partition_n     # one event per tile matmul
    tiles = [e for e in listener.events if isinstance(e, TileMatmulCompleted)]
    assert tiles == [TileMatmulCompleted(i, n) for i in range(n)]
    # The global events frame the stage's: kernel start, the stage's Begin .. Finish, before the store.
    stage_events = listener.events[1:-1]
    assert listener.events[0] == KernelStart() and listener.events[-1] == BeforeStore()
    assert stage_events[0] == Begin() and stage_events[-1] == Finish()
    assert listener.emitted == len(listener.tasks)
    assert all(flat(task) in flat(src) for task in listener.tasks)
    # Spread, not bunched: more than one event carries loads.
    assert sum(bool(a) for a in listener.answers) > 1


@pytest.mark.parametrize("tasks, n", [(8, 16), (16, 8), (8, 8), (5, 3), (1, 4), (0, 4)])
def test_listener_spreads_evenly_and_emits_each_task_once(tasks, n):
    listener = DoubleBufferingListener([f"t{j};" for j in range(tasks)])
    chunks = [listener.on_event(TileMatmulCompleted(i, n)) for i in range(n)]
    assert listener.on_event(Finish()) == ""
    emitted = [t for c in chunks for t in c.split("\n") if t]
    assert emitted == [f"t{j};" for j in range(tasks)]
    # Even over the gaps between tile executions; nothing after the last one (no compute left).
    sizes = [len([t for t in c.split("\n") if t]) for c in chunks]
    assert max(sizes[:-1]) - min(sizes[:-1]) <= 1 and sizes[-1] == 0


def test_listener_flushes_at_finish():
    # A stage that offers no tile events (or fewer than planned) still gets every load.
    listener = DoubleBufferingListener(["a;", "b;", "c;"])
    assert listener.on_event(Begin()) == ""
    assert listener.on_event(TileMatmulCompleted(0, 4)) == "a;"
    assert listener.on_event(Finish()) == "b;\nc;"
    # A stage of one tile execution: everything after it (there is no gap to fill).
    single = DoubleBufferingListener(["a;", "b;"])
    assert single.on_event(TileMatmulCompleted(0, 1)) == "a;\nb;"


def test_refuses_when_two_buffers_do_not_fit():
    small = DeviceInfo(backend="opencl", name="small", compute_units=1, max_shared_memory=12 * 1024,
                       max_threads_per_cube=1024, plane_size=1)
    p = problem(128, 128, 64)
    render(p, small, SimpleAlgorithm())   # one buffer of 64 x 64 x 16 f32 (8.5 KiB) fits
    with pytest.raises(SetupError, match="shared memory"):
        render(p, small)


# -- CUDA compile checks (nvcc, no GPU) -------------------------------------------------------------
CUDA_CASES = [  # (dtype, (m, n, k), lhs layout)
    ("float32", (256, 256, 512), Layout.ROW),   # the 128 x 128 x 8 SGEMM tiling
    ("float32", (65, 63, 33), Layout.COL),      # bounds checks, column-major next-slice loads
    ("float64", (97, 61, 53), Layout.ROW),
    ("float16", (1, 70, 40), Layout.ROW),
    ("bfloat16", (70, 1, 40), Layout.ROW),
]


class TwoStage(AlgorithmFamily):
    """The family's two-stage members (the pipelined rings ahead of them are compiled by their own
    tests): what "double_buffering" ran before it meant the family's best member."""
    name = "two_stage_double_buffering"
    variants = (DoubleBufferingMmaAlgorithm, DoubleBufferingUnitAlgorithm)


def cuda_case_sources() -> dict:
    sources = {}
    for cc in ((8, 0), (9, 0)):   # rendered for each target's nominal device, built for both archs
        for dtype, shape, layout in CUDA_CASES:
            *_, src = render(problem(*shape, dtype=dtype, lhs_layout=layout), nominal_cuda_device(*cc), TwoStage())
            sources.setdefault(src, f"{dtype} {shape} {layout.value} sm_{cc[0]}{cc[1]}")
    return {name: src for src, name in sources.items()}


@pytest.mark.nvcc
@prefetched(lambda: jobs_of(cuda_case_sources()))
def test_cuda_sources_compile_for_sm80_and_sm90a():
    nvcc = nvcc_or_skip()
    failures = compile_all(cuda_case_sources(), nvcc)
    assert not failures, "\n\n".join(f"{k}:\n{v[-2000:]}" for k, v in list(failures.items())[:3])
