"""Tensor cores through NVIDIA's OpenCL driver, without the driver: the plane algorithms (mma.sync
of every kind, DMMA, fed by task loaders, double buffering or a cp.async ring) rendered for a
nominal NVIDIA OpenCL device whose probe passed (codegen/device.py, ``sm_80`` / ``sm_90``), their
structure checked, and each source built as that driver would build it, offline: clang's OpenCL
front end to PTX, ptxas for the GPU (tests/opencl_offline.py). Compiled only: nothing here runs on
the GPU (bench/opencl_tensor_cores.py does, on the GPU machine).

Also: what a device that lacks a feature gets (the refusal, with the probe's reason, or the
ldmatrix-less fragment path), and that the rings fit the driver's 48 KiB of local memory.
"""
from __future__ import annotations

import re
from dataclasses import replace

import pytest

from gemm_engine.algorithms import REGISTRY
from gemm_engine.algorithms.auto import decide
from gemm_engine.codegen.device import SASS_BUILD, nominal_cuda_device, nominal_opencl_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.codegen.ptx import SM90A_MARK
from gemm_engine.dtypes import BY_NAME, INT32
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.selector.rules import RULES
from gemm_engine.tile.wgmma import check_wgmma_device
from opencl_offline import compile_nvidia_opencl

PLANE_ALGORITHMS = ("simple_mma", "double_buffering_mma", "pipelined_mma", "simple_dmma", "pipelined_dmma")
#: (label, operand dtype, precision)
KINDS = [("f16", "float16", "default"), ("bf16", "bfloat16", "default"), ("tf32", "float32", "tf32"),
         ("s8", "int8", "default"), ("f64", "float64", "default")]
#: (shape, layouts, alignment or None for 16 bytes): the big square, odd extents with K off the
#: stage in both layouts and unaligned (the loaders' register paths), a batch.
CASES = [((1, 4096, 4096, 4096), ("row", "row"), None), ((1, 97, 61, 53), ("col", "col"), None),
         ((1, 97, 61, 53), ("row", "col"), (1, 1)), ((2, 33, 47, 29), ("col", "row"), None)]


def problem(shape, dtype, precision="default", layouts=("row", "row"), align=None):
    et = BY_NAME[dtype]
    out = INT32 if dtype == "int8" else et
    wide = 16 // et.itemsize
    a = align or (wide, wide)
    return MatmulProblem(*shape, et, et, out, Layout(layouts[0]), Layout(layouts[1]), *a, precision=precision)


def configs(target, names=PLANE_ALGORITHMS, cases=CASES):
    """(label, algorithm, problem, config) of every plane algorithm and kind that sets up on each
    case, one per distinct config."""
    dialect = dialect_for(nominal_opencl_device(target))
    seen = {}
    for name in names:
        alg = REGISTRY[name]()
        for label, dtype, precision in KINDS:
            for shape, layouts, align in cases:
                p = problem(shape, dtype, precision, layouts, align)
                try:
                    cfg = alg.setup(p, dialect)
                except SetupError:
                    continue
                seen.setdefault((name, cfg), (f"{name} {label} {shape} {layouts} align {align}", p, cfg))
    return dialect, list(seen.values())


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_every_plane_algorithm_sets_up_for_every_kind(target):
    _, found = configs(target)
    got = {(label.split()[0], label.split()[1]) for label, _, _ in found}
    for name in PLANE_ALGORITHMS:
        kinds = ("f64",) if "dmma" in name else ("f16", "bf16", "tf32", "s8")
        for kind in kinds:
            assert (name, kind) in got, f"{name} did not set up for {kind} on NVIDIA OpenCL {target}"


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_sources_build_offline_for_nvidia_opencl(target):
    """Every case on sm_80; on sm_90 what differs there: the DMMA m16n8k8 kernels and the big rings."""
    if target == "sm_80":
        dialect, found = configs(target)
    else:
        dialect, found = configs(target, ("pipelined_dmma", "simple_dmma"))
        found += configs(target, ("pipelined_mma",), CASES[:1])[1]
    failures = []
    for label, p, cfg in found:
        alg = REGISTRY[label.split()[0]]()
        text = alg.render(cfg, dialect)
        ok, log = compile_nvidia_opencl(text, target)
        if not ok:
            failures.append(f"{label}:\n{log[-1500:]}")
    assert not failures, f"{len(failures)} of {len(found)} sources failed:\n" + "\n".join(failures[:3])


@pytest.mark.parametrize("dtype, precision, shape", [("float16", "default", (1, 4096, 4096, 4096)),
                                                     ("bfloat16", "default", (1, 1000, 777, 1203)),
                                                     ("float32", "tf32", (1, 1000, 1003, 997)),
                                                     ("float16", "default", (1, 256, 256, 256))])
def test_wgmma_builds_offline_where_nvjitlink_builds_for_sm_90a(dtype, precision, shape):
    """Where the runtime compiles the driver's PTX by nvJitLink (`sass_build`) and the wgmma check
    passed, pipelined_wgmma renders for OpenCL: its sm_90a lines marked as comments for the driver's
    own sm_90 assembler (which rejects them), 48 KiB rings, and (unmarked, as runtime/sass.py does)
    it assembles for sm_90a; without the features it is refused, and the components that render
    CUDA-only instructions refuse it even with them."""
    plain = nominal_opencl_device("sm_90")
    built = replace(plain, features=plain.features | {SASS_BUILD, "wgmma"})
    dialect = dialect_for(built)
    p = problem(shape, dtype, precision)
    alg = REGISTRY["pipelined_wgmma"]()
    cfg = alg.setup(p, dialect)
    assert cfg.batch.global_.dynamic_shared_bytes <= 48 * 1024
    text = alg.render(cfg, dialect)
    assert SM90A_MARK in text and "wgmma.mma_async" in text and "unsigned long long" not in text
    assert "__attribute__((aligned(1024)))" in text
    ok, log = compile_nvidia_opencl(text, "sm_90a")
    assert ok, log[-1500:]
    with pytest.raises(SetupError, match="needs wgmma"):
        alg.setup(p, dialect_for(plain))
    with pytest.raises(SetupError, match=r"needs wgmma \(CUDA sm_90a\)"):
        check_wgmma_device("quantized_wgmma_global", dialect, cuda_only=True)


@pytest.mark.parametrize("name, dtype, precision, needle", [
    ("pipelined_mma", "float16", "default", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
    ("pipelined_mma", "bfloat16", "default", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
    ("pipelined_mma", "float32", "tf32", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
    ("pipelined_mma", "int8", "default", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"),
    ("pipelined_dmma", "float64", "default", "mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64"),
])
def test_structure_on_nvidia_opencl(name, dtype, precision, needle):
    """The instructions are there (ldmatrix for 16-bit kinds, cp.async for the ring), spelled for
    OpenCL C (``__asm__``, no references, a ``__local`` ring within 48 KiB, shared addresses as the
    __local pointer's value), and nothing of sm_90a."""
    dialect = dialect_for(nominal_opencl_device("sm_90"))
    alg = REGISTRY[name]()
    cfg = alg.setup(problem((1, 4096, 4096, 4096), dtype, precision), dialect)
    text = alg.render(cfg, dialect)
    assert needle in text and "cp.async.cg.shared.global" in text
    assert ("ldmatrix.sync.aligned" in text) == (dtype in ("float16", "bfloat16"))
    assert "__asm__" in text and not re.search(r"\basm\b", text)
    assert "unsigned&" not in text and "extern __shared__" not in text
    assert "wgmma" not in text and "setmaxnreg" not in text
    assert "(uint)(size_t)(&" in text
    ring = cfg.batch.global_.dynamic_shared_bytes
    assert f"LOCAL unsigned char gemm_ring[{ring}]" in text and ring <= 48 * 1024


def test_rings_are_fitted_to_48_kib():
    dialect = dialect_for(nominal_opencl_device("sm_90"))
    for name, dtype, precision in (("pipelined_mma", "float16", "default"), ("pipelined_mma", "float32", "tf32"),
                                   ("pipelined_dmma", "float64", "default")):
        for n in (4096, 2048, 1000):
            cfg = REGISTRY[name]().setup(problem((1, n, n, n), dtype, precision), dialect)
            assert cfg.batch.global_.dynamic_shared_bytes <= 48 * 1024


def test_without_ldmatrix_fragments_come_two_halves_at_a_time():
    """A driver that runs mma.sync but not ldmatrix (the probe refused it) still gets tensor cores."""
    dev = nominal_opencl_device("sm_90")
    dev = replace(dev, features=dev.features - {"ldmatrix"}, refusals=(("ldmatrix", "ran, but wrote wrong words"),))
    dialect = dialect_for(dev)
    alg = REGISTRY["pipelined_mma"]()
    cfg = alg.setup(problem((1, 256, 256, 256), "float16"), dialect)
    assert cfg.batch.global_.stage.tile.ldmatrix is False
    text = alg.render(cfg, dialect)
    assert "ldmatrix.sync" not in text and "mma.sync.aligned.m16n8k16" in text and "<< 16)" in text
    ok, log = compile_nvidia_opencl(text, "sm_80")
    assert ok, log[-2000:]


@pytest.mark.parametrize("feature, name, dtype, precision", [
    ("mma_sync", "simple_mma", "float16", "default"),
    ("bf16_mma", "simple_mma", "bfloat16", "default"),
    ("f64_mma", "simple_dmma", "float64", "default"),
    ("cp_async", "pipelined_mma", "float16", "default"),
])
def test_a_refused_feature_refuses_with_the_probe_reason(feature, name, dtype, precision):
    dev = nominal_opencl_device("sm_90")
    why = "ptxas: Feature 'x' requires .target sm_99"
    dev = replace(dev, features=dev.features - {feature}, refusals=((feature, why),))
    with pytest.raises(SetupError, match="sm_99"):
        REGISTRY[name]().setup(problem((1, 256, 256, 256), dtype, precision), dialect_for(dev))


@pytest.mark.parametrize("target", ["gpu", "cpu", "gfx90a", "xe-hpg"])
def test_other_opencl_devices_get_no_ptx(target):
    dialect = dialect_for(nominal_opencl_device(target))
    for name in PLANE_ALGORITHMS:
        with pytest.raises(SetupError, match="mma|cp.async|DMMA"):
            REGISTRY[name]().setup(problem((1, 256, 256, 256), "float64" if "dmma" in name else "float16"), dialect)


def test_auto_takes_tensor_cores_on_nvidia_opencl():
    dialect = dialect_for(nominal_opencl_device("sm_90"))
    members = [REGISTRY[r.algorithm]() for r in RULES]
    for dtype, precision, want in (("float16", "default", "pipelined_mma"), ("bfloat16", "default", "pipelined_mma"),
                                   ("float32", "tf32", "pipelined_mma"), ("float64", "default", "pipelined_dmma")):
        member, cfg, _ = decide(members, problem((1, 4096, 4096, 4096), dtype, precision), dialect)
        assert member.name == want, (dtype, member.name)
    member, _, _ = decide(members, problem((1, 4096, 4096, 4096), "float32"), dialect)
    assert member.name == "simple_unit"    # plain float32 is not rounded to tf32 behind the caller's back


def test_without_cp_async_auto_keeps_the_tensor_cores():
    """A driver whose probe refused cp.async (but not mma.sync) gets the ring-less tensor-core kernels,
    not register FMA; on CUDA and a complete driver their rule says no."""
    dev = nominal_opencl_device("sm_90")
    no_ring = dialect_for(replace(dev, features=dev.features - {"cp_async"}, refusals=(("cp_async", "x"),)))
    members = [REGISTRY[r.algorithm]() for r in RULES]
    for dtype, want in (("float16", "double_buffering_mma"), ("float64", "simple_dmma")):
        member, _, _ = decide(members, problem((1, 1024, 1024, 1024), dtype), no_ring)
        assert member.name == want
    for dialect in (dialect_for(dev), dialect_for(nominal_cuda_device(8, 0))):
        member, _, _ = decide(members, problem((1, 1024, 1024, 1024), "float16"), dialect)
        assert member.name == "pipelined_mma"


def test_split_k_on_tensor_cores_builds_offline():
    """auto's split-K gate takes split_k_mma for a long K on NVIDIA's OpenCL: its kernels build too."""
    dialect = dialect_for(nominal_opencl_device("sm_90"))
    alg = REGISTRY["split_k_mma"]()
    text = alg.render(alg.setup(problem((1, 64, 64, 65536), "float16"), dialect), dialect)
    assert "mma.sync.aligned.m16n8k16" in text
    ok, log = compile_nvidia_opencl(text, "sm_90")
    assert ok, log[-2000:]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_swizzled_three_slot_ring_fills_48_kib_and_builds(dtype, target):
    """The plane stage's swizzled rows: 128 x 128 x 32 in 3 slots is the driver's whole 48 KiB (the
    ring is the kernel's only local memory), and the source builds as the driver would build it."""
    dialect = dialect_for(nominal_opencl_device(target))
    alg = REGISTRY["pipelined_mma"](planes_m=2, planes_n=2, partition_m=4, partition_n=8, stage_k=32, stages=3,
                                    fragment_buffering=True, smem_swizzle=True)
    cfg = alg.setup(problem((1, 4096, 4096, 4096), dtype), dialect)
    assert cfg.batch.global_.dynamic_shared_bytes == 48 * 1024 == dialect.device.max_shared_memory
    text = alg.render(cfg, dialect)
    assert re.findall(r"\bLOCAL\b[^;\n]*\[", text) == ["LOCAL unsigned char gemm_ring["]
    assert "ldmatrix.sync.aligned" in text and "^ ((" in text
    ok, log = compile_nvidia_opencl(text, target)
    assert ok, log[-2000:]
