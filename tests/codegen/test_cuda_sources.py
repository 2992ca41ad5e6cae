"""Every CUDA kernel the tests use compiles with nvcc for sm_80 and sm_90a (no GPU needed)."""
from __future__ import annotations

import pytest

from renders import sources_for
from cuda_compile import SM90A, archs_for, compile_jobs, nvcc_or_skip, prefetched
from gemm_engine.algorithms import REGISTRY, AlgorithmFamily
from gemm_engine.codegen.cuda_dialect import source_needs_sm90

#: Families ("simple", "double_buffering") only pick among their members' configs: compiling the
#: concrete algorithms covers them.
CONCRETE = sorted(name for name, cls in REGISTRY.items() if not issubclass(cls, AlgorithmFamily))
#: Split-K sets up only for a long K against its output, which none of these problems has (and
#: adding one would compile it for every algorithm): tests/batch/test_split_k.py compiles its members.
#: The grouped members set up for grouped problems only (tests/batch/test_grouped.py compiles them); the
#: quantized compositions for quantized weights only (tests/algorithms/test_quantized_decode.py).
COMPILED_HERE = [name for name in CONCRETE if not name.startswith(("split_k", "grouped_", "quantized"))]


def test_families_pick_only_member_configs():
    families = [cls for cls in REGISTRY.values() if issubclass(cls, AlgorithmFamily)]
    assert families
    def leaves(family):   # a family's variants may be families themselves (auto's split-K gate)
        for v in family.variants:
            yield from (leaves(v) if issubclass(v, AlgorithmFamily) else (v,))

    for family in families:
        assert all(v.name in CONCRETE for v in leaves(family)), family.name


def compile_jobs_for(algorithm_name: str) -> list:
    # An algorithm may declare the CUDA target it needs (``min_arch``, e.g. "sm_90a" for wgmma); a
    # source rendered for sm_90 that uses sm_90's PTX (float64's m16n8k8) compiles for sm_90a only
    # (tests/algorithms/test_dmma.py compiles the sm_80 renders for sm_80).
    archs = archs_for(getattr(REGISTRY[algorithm_name], "min_arch", None))
    return [(name, src, arch) for name, src in sources_for(algorithm_name, (9, 0)).items() for arch in archs
            if arch == SM90A or not source_needs_sm90(src)]


@pytest.mark.nvcc
@pytest.mark.parametrize("algorithm_name", COMPILED_HERE)
@prefetched(compile_jobs_for)
def test_cuda_sources_compile(algorithm_name):
    nvcc = nvcc_or_skip()
    jobs = compile_jobs_for(algorithm_name)
    assert jobs, f"{algorithm_name} set up no CUDA config at all"
    archs = {arch for *_, arch in jobs}
    assert SM90A in archs and archs <= set(archs_for(getattr(REGISTRY[algorithm_name], "min_arch", None)))
    failures = {c.label: c.log for c in compile_jobs(jobs, nvcc).values() if not c.ok}
    assert not failures, "\n\n".join(f"{k}:\n{v[-2000:]}" for k, v in list(failures.items())[:3])
