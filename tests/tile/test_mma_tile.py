"""Tensor-core tile (MmaTile) and plane-partitioned stage: setup refusals, stage events, nvcc
compile checks for sm_80 / sm_90a (no spills, HMMA / LDSM in SASS), and CUDA numerics.

The numerics test needs CuPy and an sm_80+ GPU and skips otherwise; the compile tests need nvcc
(and cuobjdump for the SASS check) and skip otherwise.
"""
from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

from cuda_compile import ARCHS, compile_jobs, nvcc_or_skip, prefetched
from gemm_engine.algorithms import REGISTRY
from gemm_engine.algorithms.accelerated import PlaneSelection, SimpleMmaAlgorithm
from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BFLOAT16, FLOAT16, FLOAT32, FLOAT64
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.stage.events import (Begin, Finish, LhsLoaded, RecordingListener, RhsLoaded,
                                      StageEventListener, TileMatmulCompleted)
from gemm_engine.stage.plane_partitioned import PlanePartitionedStage
from gemm_engine.stage.unit_partitioned import UnitPartitionedStage
from gemm_engine.tile.mma import MmaTile
from gemm_engine.tile.register import RegisterTile

SM80, SM90 = dialect_for(nominal_cuda_device(8, 0)), dialect_for(nominal_cuda_device(9, 0))
TF32 = PlaneSelection(precision="tf32")
KINDS = {"f16": (FLOAT16, None), "bf16": (BFLOAT16, None), "tf32": (FLOAT32, TF32)}


def problem(et, shape=(1, 256, 256, 64), lhs=Layout.ROW, rhs=Layout.ROW):
    return MatmulProblem(*shape, et, et, et, lhs, rhs)


def render(kind, dialect=SM90, shape=(1, 256, 256, 64), lhs=Layout.ROW, rhs=Layout.ROW):
    et, sel = KINDS[kind]
    alg = SimpleMmaAlgorithm(sel)
    return alg.render(alg.setup(problem(et, shape, lhs, rhs), dialect), dialect)


# -- setup refusals -------------------------------------------------------------------------------
def opencl_dialect():
    return dialect_for(DeviceInfo(backend="opencl", name="nominal opencl", compute_units=16,
                                  max_shared_memory=65536, max_threads_per_cube=1024, plane_size=32))


@pytest.mark.parametrize("dialect, needle", [
    (opencl_dialect(), "mma.sync"),
    (dialect_for(nominal_cuda_device(7, 5)), "sm_80"),
])
def test_refuses_devices_without_mma_sync(dialect, needle):
    with pytest.raises(SetupError) as info:
        SimpleMmaAlgorithm().setup(problem(FLOAT16), dialect)
    assert info.value.component == "mma" and needle in info.value.reason


def test_refuses_plain_float32_and_float64():
    with pytest.raises(SetupError, match="tf32"):
        SimpleMmaAlgorithm().setup(problem(FLOAT32), SM90)
    with pytest.raises(SetupError, match="f64"):
        SimpleMmaAlgorithm(TF32).setup(problem(FLOAT64), SM90)


@pytest.mark.parametrize("sel, needle", [
    (PlaneSelection(tile_m=8), "instruction shape"),
    (PlaneSelection(tile_k=8), "instruction shape"),           # f16 needs k = 16
    (PlaneSelection(stage_k=24), "multiple of tile_k"),
    (PlaneSelection(planes_m=8, planes_n=8), "exceed"),
    (PlaneSelection(partition_m=8, partition_n=8), "accumulator registers"),
])
def test_refuses_bad_selections(sel, needle):
    with pytest.raises(SetupError, match=needle):
        SimpleMmaAlgorithm(sel).setup(problem(FLOAT16), SM90)


def test_refuses_unknown_precision_when_the_selection_is_built():
    with pytest.raises(ValueError, match=r"PlaneSelection\.precision: expected one of \('default', 'tf32'\)"):
        PlaneSelection(precision="fast")
    with pytest.raises(ValueError, match="precision"):
        SimpleMmaAlgorithm(precision="fast")


def test_stages_refuse_tiles_of_the_other_scope():
    with pytest.raises(SetupError, match="plane-scoped"):
        UnitPartitionedStage(MmaTile()).setup(problem(FLOAT16), PlaneSelection(), SM90)
    with pytest.raises(SetupError, match="unit-scoped"):
        PlanePartitionedStage(RegisterTile()).setup(problem(FLOAT32), PlaneSelection(), SM90)


def test_config_and_registry():
    assert REGISTRY["simple_mma"] is SimpleMmaAlgorithm
    stage = SimpleMmaAlgorithm().setup(problem(BFLOAT16), SM80).batch.global_.stage
    assert (stage.stage_m, stage.stage_n, stage.units) == (128, 128, 256)
    assert stage.tile.smem_word == "bf16_bits" and stage.lhs_ld % 8 == 0 and stage.rhs_ld % 8 == 0
    tf32 = SimpleMmaAlgorithm(TF32).setup(problem(FLOAT32), SM80).batch.global_.stage.tile
    assert (tf32.tile_k, tf32.smem_word, tf32.kind) == (8, "f32", "tf32")
    small = SimpleMmaAlgorithm().setup(problem(FLOAT16, (1, 1, 40, 64)), SM80).batch.global_.stage
    assert (small.stage_m, small.stage_n) == (64, 64)


# -- stage events ---------------------------------------------------------------------------------
def test_events_in_execution_order():
    sel = PlaneSelection(partition_m=2, partition_n=3, stage_k=32)     # 2 k tiles
    stage = PlanePartitionedStage(MmaTile())
    cfg = stage.setup(problem(FLOAT16), sel, SM90)
    rec = RecordingListener()
    stage.execute(cfg, SM90, "lhs_smem", "rhs_smem", rec)
    expected = [Begin()]
    for kt in range(2):
        expected += [LhsLoaded(kt * 2 + i, 4) for i in range(2)] + [RhsLoaded(kt * 3, 6)]
        for j in range(3):
            if j + 1 < 3:
                expected.append(RhsLoaded(kt * 3 + j + 1, 6))  # next rhs before this one's mmas
            expected += [TileMatmulCompleted((kt * 3 + j) * 2 + i, 12) for i in range(2)]
    assert rec.events == expected + [Finish()]


class _Marking(StageEventListener):
    def on_event(self, event):
        return f"/* after {event!r} */"


def test_injected_code_lands_after_its_event():
    stage = PlanePartitionedStage(MmaTile())
    cfg = stage.setup(problem(FLOAT16), PlaneSelection(partition_m=1, partition_n=2), SM90)
    text = stage.execute(cfg, SM90, "lhs_smem", "rhs_smem", _Marking())
    marks = re.findall(r"/\* after (\w+)", text)
    assert marks == ["Begin", "LhsLoaded", "RhsLoaded", "RhsLoaded", "TileMatmulCompleted",
                     "TileMatmulCompleted", "Finish"]
    parts = [p.strip() for p in re.split(r"/\* after [^\n]*\*/", text)]
    assert parts[0] == "" and parts[-2:] == ["", ""]
    lhs, rhs0, rhs1, mma0, mma1 = parts[1:6]
    assert "ptx_ldmatrix_x4_trans(" in lhs and "lhs_frag_0" in lhs
    assert "ptx_ldmatrix_x2_trans(" in rhs0 and "rhs_frag_0" in rhs0 and "rhs_frag_1" in rhs1
    assert "ptx_mma_m16n8k16_f32_f16(" in mma0 and "acc_0_0" in mma0 and "rhs_frag_0" in mma0
    assert "acc_0_1" in mma1 and "rhs_frag_1" in mma1


def test_no_backend_words_outside_the_dialect():
    import gemm_engine.stage.plane_partitioned as stage_mod
    import gemm_engine.tile.mma as tile_mod
    for mod in (tile_mod, stage_mod):
        text = open(mod.__file__).read()
        for word in ("__syncthreads", "threadIdx", "__shared__", "get_local_id", "barrier(", "__cvta"):
            assert word not in text, (mod.__name__, word)


# -- nvcc -----------------------------------------------------------------------------------------
COMPILE_CASES = [  # (lhs layout, rhs layout, (batch, m, n, k)): aligned, odd + batch, M=1, small
    (Layout.ROW, Layout.ROW, (1, 256, 256, 64)),
    (Layout.COL, Layout.COL, (3, 129, 67, 45)),
    (Layout.ROW, Layout.COL, (1, 1, 200, 77)),
    (Layout.COL, Layout.ROW, (2, 64, 64, 16)),
]


def nvcc_compile(src, arch, tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not found")
    cu, cubin = tmp_path / "k.cu", tmp_path / "k.cubin"
    cu.write_text(src)
    res = subprocess.run(["nvcc", "-cubin", f"-gencode=arch=compute_{arch},code=sm_{arch}",
                          "-Xptxas", "-v", str(cu), "-o", str(cubin)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    spills = [int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", res.stderr)]
    assert spills and not any(spills), res.stderr
    return cubin


def spill_case_job(kind, arch, lhs, rhs, shape) -> tuple:
    dialect, flag = (SM80, ARCHS[0]) if arch == "80" else (SM90, ARCHS[1])
    return f"{kind} {lhs.value}-{rhs.value} {shape}", render(kind, dialect, shape, lhs, rhs), flag


def spill_case_jobs() -> list:   # all of them: compiled in a few bundles, not one nvcc each
    return [spill_case_job(kind, arch, lhs, rhs, shape)
            for lhs, rhs, shape in COMPILE_CASES for kind in sorted(KINDS) for arch in ("80", "90a")]


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["80", "90a"])
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("lhs, rhs, shape", COMPILE_CASES)
@prefetched(spill_case_jobs)
def test_compiles_without_spills(kind, arch, lhs, rhs, shape):
    nvcc = nvcc_or_skip()
    (compiled,) = compile_jobs([spill_case_job(kind, arch, lhs, rhs, shape)], nvcc).values()
    trouble = compiled.spill_problem()
    assert trouble is None, trouble


@pytest.mark.nvcc
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_sass_uses_tensor_cores(kind, tmp_path):
    cubin = nvcc_compile(render(kind, SM90, (1, 129, 67, 45)), "90a", tmp_path)
    if shutil.which("cuobjdump") is None:
        pytest.skip("cuobjdump not found")
    sass = subprocess.run(["cuobjdump", "--dump-sass", str(cubin)], capture_output=True, text=True)
    if sass.returncode != 0:
        pytest.skip(f"cuobjdump cannot disassemble: {sass.stderr.strip()}")
    assert "HMMA" in sass.stdout
    assert ("LDSM" in sass.stdout) == (kind != "tf32")   # tf32 fragments are scalar LDS
    assert "STL" not in sass.stdout


# -- CUDA numerics ------------------------------------------------------------------------------------
SHAPES = [(128, 128, 32), (256, 384, 64), (127, 129, 33), (129, 127, 31), (97, 61, 53), (1, 128, 64),
          (1, 200, 77), (64, 1, 40), (5, 7, 1), (3, 65, 130, 47), (2, 128, 128, 32)]
TOLERANCE = {"f16": 1e-2, "bf16": 1e-2, "tf32": 5e-3}


@pytest.fixture(scope="module")
def cuda_engine():
    pytest.importorskip("cupy", reason="the CUDA numerics test needs CuPy")
    from gemm_engine.runtime.cuda import cuda_available
    if not cuda_available():
        pytest.skip("CuPy sees no CUDA GPU")
    from gemm_engine import Engine
    engine = Engine("cuda")
    if not engine.dialect.supports("mma_sync"):
        pytest.skip(f"{engine.device.name} is below sm_80 (no mma.sync)")
    return engine


def operands(kind, shape, rng):
    *batch, m, n, k = shape
    if kind == "bf16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        dtype = ml_dtypes.bfloat16
    else:
        dtype = np.float16 if kind == "f16" else np.float32
    a = rng.standard_normal((*batch, m, k)).astype(dtype)
    b = rng.standard_normal((*batch, k, n)).astype(dtype)
    return a, b


@pytest.mark.cuda
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_numerics_against_float64(cuda_engine, kind, shape):
    a, b = operands(kind, shape, np.random.default_rng(hash(shape) % 2**32))
    alg = "simple_mma" if kind != "tf32" else SimpleMmaAlgorithm(TF32)
    c = cuda_engine.matmul(a, b, algorithm=alg)
    assert isinstance(cuda_engine.last_choice[0], SimpleMmaAlgorithm)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert c.shape == ref.shape and c.dtype == a.dtype
    err = np.linalg.norm(c.astype(np.float64) - ref) / max(np.linalg.norm(ref), 1e-30)
    assert err < TOLERANCE[kind], f"{kind} {shape}: relative error {err:.2e}"


@pytest.mark.cuda
def test_plain_float32_is_refused_on_the_gpu(cuda_engine):
    a = np.ones((32, 32), np.float32)
    with pytest.raises(SetupError, match="tf32"):
        cuda_engine.matmul(a, a, algorithm="simple_mma")
