"""The "specialized_unit" algorithm (the specialized family's register member): compute units and
load-only units in one cube.

Numerics (the shared register-tile suite, plus splits only OpenCL allows), the shape of the rendered
kernel (one role branch, barriers outside it, loads only on loader units, the launch size), setup
refusals, and nvcc compile checks of explicit loader counts.
"""
from __future__ import annotations

import re

import pytest

from cuda_compile import compile_all, jobs_of, nvcc_or_skip, prefetched
from gemm_engine.algorithms.specialized import SpecializedAlgorithm, SpecializedSelection
from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.errors import SetupError
from gemm_engine.global_.specialized import SpecializedGlobalConfig
from helpers import assert_close, random
from renders import OPENCL_DEVICE, locate, problem, render
from unit_algorithm_suite import (test_broadcast_batch, test_column_major_operands,  # noqa: F401
                                  test_float32_shapes, test_many_k_steps, test_other_dtypes)

ALG = "specialized_unit"
CUDA = nominal_cuda_device()


@pytest.fixture
def algorithm():
    return ALG


# -- numerics: splits only a plane size of 1 allows (OpenCL / PoCL) ---------------------------------
@pytest.mark.parametrize("load_units", [5, 100], ids=["few_loaders", "many_loaders"])
def test_any_split_on_opencl(opencl_engine, rng, load_units):
    # 6 x 8 = 48 compute units: not a warp multiple, fine with a plane size of 1. 5 loaders run 39
    # and 52 tasks (the last partial) on the 24 x 8 and 8 x 32 slices; 100 run 2 and 3.
    sel = SpecializedSelection(tile_m=4, tile_n=4, stage_m=24, stage_n=32, stage_k=8, load_units=load_units)
    a, b = random(rng, (50, 37), "float32"), random(rng, (37, 70), "float32")
    if opencl_engine.device.plane_size != 1:  # e.g. NVIDIA's OpenCL: 32-wide planes
        with pytest.raises(SetupError, match="plane boundary"):
            opencl_engine.matmul(a, b, algorithm=SpecializedAlgorithm(sel))
        return
    assert_close(opencl_engine.matmul(a, b, algorithm=SpecializedAlgorithm(sel)), a, b, "float32")
    _, cfg = opencl_engine.last_choice
    assert cfg.units == 48 + load_units


# -- rendered source (no device) --------------------------------------------------------------------
def depth(src: str, pos: int) -> int:
    """Brace nesting depth at ``pos``."""
    return src.count("{", 0, pos) - src.count("}", 0, pos)


def block_end(src: str, start: int) -> int:
    """Index of the brace closing the first block opened at or after ``start``."""
    open_at = src.index("{", start)
    level = depth(src, open_at)
    return next(i for i in range(open_at + 1, len(src)) if src[i] == "}" and depth(src, i) == level + 1)


@pytest.mark.parametrize("device", [CUDA, OPENCL_DEVICE], ids=["cuda", "opencl"])
@pytest.mark.parametrize("shape", [(256, 256, 512), (65, 63, 33)], ids=["big", "odd"])
def test_one_role_branch_with_the_barrier_outside(device, shape):
    alg, cfg, dialect, src = render(problem(*shape), device, ALG)
    g = cfg.batch.global_
    compute, load = g.compute_units, g.load_units
    assert isinstance(g, SpecializedGlobalConfig) and compute == g.stage.units
    assert cfg.units == compute + load and f"LAUNCH_BOUNDS({compute + load})" in src
    (split,) = [m.start() for m in re.finditer(r"if \(UNIT_ID >= (\d+)\)", src)]
    assert src.startswith(f"if (UNIT_ID >= {compute})", split)
    loader_end = block_end(src, split)
    assert src.startswith("} else {", loader_end)
    compute_end = block_end(src, loader_end + 1)
    # The single barrier of the loop opens each step, before the branch, at the branch's own depth
    # (after it, PoCL 5.0's kernel compiler aborted: issue 35).
    loop = src.index("for (i64 k0 = ")
    (barrier,) = [m.start() for m in re.finditer(r"SYNC_CUBE\(\);", src)]
    assert loop < barrier < split and depth(src, barrier) == depth(src, split) == depth(src, loop) + 1
    assert src[barrier:split].count("\n") == 1     # nothing between the barrier and the branch
    # Global reads only in the loader branch, indexed from the first loader; the stage's tile
    # executions and the output stores only in the compute branch.
    for ident in ("lhs", "rhs"):
        # An element (lhs[...]) or a vector (lhs + ...) read of the operand.
        reads = [m.start() for m in re.finditer(rf"\b{ident}(\[| \+ )", src)]
        assert reads and all(split < i < loader_end for i in reads), ident
    assert "UNIT_ID + " not in src and f"const int load_unit = UNIT_ID - {compute};" in src
    st = alg.components.global_.stage   # the first tile of the unit's partition
    f = g.stage.fragments
    tile_exec = st.tile.execute(g.stage.tile, dialect, f.lhs(0), f.rhs(0), f.acc(0, 0))
    stores = [m.start() for m in re.finditer(r"\bout\[", src)]
    assert stores and all(loader_end < i < compute_end for i in stores + [locate(tile_exec, src)])
    # Two shared-memory stages per operand.
    assert f"lhs_smem[{2 * g.stage.lhs_smem_elems}]" in src and f"rhs_smem[{2 * g.stage.rhs_smem_elems}]" in src


def test_default_loaders_are_half_the_compute_units_in_whole_planes():
    # 4096 x 4096 (unaligned): the rule's 256-unit stage (smaller problems get smaller stages).
    _, cfg, _, _ = render(problem(4096, 4096, 512), CUDA, ALG)
    assert (cfg.batch.global_.compute_units, cfg.batch.global_.load_units) == (256, 128)
    _, cfg, _, _ = render(problem(256, 256, 512), OPENCL_DEVICE, ALG)   # 64 compute units on CPU
    assert (cfg.batch.global_.compute_units, cfg.batch.global_.load_units) == (64, 32)


# -- setup refusals ---------------------------------------------------------------------------------
ODD_SPLIT = SpecializedSelection(tile_m=4, tile_n=4, stage_m=24, stage_n=32, stage_k=8)   # 48 compute


def test_refuses_a_split_off_the_warp_boundary_on_cuda():
    with pytest.raises(SetupError, match="plane boundary"):
        render(problem(64, 64, 64), CUDA, SpecializedAlgorithm(ODD_SPLIT))
    render(problem(64, 64, 64), OPENCL_DEVICE, SpecializedAlgorithm(ODD_SPLIT))   # plane size 1


@pytest.mark.parametrize("load_units, match", [(-1, "must be positive"), (800, "exceed"),
                                                (15, "unroll 69 load tasks")])
def test_refuses_bad_loader_counts(load_units, match):
    sel = SpecializedSelection(load_units=load_units)   # 256 compute units
    with pytest.raises(SetupError, match=match):
        render(problem(64, 64, 64), CUDA, SpecializedAlgorithm(sel))


def test_refuses_when_two_buffers_do_not_fit():
    small = DeviceInfo(backend="opencl", name="small", compute_units=1, max_shared_memory=12 * 1024,
                       max_threads_per_cube=1024, plane_size=1)
    render(problem(64, 64, 64), small, "simple_unit")   # one buffer of 64 x 64 x 16 f32 (8.5 KiB)
    with pytest.raises(SetupError, match="shared memory"):
        render(problem(64, 64, 64), small, ALG)


# -- CUDA compile checks (nvcc, no GPU) -------------------------------------------------------------
def loader_count_sources() -> dict:
    # test_cuda_sources compiles the default selection of every test problem; these are other
    # loader counts: the most tasks allowed (64 per operand), a partial warp, one task each.
    sources = {}
    for load_units in (16, 40, 256):
        for dtype in ("float32", "float16"):
            _, _, _, src = render(problem(65, 63, 33, dtype), CUDA,
                                  SpecializedAlgorithm(SpecializedSelection(load_units=load_units)))
            sources[f"{dtype} load_units={load_units}"] = src
    return sources


@pytest.mark.nvcc
@prefetched(lambda: jobs_of(loader_count_sources()))
def test_explicit_loader_counts_compile():
    nvcc = nvcc_or_skip()
    failures = compile_all(loader_count_sources(), nvcc)
    assert not failures, "\n\n".join(f"{k}:\n{v[-2000:]}" for k, v in list(failures.items())[:3])
