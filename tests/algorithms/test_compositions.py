"""Right or refused: every built-in component in every slot of every built-in algorithm.

Each composition (one registered algorithm with one slot swapped for another built-in component)
must either refuse with a `SetupError` that is a refusal (not ``internal``: not a component's
exception in disguise), or compute the right product. Checked on every backend this machine has
(numerics on PoCL in CI, on the GPU where there is one), and, without a GPU, every CUDA source that
sets up for a nominal sm_80 / sm_90 device is compiled by nvcc.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from gemm_engine.algorithms import REGISTRY
from gemm_engine.algorithms import AlgorithmFamily
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.components import BUILT_IN
from gemm_engine.dtypes import BY_NAME
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem

from cuda_compile import SM80, SM90A, compile_jobs, failures_of, nvcc_or_skip, prefetched
from helpers import TOLERANCE, random, reference, rel_error

#: Every built-in component per slot (the listener slot: a recording one besides the default).
BUILT_INS = BUILT_IN
ALGORITHMS = sorted(n for n, c in REGISTRY.items() if not issubclass(c, AlgorithmFamily)
                    and c.__module__.startswith("gemm_engine."))


def swaps():
    """(algorithm name, slot, component) for every swap that changes the composition."""
    for name in ALGORITHMS:
        base = REGISTRY[name]
        for slot, components in BUILT_INS.items():
            for comp in components:
                if getattr(base, slot, None) is not comp:
                    yield name, slot, comp


def composed(name: str, slot: str, comp):
    base = REGISTRY[name]
    return type(f"{base.__name__}With{comp.__name__}", (base,),
                {slot: comp, "name": f"{name}+{comp.__name__}", "__module__": __name__})


SWAPS = list(swaps())


def _problem(dtype: str, batch=2, m=37, n=45, k=29, layouts=("row", "col")):
    et = BY_NAME[dtype]
    out = BY_NAME["int32"] if dtype == "int8" else et
    return MatmulProblem(batch, m, n, k, et, et, out, Layout(layouts[0]), Layout(layouts[1]), 1, 1)


#: Problems each composition is tried on: ragged on every axis with a batch, an M = 1 product (the
#: skinny kernels refuse anything else) and a K long against a small output (split-K batch levels
#: split it; they refuse the others).
SHAPES = [dict(batch=2, m=37, n=45, k=29), dict(batch=1, m=1, n=45, k=67), dict(batch=1, m=19, n=23, k=2053)]


def test_every_slot_has_swaps():
    assert len(SWAPS) > 300
    assert {slot for _, slot, _ in SWAPS} == set(BUILT_INS)


@pytest.mark.parametrize("name,slot,comp", SWAPS, ids=lambda x: x if isinstance(x, str) else x.__name__)
def test_composition_is_right_or_refused(engine, rng, name, slot, comp):
    cls = composed(name, slot, comp)
    try:
        cls.check()
    except SetupError as exc:
        assert not exc.internal, exc
        assert comp.__name__ in str(exc) or slot.strip("_") in str(exc), exc   # it says which component
        return
    dtypes = ["float32"] if engine.backend == "opencl" else ["float32", "float16"]
    ran = 0
    for dtype, shape in itertools.product(dtypes, SHAPES):
        p = _problem(dtype, **shape)
        alg = cls()
        try:
            alg.setup(p, engine.dialect)
        except SetupError as exc:
            assert not exc.internal, f"{cls.name}: a component raised instead of refusing: {exc}"
            continue
        lead = (p.batch,) if p.batch > 1 else ()
        a = random(rng, lead + (p.m, p.k), dtype)
        b = np.swapaxes(random(rng, lead + (p.n, p.k), dtype), -1, -2)    # column-major b
        result = engine.matmul(a, b, algorithm=alg)
        assert rel_error(result, reference(a, b)) <= TOLERANCE[dtype], f"{cls.name} is wrong on {p}"
        ran += 1
    if not ran:
        pytest.skip(f"{cls.name} refuses every test problem on {engine.backend} (each with a reason)")


# -- CUDA sources of every composition that sets up, compiled without a GPU --------------------------
def composition_jobs() -> list:
    jobs = {}
    for (arch, cc), dtype, shape in itertools.product(((SM80, (8, 0)), (SM90A, (9, 0))), ("float16", "float32"),
                                                      SHAPES[:1]):
        d = dialect_for(nominal_cuda_device(*cc))
        for name, slot, comp in SWAPS:
            cls = composed(name, slot, comp)
            try:
                cls.check()
                alg = cls()
                cfg = alg.setup(_problem(dtype, **shape), d)
                src = alg.chosen(cfg).render(cfg, d)
            except SetupError:
                continue
            if ("wgmma" in src) != (arch == SM90A):
                continue     # wgmma only for sm_90a; everything else once, for sm_80
            jobs.setdefault((src, arch), f"{cls.name} {dtype}")
    return [(label, src, arch) for (src, arch), label in jobs.items()]


@pytest.mark.nvcc
@prefetched(composition_jobs)
def test_compositions_compile_for_cuda():
    nvcc = nvcc_or_skip()
    jobs = composition_jobs()
    assert len(jobs) > 40
    failures = failures_of(compile_jobs(jobs, nvcc))
    assert not failures, "\n\n".join(f"{k}:\n{v[-3000:]}" for k, v in list(failures.items())[:3])
