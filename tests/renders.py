"""Shared by the structure tests: kernels rendered for nominal devices (no device needed)."""
from __future__ import annotations

import re

from cases import LAYOUT_SHAPES, LAYOUTS, SHAPES
from gemm_engine.algorithms import REGISTRY, resolve
from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME, FLOAT16, FLOAT32, INT8, INT32, SUPPORTED_NAMES
from gemm_engine.errors import SetupError
from gemm_engine.epilogue.activations import ACTIVATIONS
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.quant.format import WeightFormat

OPENCL_DEVICE = DeviceInfo(backend="opencl", name="nominal opencl", compute_units=8,
                           max_shared_memory=64 * 1024, max_threads_per_cube=1024, plane_size=1)


#: Extra shapes the semantics tests run (vectors, broadcast batches, big enough for 128 x 128 tiles).
EXTRA_SHAPES = [(1, 1, 1, 5), (1, 4, 1, 5), (2, 4, 1, 5), (6, 4, 6, 5), (1, 9, 5, 7), (1, 300, 257, 40)]


def problems():
    for shape in SHAPES + EXTRA_SHAPES:
        for dtype in SUPPORTED_NAMES:   # the operand dtypes; int8 @ int8 is int32, fp8 float32 (dtypes.WIDENED)
            et = BY_NAME[dtype]
            yield MatmulProblem(*shape, et, et, INT32 if et is INT8 else FLOAT32 if et.itemsize == 1 else et)
    # 16-byte-aligned half-precision operands: what TMA (specialized_wgmma) needs to set up at all.
    for shape in ((1, 256, 512, 192), (2, 129, 300, 72)):
        for dtype in ("float16", "bfloat16"):
            for lhs, rhs in (("row", "row"), ("col", "col")):
                et = BY_NAME[dtype]
                yield MatmulProblem(*shape, et, et, et, Layout(lhs), Layout(rhs), 8, 8)
    for shape in LAYOUT_SHAPES:
        for dtype in ("float32", "float64", "float16"):   # float64: the DMMA tiles' k-contiguous loads
            for lhs, rhs in LAYOUTS:
                et = BY_NAME[dtype]
                yield MatmulProblem(*shape, et, et, et, Layout(lhs), Layout(rhs))


def sources_for(algorithm_name: str, cc: tuple[int, int]) -> dict:
    dialect = dialect_for(nominal_cuda_device(*cc))
    alg = REGISTRY[algorithm_name]()
    sources = {}
    for p in problems():
        try:
            cfg = alg.setup(p, dialect)
        except SetupError:
            continue  # a combination this algorithm refuses is tested by its own setup tests
        sources.setdefault(cfg, (p, alg.render(cfg, dialect)))
    return {f"{algorithm_name} {p}": src for p, src in sources.values()}


def flat(text: str) -> str:
    """``text`` (a kernel or a piece of one) with every run of whitespace one space: what the
    emitter's indentation and line breaks (codegen/emitter.py) leave of a template's text."""
    return " ".join(text.split())


def joined_literals(text: str) -> str:
    """``text`` with the string literals the PTX helpers spread over lines joined again (as C joins
    adjacent literals): each ``asm`` statement's PTX on one line, to search."""
    return re.sub(r'"\s*\n\s*"', "", text)


def locate(fragment: str, text: str) -> int:
    """Where ``fragment`` (a template's text) starts in the kernel ``text``, whatever whitespace the
    emitter put between its words; ValueError when it is not there."""
    found = re.search(r"\s+".join(map(re.escape, fragment.split())), text)
    if found is None:
        raise ValueError(f"not in the source: {fragment[:200]!r}")
    return found.start()


def render(problem, device, algorithm="double_buffering"):
    alg = resolve(algorithm)
    dialect = dialect_for(device)
    cfg = alg.setup(problem, dialect)
    return alg.chosen(cfg), cfg, dialect, alg.render(cfg, dialect)


def problem(m, n, k, dtype="float32", lhs_layout=Layout.ROW):
    et = BY_NAME[dtype]
    return MatmulProblem(1, m, n, k, et, et, et, lhs_layout=lhs_layout)


def any_problem(shape, dtype="float16", layouts=("row", "row"), align=None, out=None, **more):
    """A (batch, m, n, k) problem of ``dtype`` operands (``"tf32"``: float32 with tf32 precision),
    16-byte aligned unless ``align`` says otherwise; ``out`` defaults to the dtype's product
    (int8: int32, fp8: float32)."""
    if dtype == "tf32":
        dtype, more = "float32", {"precision": "tf32", **more}
    et = BY_NAME[dtype]
    if out is None:
        out = INT32 if et is INT8 else FLOAT32 if et.itemsize == 1 else et
    wide = 16 // et.itemsize
    lhs_align, rhs_align = align or (wide, wide)
    return MatmulProblem(*shape, et, et, BY_NAME[out] if isinstance(out, str) else out,
                         Layout(layouts[0]), Layout(layouts[1]), lhs_align, rhs_align, **more)


#: The nominal devices the per-algorithm agreement tests render for (A100, H100, OpenCL; no device needed).
NOMINAL_DEVICES = {"sm_80": nominal_cuda_device(8, 0), "sm_90": nominal_cuda_device(9, 0), "opencl": OPENCL_DEVICE}

#: Algorithms that must set up on each device for at least one of coverage_problems() (no vacuous pass).
MUST_SET_UP = {
    "opencl": {"simple", "simple_unit", "double_buffering_unit", "ordered", "ordered_unit", "specialized",
               "specialized_unit", "split_k_unit", "skinny", "skinny_split_k", "auto"},
    "sm_80": {"simple_mma", "double_buffering_mma", "pipelined_mma", "simple_wmma", "simple_dmma",
              "pipelined_dmma", "split_k_mma", "skinny", "auto"},
    "sm_90": {"pipelined_wgmma", "specialized_wgmma", "split_k_wgmma", "pipelined_mma", "skinny", "auto",
              "quantized_decode", "quantized_decode_split_k", "quantized_double_buffering_mma", "quantized_simple_unit"},
}
MUST_SET_UP["opencl"] |= {"quantized_simple_unit", "quantized_decode"}
MUST_SET_UP["sm_80"] |= {"quantized_decode", "quantized_simple_mma", "quantized_double_buffering_mma"}

# The one problem of coverage_problems() with every epilogue term (scale, C, bias, activation).
_FULL_EPILOGUE = Epilogue(scaled=True, c=FLOAT32, bias=FLOAT16, bias_axis=0, activation=ACTIVATIONS["gelu"]())


# The problems the per-algorithm agreement tests render each algorithm for on NOMINAL_DEVICES.
def coverage_problems():
    """A few problems per dtype: aligned and unaligned tiles, one with every epilogue term (scalar
    parameters), a skinny one (M = 1) and a long-K one (split K)."""
    for dtype in ("float32", "float16", "bfloat16", "float64"):
        et = BY_NAME[dtype]
        shapes = [(1, 256, 256, 256), (2, 129, 67, 200)]
        if dtype != "float64":
            shapes += [(1, 1, 512, 4096), (1, 64, 64, 8192)]
        for shape in shapes:
            yield MatmulProblem(*shape, et, et, et, lhs_align=8, rhs_align=8)
        if et.compute == "f32":
            yield MatmulProblem(2, 129, 67, 200, et, et, et, lhs_align=8, rhs_align=8, epilogue=_FULL_EPILOGUE)
    # Quantized weights (their scales and zeros are parameters of their own): decode sizes, a long K
    # over few columns (split K), a prefill size, and float32 activations (the register path).
    bf16, f16 = BY_NAME["bfloat16"], BY_NAME["float16"]
    yield MatmulProblem(1, 4, 96, 256, bf16, bf16, bf16, lhs_align=8,
                        weights=WeightFormat("int4", 128, True, "bf16_bits"))
    yield MatmulProblem(1, 1, 64, 8192, f16, f16, f16, lhs_align=8, weights=WeightFormat("int8", 0, False))
    yield MatmulProblem(2, 129, 67, 200, f16, f16, f16, lhs_align=8, epilogue=_FULL_EPILOGUE,
                        weights=WeightFormat("int4", 32, True, layout="prepacked"))
    yield MatmulProblem(1, 9, 40, 64, FLOAT32, FLOAT32, FLOAT32, weights=WeightFormat("fp8_e4m3", 32))


# A problem in a few words (shape, dtype, layouts, epilogue or not) for failure and skip messages.
def short_name(problem: MatmulProblem) -> str:
    ep = "" if problem.epilogue.identity else " +epilogue"
    return (f"{problem.batch}x{problem.m}x{problem.n}x{problem.k} {problem.lhs.name} "
            f"{problem.lhs_layout.value}/{problem.rhs_layout.value}{ep}")
