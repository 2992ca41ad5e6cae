"""algorithms/accelerated.py (rendered for the nominal sm_80 device): ``simple_mma`` -- the mma.sync
tile on the plane stage -- sets up for float16, bfloat16, int8 and opted-in tf32, renders its PTX,
and refuses plain float32 and devices without mma.sync."""
from __future__ import annotations

import pytest

from gemm_engine.algorithms.accelerated import PlaneSelection, SimpleMmaAlgorithm
from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME, FLOAT16, FLOAT32, INT8, INT32
from gemm_engine.errors import SetupError
from gemm_engine.problem import MatmulProblem
from gemm_engine.stage.plane_partitioned import PlanePartitionedStage
from gemm_engine.tile.mma import MmaTile

SM80 = dialect_for(nominal_cuda_device(8, 0))


def _p(et, out=None, **kw):
    return MatmulProblem(1, 256, 256, 256, et, et, out or et, lhs_align=8, rhs_align=8, **kw)


@pytest.mark.parametrize("problem, mma", [(_p(FLOAT16), "ptx_mma_m16n8k16_f32_f16"),
                                          (_p(BY_NAME["bfloat16"]), "ptx_mma_m16n8k16_f32_bf16"),
                                          (_p(INT8, INT32), "ptx_mma_m16n8k32_s32_s8"),
                                          (_p(FLOAT32, precision="tf32"), "ptx_mma_m16n8k8_f32_tf32")])
def test_sets_up_and_renders_its_instruction(problem, mma):
    alg = SimpleMmaAlgorithm()
    assert alg.slots()["tile"] is MmaTile and alg.slots()["stage"] is PlanePartitionedStage
    cfg = alg.setup(problem, SM80)
    assert isinstance(cfg.selection, PlaneSelection)
    assert f"{mma}(" in alg.render(cfg, SM80)


def test_refusals():
    with pytest.raises(SetupError, match="precision='tf32'"):
        SimpleMmaAlgorithm().setup(_p(FLOAT32), SM80)
    with pytest.raises(SetupError, match="mma"):
        SimpleMmaAlgorithm().setup(_p(FLOAT16), dialect_for(DeviceInfo("opencl", "pocl", 2, 65536, 1024, 32)))
    assert SimpleMmaAlgorithm(PlaneSelection(precision="tf32")).setup(_p(FLOAT32), SM80).batch.global_.stage.tile.kind == "tf32"
