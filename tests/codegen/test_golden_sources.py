"""Golden sources: a few nominal configs rendered and compared with tests/golden/, so a template
change shows up as a readable kernel diff. After an intended change, run
``python3 -m pytest tests/codegen/test_golden_sources.py --update-golden`` and review ``git diff tests/codegen/golden``.
"""
from __future__ import annotations

import pathlib

import pytest

import gemm_engine
from gemm_engine.epilogue.activations import ACTIVATIONS
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.dtypes import BY_NAME
from gemm_engine.problem import Layout, MatmulProblem

GOLDEN = pathlib.Path(__file__).parent / "golden"


def _p(batch, m, n, k, dtype, layouts=("row", "row"), align=8, epilogue=Epilogue()):
    et = BY_NAME[dtype]
    return MatmulProblem(batch, m, n, k, et, et, et, Layout(layouts[0]), Layout(layouts[1]), align, align,
                         epilogue=epilogue)


#: file name -> (algorithm, problem, backend, arch)
CASES = {
    "simple_unit_f32_opencl.cl": ("simple_unit", _p(2, 100, 90, 70, "float32", align=2), "opencl", None),
    "double_buffering_unit_f32_sm80.cu": ("double_buffering_unit", _p(1, 256, 256, 256, "float32", align=4),
                                          "cuda", "sm_80"),
    "pipelined_mma_f16_sm80.cu": ("pipelined_mma", _p(1, 4096, 4096, 4096, "float16", ("row", "col")), "cuda", "sm_80"),
    "pipelined_wgmma_bf16_sm90.cu": ("pipelined_wgmma", _p(1, 4096, 4096, 4096, "bfloat16"), "cuda", "sm_90"),
    "skinny_split_k_bf16_sm90.cu": ("skinny_split_k", _p(1, 1, 8192, 8192, "bfloat16"), "cuda", "sm_90"),
    "split_k_f32_bias_relu_sm90.cu": ("split_k", _p(1, 64, 64, 65536, "float32", align=4, epilogue=Epilogue(
        bias=BY_NAME["float32"], activation=ACTIVATIONS["relu"]())), "cuda", "sm_90"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_source(name, request):
    algorithm, problem, backend, arch = CASES[name]
    text = gemm_engine.source(algorithm, problem, backend=backend, arch=arch or "sm_90")
    path = GOLDEN / name
    if request.config.getoption("--update-golden"):
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with --update-golden"
    assert text == path.read_text(), (f"{name} changed; if intended, rerun with --update-golden and review "
                                      f"`git diff tests/codegen/golden`")
