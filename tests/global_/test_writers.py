"""The paired writer's stores, rendered on a nominal H100 (no device needed; the CUDA numerics of
every output type run in test_int8.py, test_fp8_scales.py, test_dmma.py and test_epilogue.py on a
GPU, and the nvcc compile checks compile these kernels):

* half-precision results leave as one 32-bit word of a converted pair, float32 / int32 ones as one
  two-wide vector (8 bytes; float64 would take 16), guarded by a run-time check that the output's
  base and leading dimension are aligned to the pair, with the one-by-one stores as the fallback;
* a vector pair stores what its fallback stores: the same two values at the same two elements.
"""
from __future__ import annotations

import re

import pytest

from renders import flat

from gemm_engine.algorithms import REGISTRY
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BFLOAT16, FLOAT16, FLOAT32, FLOAT8_E4M3, INT8, INT32
from gemm_engine.problem import Layout, MatmulProblem

SM90 = dialect_for(nominal_cuda_device(9, 0))

#: (algorithm, operand type, result type, b's layout, the pair's C type, pair bytes)
CASES = [
    ("specialized_wgmma", INT8, INT32, Layout.COL, "int2", 8),
    ("specialized_wgmma", FLOAT8_E4M3, FLOAT32, Layout.COL, "float2", 8),
    ("pipelined_wgmma", FLOAT16, FLOAT32, Layout.ROW, "float2", 8),
    ("pipelined_mma", FLOAT16, FLOAT32, Layout.COL, "float2", 8),
    ("pipelined_wgmma", BFLOAT16, BFLOAT16, Layout.ROW, "unsigned", 4),
]
IDS = [f"{c[0]}-{c[2].name}" for c in CASES]
CHECK = re.compile(r"const bool out_pairs = \(\(\(\(u64\)(\w+)\) \| \(u64\)\((\w+) \* (\d+)\)\) "
                   r"& (\d+)\) == 0;")
#: A vector pair and its fallback (in whitespace-free text): the pair's two values and index, then
#: the two single stores.
VECTOR_PAIR = re.compile(r"if \(out_pairs[^{]*\{ (\w+) pv; pv\.x = (.*?); pv\.y = (.*?); "
                         r"\(\*\(GLOBAL \1\*\)\((\w+) \+ (.*?)\)\) = pv; \} else \{ (.*?;) (.*?;) \}")
#: The same where the alignment is tested once around the tile: the pairs, then the single stores.
PAIR = re.compile(r"\{ (\w+) pv; pv\.x = (.*?); pv\.y = (.*?); \(\*\(GLOBAL \1\*\)\((\w+) \+ (.*?)\)\) = pv; \}")
SINGLE = re.compile(r"(?:if \([^;]*\) )?\w+\[[^;]*\] = [^;]*;")
LOOP = re.compile(r"for \(int \w+ = 0; \w+ < \d+; \+\+\w+\)")


def render(name, operand, result, rhs_layout, m=4096, n=4096, k=4096):
    p = MatmulProblem(1, m, n, k, operand, operand, result, Layout.ROW, rhs_layout, 16, 16)
    alg = REGISTRY[name]()
    return alg.render(alg.setup(p, SM90), SM90)


@pytest.mark.parametrize("name, operand, result, rhs_layout, ctype, size", CASES, ids=IDS)
def test_pairs_are_one_store_behind_an_alignment_check(name, operand, result, rhs_layout, ctype, size):
    src = render(name, operand, result, rhs_layout)
    check = CHECK.search(src)
    assert check, "no alignment check of the output"
    assert (int(check.group(3)), int(check.group(4))) == (result.itemsize, size - 1)
    if ctype == "unsigned":
        assert "*(GLOBAL unsigned*)(" in src and "ptx_cvt_rn_bf16x2(" in src
    else:
        assert f"{{ {ctype} pv; pv.x = " in src and f"(*(GLOBAL {ctype}*)(" in src


@pytest.mark.parametrize("name, operand, result, rhs_layout, ctype, size", CASES[:4], ids=IDS[:4])
@pytest.mark.parametrize("extent", [4096, 4093], ids=["divides", "edges"])
def test_a_pair_stores_what_its_fallback_stores(name, operand, result, rhs_layout, ctype, size, extent):
    """Each vector pair writes value x at its index and value y at the next element: exactly the
    two single stores of its fallback (same values, indices i and i + 1), edges or not."""
    src = flat(render(name, operand, result, rhs_layout, extent, extent, extent))
    if "if (out_pairs) { #pragma unroll" in src:    # tested once: the tile's stores in loops, one version each
        both = src[src.index("if (out_pairs) { #pragma unroll"):]
        paired, single = both.split("} else {", 1)
        assert LOOP.findall(paired) == LOOP.findall(single), "the two versions walk the tile alike"
        singles = SINGLE.findall(single)
        pairs = [(*p, singles[2 * k], singles[2 * k + 1]) for k, p in enumerate(PAIR.findall(paired))]
        assert pairs and len(singles) == 2 * len(pairs), "a pair the pattern does not read"
    else:
        pairs = VECTOR_PAIR.findall(src)
        assert pairs and len(pairs) == src.count("if (out_pairs"), "a pair the pattern does not read"
    for vec, x, y, ptr, index, first, second in pairs:
        assert vec == ctype
        assert first.endswith(f"{ptr}[{index}] = {x};"), (first, index, x)
        assert second.endswith(f"{ptr}[{index} + 1] = {y};"), (second, index, y)
