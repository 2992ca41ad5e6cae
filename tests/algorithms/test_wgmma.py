"""``pipelined_wgmma``: setup refusals, generated-code structure, nvcc (sm_90a) compile checks, and
CUDA numerics (on an sm_90 GPU only) against a float64 reference."""
from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from conftest import get_engine
from cuda_compile import archs_for, compile_all, jobs_of, nvcc_or_skip, prefetched
from helpers import BF16, assert_close, np_dtype, random, reference, rel_error
from renders import joined_literals
from gemm_engine.algorithms.wgmma import PipelinedWgmmaAlgorithm, WgmmaSelection
from gemm_engine.batch.base import Workspace
from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.codegen.dialect import cuda_target_arch, dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem

SM90 = dialect_for(nominal_cuda_device(9, 0))
HALF = ["float16"] + (["bfloat16"] if BF16 is not None else [])


def problem(b=1, m=256, n=256, k=128, dtype="float16", layouts=("row", "row"), align=8):
    """A problem; dtype "tf32" is float32 with precision="tf32"."""
    precision = "tf32" if dtype == "tf32" else "default"
    et = BY_NAME["float32" if dtype == "tf32" else dtype]
    return MatmulProblem(b, m, n, k, et, et, et, Layout(layouts[0]), Layout(layouts[1]),
                         lhs_align=align, rhs_align=align, precision=precision)


def render(p, selection=None, dialect=SM90):
    alg = PipelinedWgmmaAlgorithm(selection)
    cfg = alg.setup(p, dialect)
    return cfg, alg.render(cfg, dialect)


# -- setup ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", [
    nominal_cuda_device(8, 0),
    nominal_cuda_device(10, 0),
    DeviceInfo(backend="opencl", name="pocl", compute_units=2, max_shared_memory=65536,
               max_threads_per_cube=1024, plane_size=32),
], ids=["sm80", "sm100", "opencl"])
def test_refuses_devices_without_wgmma(device):
    with pytest.raises(SetupError, match="wgmma"):
        PipelinedWgmmaAlgorithm().setup(problem(), dialect_for(device))


@pytest.mark.parametrize("dtype, words", [("float32", "opt in with precision='tf32'"),
                                          ("float64", "float16 / bfloat16")])
def test_refuses_other_dtypes(dtype, words):
    with pytest.raises(SetupError, match=words):
        PipelinedWgmmaAlgorithm().setup(problem(dtype=dtype), SM90)


@pytest.mark.parametrize("selection, words", [
    (WgmmaSelection(tile_n=80), "tile_n"),
    (WgmmaSelection(tile_n=96), "64-byte one"),      # a row-major rhs of 96 columns: the TMA loader writes it
    (WgmmaSelection(stage_k=32), "stage_k"),
    (WgmmaSelection(stage_k=128), "stage_k"),
    (WgmmaSelection(partition_m=2, tile_n=256), "accumulator registers"),
    (WgmmaSelection(stages=2, wgmma_pending=1), "prefetches nothing"),
    (WgmmaSelection(stages=6), "shared memory"),
])
def test_refuses_bad_selections(selection, words):
    with pytest.raises(SetupError, match=words):
        PipelinedWgmmaAlgorithm(selection).setup(problem(), SM90)


def select_wgmma_tiling(p, dialect):
    return PipelinedWgmmaAlgorithm().selection_for(p, dialect)


def test_tiling_rule_fills_the_device():
    big = select_wgmma_tiling(problem(m=4096, n=4096, k=4096), SM90)
    assert (big.stage_m, big.stage_n) == (256, 128)
    small = select_wgmma_tiling(problem(m=256, n=256), SM90)
    assert (small.stage_m, small.stage_n) == (64, 64)


# -- generated code ---------------------------------------------------------------------------------
@pytest.mark.parametrize("layouts, trans", [(("row", "row"), "0, 1"), (("col", "col"), "1, 0"),
                                            (("row", "col"), "0, 0"), (("col", "row"), "1, 1")])
def test_transpose_bits_follow_layouts(layouts, trans):
    _, src = render(problem(layouts=layouts))
    src = joined_literals(src)
    assert re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n64k16\.f32\.f16\.f16 .*p, 1, 1, " + trans, src)


def test_pipeline_structure():
    cfg, src = render(problem(m=4096, n=4096, k=4096), WgmmaSelection())
    assert cfg.units == 256 and cfg.batch.global_.stage.stage_n == 256
    body = src[src.index("for (int step"):]
    # slice landed -> proxy fence -> barrier, before any wgmma of the step; one batch per step
    assert body.index("ptx_cp_async_wait_1()") < body.index("ptx_fence_proxy_async()") < body.index("SYNC_CUBE()")
    assert body.count("ptx_wgmma_commit()") == 1 and "ptx_wgmma_wait_1()" in body
    assert "wgmma.wait_group.sync.aligned 1;" in src and "fence.proxy.async.shared::cta;" in src
    kernel = src[src.index("void gemm_engine_kernel("):]
    assert kernel.count("ptx_wgmma_m64n256k16_f32_f16_t01(") == 4   # stage_k 64 / 16, one warpgroup tile
    assert "cp.async.cg.shared.global" in src and "st.shared.v4" not in src
    assert cuda_target_arch(SM90.device, src) == "sm_90a"


@pytest.mark.parametrize("align, copy", [(8, "cp.async.cg.shared.global [%0], [%1], 16"),
                                         (4, "cp.async.ca.shared.global [%0], [%1], 8"),
                                         (2, "cp.async.ca.shared.global [%0], [%1], 4"),
                                         (1, "st.shared.v4.b32")])
def test_alignment_picks_copy_width(align, copy):
    _, src = render(problem(m=255, n=257, k=100, align=align))
    assert copy in src


# -- tf32: K-major operands, transposed first where they are not -----------------------------------
@pytest.mark.parametrize("layouts, copies", [(("row", "row"), ("rhs",)), (("row", "col"), ()),
                                             (("col", "col"), ("lhs",)), (("col", "row"), ("lhs", "rhs"))])
def test_tf32_transposes_only_operands_that_are_not_k_major(layouts, copies):
    p = problem(m=300, n=200, k=100, dtype="tf32", layouts=layouts, align=1)
    alg = PipelinedWgmmaAlgorithm()
    cfg, src = render(p)
    src = joined_literals(src)
    assert cfg.batch.global_.stage.stage_k == 32 and cfg.batch.global_.stage.tile.kind == "tf32"
    # k8 instructions without transpose immediates: K-major operands only
    assert re.search(r"m64n\d+k8\.f32\.tf32\.tf32 \{[^}]*\}, %\d+, %\d+, p, 1, 1;", src)
    names = [launch.name for launch in alg.launches(cfg, p)]
    assert names == [f"gemm_engine_k_major_{op}" for op in copies] + ["gemm_engine_kernel"]
    for op in ("lhs", "rhs"):
        assert (f"void gemm_engine_k_major_{op}(" in src) == (op in copies)
    pitch = 100                                   # K = 100 is already 16-byte rows of float32
    rows = sum({"lhs": 300, "rhs": 200}[op] for op in copies)
    assert alg.workspace(cfg, p) == (Workspace(BY_NAME["float32"], rows * pitch) if copies else None)
    if copies:   # the main kernel reads the copies, 16 bytes at a time
        # The main kernel reads the copy through its scope: rows k_pitch long.
        main = src[src.index("void gemm_engine_kernel("):]
        assert ("rhs_sw_src = rhs + " in main and "* k_pitch" in main.split("rhs_sw_src = rhs + ")[1].split(";")[0]) \
            or "rhs" not in copies
        assert "cp.async.cg.shared.global [%0], [%1], 16" in src


def test_tf32_pitch_rounds_k_up_to_16_bytes():
    p = problem(b=2, m=128, n=64, k=70, dtype="tf32", align=1)
    alg = PipelinedWgmmaAlgorithm()
    cfg, src = render(p)
    assert alg.workspace(cfg, p) == Workspace(BY_NAME["float32"], 2 * 64 * 72)
    assert "(K + 3) & ~(i64)3" in src
    assert "rhs_batch_stride == 0 ? 0 : b * N * k_pitch" in src   # a broadcast rhs is copied once


def test_tf32_two_k_atoms_per_stage():
    """stage_k = 64 tf32 elements: two 128-byte k-atoms per row; the instruction's k slices step
    32 bytes inside an atom, then a whole atom (extent x 128 bytes)."""
    p = problem(m=256, n=256, k=256, dtype="tf32", layouts=("row", "col"), align=4)
    sel = WgmmaSelection(warpgroups_m=1, tile_n=128, stage_k=64, stages=3)
    cfg, src = render(p, sel)
    kernel = src[src.index("void gemm_engine_kernel("):]
    assert kernel.count("ptx_wgmma_m64n128k8_f32_tf32(") == 8
    assert "wg_lhs_desc + 512)" in src       # lhs: k 32 starts one 64 x 128-byte atom on (8192 bytes >> 4)


def test_tf32_auto_rule_refuses_small_transposes():
    from gemm_engine.selector.conditions import wgmma_worth_it
    assert "costs more than it gains" in wgmma_worth_it(problem(m=256, n=4096, k=4096, dtype="tf32"), SM90)
    assert wgmma_worth_it(problem(m=256, n=4096, k=4096, dtype="tf32", layouts=("row", "col")), SM90) is None
    assert wgmma_worth_it(problem(m=4096, n=4096, k=4096, dtype="tf32"), SM90) is None
    assert wgmma_worth_it(problem(m=256, n=256, k=256), SM90) is None        # 16-bit: no pass


# -- nvcc -------------------------------------------------------------------------------------------
COMPILE_CASES = {
    "4096 rr": (problem(m=4096, n=4096, k=4096), None),
    "edges cc a4": (problem(m=257, n=255, k=100, layouts=("col", "col"), align=4), None),
    "edges rc a2 bf16": (problem(m=129, n=127, k=63, layouts=("row", "col"), align=2, dtype="bfloat16"), None),
    "odd cr a1": (problem(b=3, m=97, n=61, k=53, layouts=("col", "row"), align=1), None),
    "128x128 pending0": (problem(), WgmmaSelection(tile_n=128, wgmma_pending=0, stages=3)),
    "64x128 pm2": (problem(), WgmmaSelection(warpgroups_m=1, partition_m=2, tile_n=128)),
    "wg 2x2": (problem(m=300, n=600), WgmmaSelection(warpgroups_m=2, warpgroups_n=2, tile_n=128, stages=3)),
    "tf32 4096 rr": (problem(m=4096, n=4096, k=4096, dtype="tf32", align=4), None),
    "tf32 odd cr a1": (problem(b=3, m=97, n=61, k=53, dtype="tf32", layouts=("col", "row"), align=1), None),
    "tf32 rc sk64": (problem(m=300, n=200, k=190, dtype="tf32", layouts=("row", "col"), align=2),
                     WgmmaSelection(warpgroups_m=1, tile_n=128, stage_k=64, stages=3)),
}


def compile_case_sources() -> dict:
    return {name: render(p, sel)[1] for name, (p, sel) in COMPILE_CASES.items()}


@pytest.mark.nvcc
@prefetched(lambda: jobs_of(compile_case_sources(), archs_for(PipelinedWgmmaAlgorithm.min_arch)))
def test_sources_compile_for_sm90a():
    nvcc = nvcc_or_skip()
    failures = compile_all(compile_case_sources(), nvcc, archs=archs_for(PipelinedWgmmaAlgorithm.min_arch))
    assert not failures, "\n\n".join(f"{k}:\n{v[-2000:]}" for k, v in list(failures.items())[:2])


# -- numerics on an H100 / H200 -------------------------------------------------------------------------
def hopper_engine():
    engine = get_engine("cuda")
    if engine.runtime.device.compute_capability != (9, 0):
        pytest.skip(f"wgmma needs an sm_90 GPU, not {engine.runtime.device.name}")
    return engine


def operand(engine, host, layout, pad=0):
    """``host`` on the device in ``layout`` (col: a transposed view), its leading dimension
    padded by ``pad`` elements (a sliced view: pad 1 gives odd leading dimensions)."""
    t = host if layout == "row" else np.swapaxes(host, -1, -2)
    buf = np.zeros(t.shape[:-1] + (t.shape[-1] + pad,), t.dtype)
    buf[..., :t.shape[-1]] = t
    dev = engine.runtime.to_device(buf)[..., :t.shape[-1]]
    return dev if layout == "row" else dev.swapaxes(-1, -2)


NUMERIC_CASES = [  # (batch, m, n, k, layouts, pad, selection)
    (1, 256, 256, 128, ("row", "row"), 0, WgmmaSelection()),                 # 4096-style 128x256 tiling
    (1, 256, 256, 128, ("row", "row"), 0, None),
    (1, 257, 255, 129, ("row", "row"), 0, WgmmaSelection()),                 # +-1 edges, K % 64 != 0
    (1, 255, 257, 100, ("col", "col"), 0, WgmmaSelection(tile_n=128)),
    (1, 130, 200, 70, ("row", "col"), 0, WgmmaSelection(tile_n=128, wgmma_pending=0, stages=3)),
    (1, 130, 200, 70, ("col", "row"), 0, WgmmaSelection(warpgroups_m=1, partition_m=2, tile_n=64)),
    (3, 65, 130, 200, ("row", "row"), 0, None),                              # batch
    (1, 300, 600, 190, ("row", "row"), 0, WgmmaSelection(warpgroups_m=2, warpgroups_n=2, tile_n=128, stages=3)),
    (1, 97, 61, 53, ("row", "row"), 1, None),                                # odd ld: register path
    (1, 97, 61, 52, ("col", "row"), 4, None),                                # align 4: 8-byte copies
    (1, 1, 70, 40, ("row", "row"), 0, None),
    (1, 70, 1, 40, ("row", "col"), 0, None),
    (1, 50, 60, 1, ("row", "row"), 0, None),
]


@pytest.mark.parametrize("dtype", HALF + ["tf32"])
@pytest.mark.parametrize("case", NUMERIC_CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}x{c[3]}-{''.join(x[0] for x in c[4])}-p{c[5]}"
                                                            + ("" if c[6] is None else f"-{c[6].stage_m}x{c[6].stage_n}"))
def test_numerics(rng, dtype, case):
    engine = hopper_engine()
    b, m, n, k, layouts, pad, selection = case
    lead = (b,) if b > 1 else ()
    data = "float32" if dtype == "tf32" else dtype
    if dtype == "tf32" and selection is not None:
        selection = replace(selection, stage_k=32)
    a, bb = random(rng, lead + (m, k), data), random(rng, lead + (k, n), data)
    da, db = operand(engine, a, layouts[0], pad), operand(engine, bb, layouts[1], pad)
    out = engine.runtime.to_device(np.full(lead + (m, n), np.nan, dtype=np_dtype(data)))
    engine.matmul(da, db, out=out, algorithm=PipelinedWgmmaAlgorithm(selection),
                  precision="tf32" if dtype == "tf32" else None)
    if dtype == "tf32":   # 10-bit mantissas (truncated by wgmma), float32 accumulation
        assert rel_error(engine.runtime.to_host(out), reference(a, bb)) < 5e-3
    else:
        assert_close(engine.runtime.to_host(out), a, bb, dtype)


@pytest.mark.parametrize("layouts", [("row", "row"), ("col", "row"), ("row", "col")], ids="-".join)
def test_tf32_broadcast_rhs(rng, layouts):
    """(B, M, K) @ (K, N): the rhs is copied (transposed) once, its copy read with stride 0."""
    engine = hopper_engine()
    a, bb = random(rng, (3, 130, 70), "float32"), random(rng, (70, 150), "float32")
    da, db = operand(engine, a, layouts[0]), operand(engine, bb, layouts[1])
    out = engine.matmul(da, db, algorithm=PipelinedWgmmaAlgorithm(), precision="tf32")
    assert rel_error(engine.runtime.to_host(out), reference(a, bb)) < 5e-3


def test_short_k_stages_the_output_through_shared_memory():
    """A short K is output-bound: the default tiling writes through a shared tile in 16-byte rows
    (and a small tile on a two-slot ring); a long K keeps direct fragment stores (measured faster)."""
    from gemm_engine.algorithms import REGISTRY
    from gemm_engine.codegen.device import nominal_cuda_device
    from gemm_engine.codegen.dialect import dialect_for
    from gemm_engine.dtypes import BFLOAT16
    from gemm_engine.problem import MatmulProblem

    d = dialect_for(nominal_cuda_device(9, 0))
    alg = REGISTRY["pipelined_wgmma"]()
    short = MatmulProblem(1, 8192, 8192, 64, BFLOAT16, BFLOAT16, BFLOAT16, lhs_align=8, rhs_align=8)
    cfg = alg.setup(short, d)
    assert (cfg.batch.global_.stage.stage_m, cfg.batch.global_.stages) == (64, 2)
    assert "out_tile" in alg.render(cfg, d)
    long = MatmulProblem(1, 4096, 4096, 4096, BFLOAT16, BFLOAT16, BFLOAT16, lhs_align=8, rhs_align=8)
    assert "out_tile" not in alg.render(alg.setup(long, d), d)
