"""algorithms/wmma.py (rendered for the nominal sm_80 device): ``simple_wmma`` -- the WMMA tile on
the plane stage with 16 x 16 tiles -- renders the WMMA API with its header, and refuses OpenCL."""
from __future__ import annotations

import pytest

from gemm_engine.algorithms.wmma import SimpleWmmaAlgorithm, WmmaSelection
from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import FLOAT16
from gemm_engine.errors import SetupError
from gemm_engine.problem import MatmulProblem
from gemm_engine.tile.wmma import WmmaTile

SM80 = dialect_for(nominal_cuda_device(8, 0))
PROBLEM = MatmulProblem(1, 256, 256, 256, FLOAT16, FLOAT16, FLOAT16, lhs_align=8, rhs_align=8)


def test_renders_the_wmma_api():
    alg = SimpleWmmaAlgorithm()
    assert alg.slots()["tile"] is WmmaTile
    cfg = alg.setup(PROBLEM, SM80)
    assert isinstance(cfg.selection, WmmaSelection)
    assert (cfg.selection.tile_m, cfg.selection.tile_n) == (16, 16)
    source = alg.render(cfg, SM80)
    assert "#include <mma.h>" in source and "nvcuda::wmma::mma_sync(" in source


def test_refuses_opencl():
    with pytest.raises(SetupError, match="WMMA"):
        SimpleWmmaAlgorithm().setup(PROBLEM, dialect_for(DeviceInfo("opencl", "pocl", 2, 65536, 1024, 32)))
