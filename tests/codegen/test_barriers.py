"""Every algorithm's OpenCL: no barrier under work-item-dependent control flow (static, no device).

A barrier that some work-items of a group skip is undefined behaviour that one OpenCL
implementation tolerates and another turns into a hang, an abort or wrong sums (issue 35: the
kernels that failed on PoCL 5.0 were legal, but this is the first thing to rule out). The check
(`barrier_analysis`) follows which values depend on the work-item through each rendered kernel;
it is tried first on kernels written to break each rule, so a blind checker cannot pass.
"""
from __future__ import annotations

import pytest

from barrier_analysis import analyse, barrier_problems
from gemm_engine.algorithms import REGISTRY
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME, INT32
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.errors import SetupError
from gemm_engine.problem import Groups, Layout, MatmulProblem
from renders import MUST_SET_UP, OPENCL_DEVICE, coverage_problems, short_name

_HEAD = "typedef long i64;\n#define UNIT_ID ((int)get_local_id(0))\n#define SYNC_CUBE() barrier(CLK_LOCAL_MEM_FENCE)\n"


def kernel(body: str) -> str:
    return _HEAD + "__kernel void k(__global float* out, i64 K) {\n__local float s[64];\n" + body + "\n}\n"


BAD = {
    "if on the unit": "if (UNIT_ID < 32) { SYNC_CUBE(); }",
    "else arm": "if (UNIT_ID < 32) { s[0] = 1; } else SYNC_CUBE();",
    "derived value": "const int lane = UNIT_ID % 4;\nconst int row = lane * 2 + 1;\nif (row > 3) SYNC_CUBE();",
    "assigned under a branch": "int flag = 0;\nif (UNIT_ID == 0) flag = 1;\nfor (i64 k0 = 0; k0 < K; ++k0) { if (flag) SYNC_CUBE(); }",
    "loop bound": "for (int i = UNIT_ID; i < 64; i += 16) { SYNC_CUBE(); }",
    "loop step carried": "int i = 0;\nwhile (i < 64) { SYNC_CUBE(); i += UNIT_ID + 1; }",
    "early return": "if (UNIT_ID >= 60) return;\nSYNC_CUBE();",
    "divergent break": "for (i64 k0 = 0; k0 < K; ++k0) { if (UNIT_ID == k0) break; SYNC_CUBE(); }",
    "array written per unit": "s[UNIT_ID] = 1.0f;\nif (s[3] > 0.0f) SYNC_CUBE();",
    "helper with a barrier": "if (UNIT_ID & 1) { sync_helper(); }",
}
GOOD = {
    "uniform loop": "for (i64 k0 = -16; k0 < K; k0 += 16) { SYNC_CUBE(); if (UNIT_ID >= 32) { s[0] = 1; } }",
    "branch closed before": "if (UNIT_ID < 32) { s[UNIT_ID] = 0; }\nSYNC_CUBE();",
    "uniform derived": "const i64 cube = get_group_id(0);\nconst i64 rows = (K + 63) / 64 + cube;\nif (rows > 2) SYNC_CUBE();",
    "divergent exit of a barrier-free loop": "for (int i = 0; i < 8; ++i) { if (UNIT_ID == i) break; s[i] = 0; }\nSYNC_CUBE();",
    "same name in another scope": "{ const int x = UNIT_ID; s[x] = 0; }\n{ const int x = 3; if (x > 1) SYNC_CUBE(); }",
}
HELPER = "void sync_helper(void) { SYNC_CUBE(); }\n"


@pytest.mark.parametrize("case", sorted(BAD))
def test_checker_finds_each_divergent_barrier(case):
    problems = barrier_problems(HELPER + kernel(BAD[case]) if "helper" in case else kernel(BAD[case]))
    assert problems, f"the checker missed: {BAD[case]}"


@pytest.mark.parametrize("case", sorted(GOOD))
def test_checker_passes_uniform_barriers(case):
    assert barrier_problems(kernel(GOOD[case])) == []


def _problems():
    """coverage_problems() (every float dtype, aligned, ragged, M = 1, long K, the full epilogue),
    int8, and column-major operands."""
    yield from coverage_problems()
    i8 = BY_NAME["int8"]
    yield MatmulProblem(2, 129, 67, 200, i8, i8, INT32)
    f32 = BY_NAME["float32"]
    yield MatmulProblem(1, 100, 1, 3000, f32, f32, f32, Layout.COL, Layout.ROW)   # matrix-vector
    yield MatmulProblem(3, 70, 45, 130, f32, f32, f32, Layout.COL, Layout.COL)
    # Grouped GEMMs (the group walk's extents read on the device), every layout of groups.
    for layout in ("contiguous", "masked", "k", "list"):
        yield MatmulProblem(5, 300, 70, 130, f32, f32, f32, epilogue=Epilogue(grouped=True), groups=Groups(layout))


#: Knob values that change the kernel's structure (dispatch orders, persistent cubes, split K).
VARIANTS = ({}, {"dispatch": "grouped"}, {"dispatch": "swizzled"}, {"dispatch": "col_major"}, {"persistent": 2},
            {"split_k": 3})


def opencl_sources(name: str) -> dict:
    cls = REGISTRY[name]
    dialect = dialect_for(OPENCL_DEVICE)
    knobs = set(cls.selection_class.field_names()) if getattr(cls, "selection_class", None) else set()
    sources = {}
    for variant in VARIANTS:
        if not set(variant) <= knobs:
            continue
        alg = cls(**variant)
        for problem in _problems():
            try:
                cfg = alg.setup(problem, dialect)
            except SetupError:
                continue   # refusals are the setup tests' business
            groups = f" groups={problem.groups.layout}" if problem.groups else ""
            sources.setdefault(cfg, (f"{short_name(problem)}{groups} {variant or ''}", alg.render(cfg, dialect)))
    return dict(sources.values())


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_no_barrier_under_work_item_dependent_control_flow(name):
    sources = opencl_sources(name)
    if not sources:
        assert name not in MUST_SET_UP["opencl"] | {"grouped", "grouped_simple_unit"}, f"{name} set up nothing on OpenCL"
        pytest.skip(f"{name} sets up no kernel on OpenCL (tensor cores, TMA)")
    found = []
    for label, src in sources.items():
        problems, barriers = analyse(src)
        found += [f"{label}: {p}" for p in problems]
        # Every barrier the source holds was seen (a parse that lost some would pass vacuously).
        assert barriers >= src.count("SYNC_CUBE()") - src.count("#define SYNC_CUBE"), label
    assert not found, "\n".join(found[:20])
