"""Carried fragments (`PipelinedGlobalMatmul`'s ``carry_fragments``, `CARRIED_FRAGMENTS` stages): the
step's wait and barrier move before the stage's last k tile, and the next ring slot's first
fragments are loaded under that k tile's tile matmuls.

CPU: which presets carry, where the handover lands in the rendered step, the refusals (a stage
without the capability, an odd number of k tiles, no fragment buffering, two slots), nvcc compile
checks. CUDA: poisoned outputs against float64 numpy and bit for bit against the plain ring (the
same tile matmuls in the same order), every k-step count from 1, edges, batch, layouts, an f16
``mma.sync`` composition and a fused epilogue.
"""
from __future__ import annotations

import numpy as np
import pytest

from cuda_compile import SM90A as SM90A_FLAG, compile_jobs, nvcc_or_skip, prefetched, spill_problems_of
from helpers import cuda_engine_or_skip, device_col_major
from gemm_engine.algorithms.dmma import PipelinedDmmaAlgorithm, PipelinedDmmaSelection
from gemm_engine.algorithms.pipelined import PipelinedMmaAlgorithm
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT16, FLOAT32, FLOAT64
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.stage.base import SMEM_STAGE
from gemm_engine.stage.plane_partitioned import PlanePartitionedStage

SM80, SM90 = dialect_for(nominal_cuda_device(8, 0)), dialect_for(nominal_cuda_device(9, 0))
ROW, COL = Layout.ROW, Layout.COL
#: The H100's 128 x 64 f64 preset, and its plain-ring twin.
CARRIED = dict(planes_m=2, planes_n=2, partition_m=4, partition_n=4, tile_m=16, tile_k=8, stage_k=16, stages=3,
               fragment_buffering=True, carry_fragments=True)
PLAIN = {**CARRIED, "carry_fragments": False}


def f64_problem(shape=(1, 512, 512, 512), lhs=ROW, rhs=ROW, align=(2, 2)):
    return MatmulProblem(*shape, FLOAT64, FLOAT64, FLOAT64, lhs, rhs, *align)


def f16_problem(shape=(1, 512, 512, 512)):
    return MatmulProblem(*shape, FLOAT16, FLOAT16, FLOAT32, ROW, ROW, 8, 8)


# -- which kernels carry ---------------------------------------------------------------------------
@pytest.mark.parametrize("dialect, align, carried", [(SM90, (2, 2), True), (SM90, (1, 2), False),
                                                     (SM90, (2, 1), False), (SM80, (2, 2), False)])
def test_default_carries_on_sm90_with_16_byte_copies(dialect, align, carried):
    for shape in ((1, 4096, 4096, 4096), (1, 1000, 1000, 1000), (3, 129, 67, 45)):
        cfg = PipelinedDmmaAlgorithm().setup(f64_problem(shape, align=align), dialect)
        assert cfg.batch.global_.carry_fragments is carried, (shape, align)


def test_tuning_space_carries_only_where_copies_are_16_bytes():
    alg = PipelinedDmmaAlgorithm()
    assert all(s["carry_fragments"] for s in alg.tuning_space(f64_problem(), SM90))
    assert not any(s.get("carry_fragments") for s in alg.tuning_space(f64_problem(align=(1, 1)), SM90))


def _loop(src: str) -> str:
    return src[src.index("for (int step = 0"):]


def test_handover_sits_before_the_last_k_tile():
    """One barrier a step, after k tile 0's DMMAs and before the next slot's loads; k tile 1's DMMAs
    after those loads; the first slot's first fragments loaded once before the loop."""
    alg = PipelinedDmmaAlgorithm(PipelinedDmmaSelection(**CARRIED))
    src = alg.render(alg.setup(f64_problem(), SM90), SM90)
    loop = _loop(src)
    assert loop.count("SYNC_CUBE();") == 1 and loop.count("ptx_cp_async_wait_") == 1
    barrier = loop.index("SYNC_CUBE();")
    assert "cur_slot * " not in loop[barrier:loop.index("cur_slot = cur_slot + 1")], \
        "the current slot is read after the handover (its slot may be refilled from then on)"
    first_k1 = loop.index("ptx_dmma_m16n8k8(acc_0_0, lhs_frag_1_0")
    assert loop.index("ptx_dmma_m16n8k8(acc_0_0, lhs_frag_0_0") < barrier < loop.index("next_slot * ") < first_k1
    assert loop.index("ptx_cp_async_wait_1();") < barrier
    before = src[:src.index("for (int step = 0")]
    assert "if (k_steps > 0) {" in before and "lhs_frag_0_0[0] = (lhs_smem + cur_slot" in before
    plain = PipelinedDmmaAlgorithm(PipelinedDmmaSelection(**PLAIN))
    plain_loop = _loop(plain.render(plain.setup(f64_problem(), SM90), SM90))
    assert plain_loop.index("SYNC_CUBE();") < plain_loop.index("ptx_dmma_m16n8k8") and "next_slot" not in plain_loop


@pytest.mark.parametrize("stages", [3, 4, 5])
def test_handover_waits_for_the_next_slice(stages):
    """S - 1 slices in flight: the handover of step i waits until at most S - 2 groups are pending
    (slice i + 1 has landed), the prologue the same (slice 0)."""
    alg = PipelinedDmmaAlgorithm(**{**CARRIED, "stages": stages})
    src = alg.render(alg.setup(f64_problem(), SM90), SM90)
    loop = _loop(src)
    assert loop.count(f"ptx_cp_async_wait_{stages - 2}();") == 1
    assert src[:src.index("for (int step = 0")].count(f"ptx_cp_async_wait_{stages - 2}();") == 1


def test_listener_sees_every_event_of_the_plain_ring():
    """A user listener gets the same events under carry (the next slot's loads in the last k tile)."""
    from gemm_engine.stage.events import StageEventListener

    def events(knobs):
        seen = []

        class Recorder(StageEventListener):
            def on_event(self, event):
                seen.append(type(event).__name__)
                return ""

        class Listening(PipelinedDmmaAlgorithm):
            name = "listening_dmma"
            listener = Recorder

        alg = Listening(**knobs)
        alg.render(alg.setup(f64_problem(), SM90), SM90)
        return sorted(seen)

    assert events(CARRIED) == events(PLAIN)


def _render_refusal(alg) -> str:
    """The reason of the SetupError rendering ``alg`` on sm_90 raises (it must raise one)."""
    with pytest.raises(SetupError) as info:
        alg.render(alg.setup(f64_problem(), SM90), SM90)
    return info.value.reason


def test_a_stage_that_drops_the_handover_is_refused():
    class Forgetful(PlanePartitionedStage):
        def execute(self, cfg, d, lhs_smem, rhs_smem, listener, carry=None):
            return super().execute(cfg, d, lhs_smem, rhs_smem, listener)

    class UserDmma(PipelinedDmmaAlgorithm):
        name = "user_dmma_forgetful"
        stage = Forgetful

    reason = _render_refusal(UserDmma(**CARRIED))
    assert "Forgetful" in reason and "handover" in reason


def test_a_body_that_drops_the_carry_is_refused():
    from gemm_engine.global_.pipelined import PipelinedGlobalMatmul

    class OwnBody(PipelinedGlobalMatmul):
        def body(self, cfg, d, scope):
            st = cfg.stage
            return self._ring_body(cfg, d, scope, prefetch=cfg.stages - 1, loader_declarations=[],
                                   lhs_cur=f"(lhs_smem + cur_slot * {st.lhs_smem_elems})",
                                   rhs_cur=f"(rhs_smem + cur_slot * {st.rhs_smem_elems})")

    class UserDmma(PipelinedDmmaAlgorithm):
        name = "user_dmma_own_body"
        global_ = OwnBody

    reason = _render_refusal(UserDmma(**CARRIED))
    assert "OwnBody" in reason and "carry" in reason


def test_overrides_of_the_ring_get_the_plain_ring():
    """The preset carries; a caller who sets the ring or stage without asking for carry gets the
    plain ring (two slots and no fragment buffering set up as before), and carry where asked."""
    for knobs in (dict(stages=2), dict(fragment_buffering=False), dict(stages=4), dict(tile_k=16, stage_k=32)):
        assert PipelinedDmmaAlgorithm(**knobs).setup(f64_problem(), SM90).batch.global_.carry_fragments is False
    assert PipelinedDmmaAlgorithm(stages=4, carry_fragments=True).setup(f64_problem(), SM90).batch.global_.carry_fragments
    assert PipelinedDmmaAlgorithm(planes_m=2).setup(f64_problem(), SM90).batch.global_.carry_fragments


# -- refusals ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("knobs, needle", [
    (dict(stage_k=8), "even number"),                      # one k tile of 8
    (dict(stage_k=24), "even number"),                     # three
    (dict(fragment_buffering=False), "fragment_buffering=True"),
    (dict(stages=2), "3 or more stages"),
])
def test_refuses_what_cannot_carry(knobs, needle):
    with pytest.raises(SetupError) as info:
        PipelinedDmmaAlgorithm(PipelinedDmmaSelection(**{**CARRIED, **knobs})).setup(f64_problem(), SM90)
    assert needle in info.value.reason and "carry_fragments" in info.value.reason


def test_refuses_a_stage_without_the_capability():
    class PlainStage(PlanePartitionedStage):
        provides = frozenset({SMEM_STAGE})

    class UserDmma(PipelinedDmmaAlgorithm):
        name = "user_dmma_plain_stage"
        stage = PlainStage

    with pytest.raises(SetupError) as info:
        UserDmma(**CARRIED).setup(f64_problem(), SM90)
    assert "PlainStage" in info.value.reason and "carried fragments" in info.value.reason
    assert UserDmma(**PLAIN).setup(f64_problem(), SM90).batch.global_.carry_fragments is False


# -- nvcc ----------------------------------------------------------------------------------------------
COMPILE_CASES = [  # (algorithm, problem, knobs): carried kernels beside the defaults test_dmma compiles
    (PipelinedDmmaAlgorithm, f64_problem((1, 1000, 1000, 1000), COL, ROW), {}),            # 64 x 64, 4 slots
    (PipelinedDmmaAlgorithm, f64_problem((1, 2048, 2048, 2048)), dict(CARRIED, stage_k=32, stages=4)),
    (PipelinedMmaAlgorithm, f16_problem((1, 1024, 1024, 1024)),
     dict(planes_m=2, planes_n=2, partition_m=4, partition_n=8, stage_k=32, stages=4, fragment_buffering=True,
          carry_fragments=True)),
]


def carried_jobs() -> list:
    out = []
    for i, (cls, prob, knobs) in enumerate(COMPILE_CASES):
        alg = cls(**knobs) if knobs else cls()
        cfg = alg.setup(prob, SM90)
        assert cfg.batch.global_.carry_fragments, i
        out.append((f"{cls.name} carried {i}", alg.render(cfg, SM90), SM90A_FLAG))
    return out


@pytest.mark.nvcc
@prefetched(carried_jobs)
def test_carried_kernels_compile_without_spills():
    nvcc = nvcc_or_skip()
    problems = spill_problems_of(compile_jobs(carried_jobs(), nvcc))
    assert not problems, problems


# -- CUDA numerics ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cuda():
    return cuda_engine_or_skip((9, 0), "sm_90 (m16n8k8 DMMA)")


def _operand(cp, host, view):
    return device_col_major(cp, host) if view == "col" else cp.asarray(host)


NUMERIC_CASES = [  # (shape (batch, m, n, k), lhs view, rhs view, knobs): k steps of 16 from 1 up
    ((1, 128, 64, 16), "plain", "plain", CARRIED), ((1, 128, 64, 32), "plain", "plain", CARRIED),
    ((1, 256, 128, 48), "plain", "col", CARRIED), ((1, 257, 129, 100), "col", "plain", CARRIED),
    ((1, 1, 7, 5), "plain", "plain", CARRIED), ((3, 130, 70, 47), "col", "col", CARRIED),
    ((1, 300, 200, 1000), "plain", "plain", dict(CARRIED, stage_k=32, stages=4)),
    ((2, 199, 99, 65), "plain", "col", dict(CARRIED, planes_m=2, partition_m=2, partition_n=4, stages=4)),
    ((1, 1024, 1024, 1024), "plain", "plain", CARRIED),
    *[((1, 128, 64, k), "plain", "plain", dict(CARRIED, stages=s)) for s in (4, 5) for k in (16, 32, 48)],
]


@pytest.mark.cuda
@pytest.mark.parametrize("shape, lview, rview, knobs", NUMERIC_CASES,
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else None)
def test_carried_numerics_match_float64_and_the_plain_ring(cuda, shape, lview, rview, knobs):
    engine, cp = cuda
    b, m, n, k = shape
    batch = (b,) if b > 1 else ()
    rng = np.random.default_rng(sum(shape) + 11)
    a, bb = rng.standard_normal(batch + (m, k)), rng.standard_normal(batch + (k, n))
    da, db = _operand(cp, a, lview), _operand(cp, bb, rview)
    outs = []
    for carry in (True, False):
        out = cp.full(batch + (m, n), np.nan)
        engine.matmul(da, db, out=out, algorithm=PipelinedDmmaAlgorithm(**{**knobs, "carry_fragments": carry}))
        assert engine.last_choice[1].batch.global_.carry_fragments is carry
        outs.append(cp.asnumpy(out))
    ref = np.matmul(a, bb)
    err = np.linalg.norm(outs[0] - ref) / np.linalg.norm(ref)
    assert np.isfinite(outs[0]).all() and err < 1e-13, f"{shape}: relative error {err:.2e}"
    assert np.array_equal(outs[0], outs[1]), "carried and plain rings differ"


@pytest.mark.cuda
def test_carried_fused_epilogue(cuda):
    engine, cp = cuda
    rng = np.random.default_rng(5)
    a, b, bias = rng.standard_normal((200, 90)), rng.standard_normal((90, 130)), rng.standard_normal(130)
    out = cp.full((200, 130), np.nan)
    engine.matmul(cp.asarray(a), cp.asarray(b), out=out, bias=cp.asarray(bias), activation="relu",
                  algorithm=PipelinedDmmaAlgorithm(**CARRIED))
    ref = np.maximum(a @ b + bias, 0)
    assert np.linalg.norm(cp.asnumpy(out) - ref) / np.linalg.norm(ref) < 1e-13


@pytest.mark.cuda
@pytest.mark.parametrize("k", [520, 517])     # 517: a's rows are an odd number of halves (register path)
def test_carried_f16_mma_composition(cuda, k):
    """The same global level and stage over the f16 mma.sync tile: carried fragments are not f64's;
    with a register-path loader too (its slice stored after the step's compute)."""
    engine, cp = cuda
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((300, k)).astype(np.float16), rng.standard_normal((k, 260)).astype(np.float16)
    alg = PipelinedMmaAlgorithm(planes_m=2, planes_n=2, partition_m=4, partition_n=8, stage_k=32, stages=4,
                                fragment_buffering=True, carry_fragments=True)
    out = cp.full((300, 260), np.nan, dtype=np.float16)
    engine.matmul(cp.asarray(a), cp.asarray(b), out=out, algorithm=alg)
    g = engine.last_choice[1].batch.global_
    assert g.carry_fragments and g.lhs_loader.registers == (k % 8 != 0)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(cp.asnumpy(out).astype(np.float64) - ref) / np.linalg.norm(ref) < 2e-3
