"""The dequantizing pass in front of the dense kernels (batch/dequantize_first.py, algorithms/dequantized.py).

The pass is checked bit for bit: with x the identity (K x K), every output element is one weight
value times 1 plus zeros, so ``x @ W`` must equal each weight value rounded once to x's type
(float32: exact), which a wrong code, shift, scale, zero, group, layout, rounding or row past K
would change: every code, group size (a scale per run of word rows and per word), zeros or not, both
layouts, the three activation types, K past the last group and inside a word, N = 1; GPTQ and AWQ
checkpoints' tensors (packed here by their documented orders) the same way. Then random activations
with a batch, views and the fused epilogue against float64, the refusals, auto's choices on nominal
devices, and the CUDA sources (sm_80, sm_90a; nvcc, no spills).
"""
from __future__ import annotations

import numpy as np
import pytest

import re
import subprocess

from cuda_compile import assert_no_spills, nvcc_or_skip, prefetched
from gemm_engine.algorithms import REGISTRY
from gemm_engine.batch.dequantize_first import DEQUANTIZE_KERNEL, DequantizeFirstConfig, dense_view
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BFLOAT16, FLOAT16, FLOAT32, FLOAT64
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.quant import AWQ_ORDER, WeightFormat, from_awq, from_gptq, quantize
from gemm_engine.selector.conditions import dequantize_first_worth_it
from helpers import BF16, TOLERANCE, np_dtype, rel_error
from pass_cases import CASES, FULL, NAMES, run_or_skip, weight

def _name_cases(cases, few):
    return [pytest.param(name, case, id=f"{name}-" + "-".join(map(str, case)))
            for name in NAMES for case in cases if name in FULL or case in cases[:few]]


@pytest.mark.parametrize("name, case", _name_cases(CASES, 8))
def test_the_pass_writes_each_value_rounded_once(engine, rng, name, case):
    kind, symmetric, group, k, n, layout, dtype = case
    if dtype == "bfloat16" and BF16 is None:
        pytest.skip("bfloat16 needs ml_dtypes")
    if engine.backend == "opencl" and name != "dequantized_simple_unit":
        pytest.skip("tensor-core compositions: CUDA only")
    q = quantize(weight(rng, k, n), kind, group, symmetric, scale_dtype="bfloat16" if k % 2 else "float16")
    q = q.prepack() if layout == "prepacked" else q
    x = np.eye(k, dtype=np_dtype(dtype))
    y = run_or_skip(engine, x, q, name)
    assert engine.last_choice[0].name == name and y.dtype == np_dtype(dtype)
    expect = q.dequantize(rounded_to=None if dtype == "float32" else dtype)
    np.testing.assert_array_equal(np.asarray(y, np.float32), expect)


def gptq_words(codes, bits):
    """GPTQ's qweight (K * bits / 32, N): row r * (32 / bits) + j in bits [bits * j, ...) (AutoGPTQ)."""
    per = 32 // bits
    k, n = codes.shape
    shifted = codes.reshape(k // per, per, n).astype(np.uint64) << (bits * np.arange(per, dtype=np.uint64))[:, None]
    return shifted.sum(axis=1).astype(np.uint32).view(np.int32)


def awq_words(x):
    """AWQ's packing along N: nibble i of word c holds column 8c + AWQ_ORDER[i] (AutoAWQ)."""
    k, n = x.shape
    cols = x.reshape(k, n // 8, 8)[:, :, list(AWQ_ORDER)].astype(np.uint64)
    return (cols << (4 * np.arange(8, dtype=np.uint64))).sum(axis=2).astype(np.uint32).view(np.int32)


#: (checkpoint, bits, group, layout, dtype): v1 GPTQ zeros stored minus one (the top code's zero is
#: 2^bits, past what a code holds), AWQ's column order.
CHECKPOINTS = [("gptq", 4, 32, "k_packed", "float16"), ("gptq", 4, 128, "prepacked", "bfloat16"),
               ("gptq", 8, 64, "prepacked", "float32"), ("awq", 4, 64, "k_packed", "bfloat16"),
               ("awq", 4, 128, "prepacked", "float32")]


@pytest.mark.parametrize("name, case", _name_cases(CHECKPOINTS, 0))
def test_checkpoint_weights_through_the_pass(engine, rng, name, case):
    source, bits, group, layout, dtype = case
    if dtype == "bfloat16" and BF16 is None:
        pytest.skip("bfloat16 needs ml_dtypes")
    if engine.backend == "opencl" and name != "dequantized_simple_unit":
        pytest.skip("tensor-core compositions: CUDA only")
    k, n, top = 256, 40, (1 << bits) - 1
    codes = rng.integers(0, top + 1, (k, n))
    zeros = rng.integers(0, top + 1, (k // group, n))
    zeros[0, :3] = top                       # stored top: GPTQ's zero 2^bits
    scales = rng.uniform(0.01, 0.1, (k // group, n)).astype(np.float16)
    if source == "gptq":
        q = from_gptq(gptq_words(codes, bits), gptq_words(zeros.T, bits).T, scales, bits=bits, group_size=group)
        zero = zeros + 1.0
    else:
        q = from_awq(awq_words(codes), awq_words(zeros), scales, group_size=group)
        zero = zeros.astype(np.float64)
    rows = np.arange(k) // group
    exact = (codes - zero[rows]) * scales.astype(np.float64)[rows]   # the checkpoint's documented values
    np.testing.assert_array_equal(q.dequantize(), exact.astype(np.float32))
    q = q.prepack() if layout == "prepacked" else q
    y = run_or_skip(engine, np.eye(k, dtype=np_dtype(dtype)), q, name)
    expect = exact.astype(np.float32) if dtype == "float32" else q.dequantize(rounded_to=dtype)
    np.testing.assert_array_equal(np.asarray(y, np.float32), expect)


@pytest.mark.parametrize("name", NAMES)
def test_vector_x_row_bias_activation_out_and_views(engine, rng, name):
    if engine.backend == "opencl" and name != "dequantized_simple_unit":
        pytest.skip("tensor-core compositions: CUDA only")
    q = quantize(weight(rng, 136, 50), "int8", 32, symmetric=False).prepack()
    w = q.dequantize(rounded_to="float16").astype(np.float64)
    v = rng.standard_normal(136).astype(np.float16)                  # M = 1 through numpy's 1-D rule
    y = run_or_skip(engine, v, q, name, activation="gelu")
    assert y.shape == (50,)
    ref = v.astype(np.float64) @ w
    gelu = 0.5 * ref * (1 + np.tanh(np.sqrt(2 / np.pi) * (ref + 0.044715 * ref ** 3)))
    assert rel_error(y, gelu) <= 5e-3
    # a strided x (every other row, columns from 1: the lhs not 16-byte aligned), a bias over rows,
    # float32 output into out=
    big = rng.standard_normal((2, 60, 137)).astype(np.float16)
    x = big[:, ::2, 1:]
    bias = rng.standard_normal(30).astype(np.float32)
    out = np.full((2, 30, 50), np.nan, np.float32)
    y = run_or_skip(engine, x, q, name, bias=bias, bias_axis=-2, out=out, out_dtype="float32")
    ref = x.astype(np.float64) @ w + bias[:, None]
    assert y is out and rel_error(out, ref) <= TOLERANCE["float16"]


@pytest.mark.parametrize("name", NAMES)
def test_batch_and_fused_epilogue(engine, rng, name):
    if engine.backend == "opencl" and name != "dequantized_simple_unit":
        pytest.skip("tensor-core compositions: CUDA only")
    q = quantize(weight(rng, 200, 72), "int4", 64, symmetric=False)
    x = rng.standard_normal((2, 70, 200)).astype(np.float16)
    bias = rng.standard_normal(72).astype(np.float32)
    y = run_or_skip(engine, x, q, name, alpha=0.5, bias=bias, activation="relu")
    w = q.dequantize(rounded_to="float16").astype(np.float64)
    ref = np.maximum(0.5 * (x.astype(np.float64) @ w) + bias, 0.0)
    assert rel_error(y, ref) <= TOLERANCE["float16"]
    # c keeps the batch unfolded: the dense kernel walks batch entries, the weight's copy is one.
    c = rng.standard_normal((2, 70, 72)).astype(np.float16)
    y = run_or_skip(engine, x, q, name, c=c, beta=1.0)
    assert rel_error(y, x.astype(np.float64) @ w + c) <= TOLERANCE["float16"]


@pytest.mark.parametrize("name", NAMES)
def test_gated_epilogue_pairs_the_copys_columns(engine, rng, name):
    """SwiGLU over gate / up columns interleaved in the weight: the dense kernel after the pass pairs
    them (global_/write/pairs.py), half the columns out."""
    if engine.backend == "opencl" and name != "dequantized_simple_unit":
        pytest.skip("tensor-core compositions: CUDA only")
    q = quantize(0.05 * weight(rng, 192, 96), "int4", 64, symmetric=False).prepack()   # products inside f16
    x = rng.standard_normal((40, 192)).astype(np.float16)
    y = run_or_skip(engine, x, q, name, activation="swiglu")
    z = x.astype(np.float64) @ q.dequantize(rounded_to="float16").astype(np.float64)
    gate, up = z[:, 0::2], z[:, 1::2]
    assert y.shape == (40, 48) and rel_error(y, gate / (1 + np.exp(-gate)) * up) <= TOLERANCE["float16"]


def _problem(m=256, n=4096, k=4096, et=BFLOAT16, fmt=WeightFormat("int4", 128, True, "bf16_bits", "prepacked"),
             **more):
    return MatmulProblem(1, m, n, k, et, et, et, **{"lhs_align": 16 // et.itemsize, "weights": fmt, **more})


def test_config_launches_workspace_and_signature():
    d = dialect_for(nominal_cuda_device(9, 0))
    problem = _problem(k=4100)
    alg = REGISTRY["dequantized_specialized_wgmma"]()
    cfg = alg.setup(problem, d)
    assert isinstance(cfg.batch, DequantizeFirstConfig) and cfg.batch.rhs_copy and not cfg.batch.lhs_copy
    assert cfg.batch.k_ragged and cfg.batch.weights == problem.weights and cfg.batch.global_.weights is None
    launches = alg.launches(cfg, problem)
    # 64 strips of 64 columns x 513 word rows (K to whole 16-byte pieces) in 32 word rows per cube,
    # then the dense kernel
    assert [(x.name, x.cubes, x.units) for x in launches][0] == (DEQUANTIZE_KERNEL, 64 * 17, 256)
    assert launches[1].name == "gemm_engine_kernel"
    assert alg.workspace(cfg, problem).count == 4096 * 4104       # one copy: rows of K to whole words
    names = alg.signature(cfg).names
    assert {"qscale_base", "qzero_ld", "workspace", "rhs_map"} <= set(names)
    assert next(p for p in alg.signature(cfg).params if p.name == "rhs_base").word == "u32"
    # The dense kernel's tiling is the dense product's.
    assert cfg.selection == REGISTRY["specialized_wgmma"]().selection_for(dense_view(problem), d)


def test_an_unaligned_x_is_copied_first_and_the_weight_after_it():
    d = dialect_for(nominal_cuda_device(9, 0))
    problem = _problem(m=300, k=100, n=64, lhs_align=2)
    cfg = REGISTRY["dequantized_specialized_wgmma"]().setup(problem, d)
    assert cfg.batch.lhs_copy and cfg.batch.rhs_copy
    assert REGISTRY["dequantized_specialized_wgmma"]().workspace(cfg, problem).count == (300 + 64) * 104


@pytest.mark.parametrize("problem, words", [
    (_problem(fmt=None), "dense array"),
    (_problem(et=FLOAT64), "float32, float16 or bfloat16"),
])
def test_refusals(problem, words):
    d = dialect_for(nominal_cuda_device(9, 0))
    for name in NAMES:
        with pytest.raises(SetupError, match=words):
            REGISTRY[name]().setup(problem, d)


def test_refused_where_pairs_cannot_be_packed():
    with pytest.raises(SetupError, match="sm_80"):
        REGISTRY["dequantized_simple_unit"]().setup(_problem(), dialect_for(nominal_cuda_device(7, 5)))


def _auto(problem, dialect) -> str:
    return REGISTRY["auto"]().resolve_member(problem, dialect)[0].name


def test_auto_takes_the_pass_past_decode_sizes():
    sm90, sm80 = dialect_for(nominal_cuda_device(9, 0)), dialect_for(nominal_cuda_device(8, 0))
    # Hopper: the register-operand wgmma kernel to 512 rows (test_quantized_wgmma.py), the pass past it
    # but for one wave of its producer form's 256-row cubes (to 1024 rows)
    assert _auto(_problem(m=256), sm90) == "quantized_wgmma"
    assert _auto(_problem(m=1024), sm90) == "quantized_wgmma"
    assert _auto(_problem(m=2048), sm90) == "dequantized_specialized_wgmma"
    assert _auto(_problem(m=4096, n=14336), sm90) == "dequantized_specialized_wgmma"
    assert _auto(_problem(m=256), sm80) == "dequantized_pipelined_mma"
    assert _auto(_problem(m=40), sm90).startswith("quantized_decode")
    # a small weight: the pass's bytes cost more than the dense kernel saves
    assert dequantize_first_worth_it(_problem(m=8, n=4096, k=4096), sm90) is not None
    assert dequantize_first_worth_it(_problem(m=48, n=4096, k=4096), sm90) is None
    assert dequantize_first_worth_it(_problem(m=40, fmt=WeightFormat("int8", 0)), sm90) is not None


#: (algorithm, format, group, zeros, layout, M, dtype, K ragged): the rendered variants of the pass.
SOURCE_CASES = [
    ("dequantized_specialized_wgmma", "int4", 128, True, "prepacked", 256, "bfloat16", False),
    ("dequantized_specialized_wgmma", "int8", 0, False, "k_packed", 4096, "float16", True),
    ("dequantized_pipelined_wgmma", "fp8_e4m3", 32, False, "prepacked", 512, "bfloat16", False),
    ("dequantized_pipelined_mma", "int4", 32, False, "k_packed", 300, "float16", True),
    ("dequantized_pipelined_mma", "int8", 4, True, "prepacked", 300, "bfloat16", True),    # a scale per word
]


def cuda_sources() -> dict:
    out = {}
    for name, kind, group, zeros, layout, m, dtype, ragged in SOURCE_CASES:
        et = {"bfloat16": BFLOAT16, "float16": FLOAT16}[dtype]
        fmt = WeightFormat(kind, group, zeros, "bf16_bits" if dtype == "bfloat16" else "f16_bits", layout)
        for cc in ((8, 0), (9, 0)):
            if cc < (9, 0) and "wgmma" in name:
                continue
            d = dialect_for(nominal_cuda_device(*cc))
            alg = REGISTRY[name]()
            cfg = alg.setup(_problem(m=m, k=4096 + (3 if ragged else 64), et=et, fmt=fmt), d)
            out[f"{name}-{kind}-{group}-{layout}-{dtype}-sm{cc[0]}{cc[1]}"] = alg.render(cfg, d)
    return out


def _jobs():
    from cuda_compile import jobs_by_suffix
    return jobs_by_suffix(cuda_sources())


@prefetched(_jobs)
def test_cuda_sources_compile_without_spills():
    assert_no_spills(_jobs())


def test_cuda_pass_source_structure():
    src = cuda_sources()["dequantized_specialized_wgmma-int4-128-prepacked-bfloat16-sm90"]
    body = src[src.index(f"void {DEQUANTIZE_KERNEL}("):]
    body = body[: body.index("\n}\n")]
    assert "cvt.rn.bf16x2.f32" in src and body.count("uint4 dq_v;") == 1      # 16-byte stores, pairs rounded once
    assert body.count("qscale[") == 1          # one scale a piece (group 128 holds the piece's 8 rows)
    assert "< dq_k ?" not in body              # K a whole number of pieces: no per-row guard
    # Coalesced both ways: words read columns fastest into shared memory, then a plane's 32 units
    # write 32 consecutive 16-byte pieces of one column's row (not 32 columns' rows, 8 KB apart).
    assert "dq_tile[" in body and "SYNC_CUBE();" in body
    assert "const int c = e / 32, q = e % 32;" in body and "const i64 col = n0 + c, kw = kw0 + q * 1;" in body
    assert "(GLOBAL uint4*)dst + (col * k_pitch + kw * 8) / 8" in body
    ragged = cuda_sources()["dequantized_pipelined_mma-int4-32-k_packed-float16-sm80"]
    assert "< dq_k ?" in ragged and "cvt.rn.f16x2.f32" in ragged
    per_word = cuda_sources()["dequantized_pipelined_mma-int8-4-prepacked-bfloat16-sm80"]
    body = per_word[per_word.index(f"void {DEQUANTIZE_KERNEL}("):]
    assert body[: body.index("\n}\n")].count("qscale[") == 2      # groups of 4 rows: a scale for each word of a piece


@pytest.mark.parametrize("case", ["dequantized_pipelined_mma-int4-32-k_packed-float16-sm80",
                                  "dequantized_pipelined_mma-int8-4-prepacked-bfloat16-sm80"])
def test_cuda_pass_stores_whole_16_byte_vectors(tmp_path, case):
    """The PTX of the pass: every global store 16 bytes (nvcc once split a uint4 store through an
    element pointer into four 4-byte ones), and every packed word loaded before the barrier."""
    nvcc = nvcc_or_skip()
    path = tmp_path / "pass.cu"
    path.write_text(cuda_sources()[case])
    subprocess.run([nvcc, "-ptx", "-arch=sm_80", "-o", str(tmp_path / "pass.ptx"), str(path)], check=True,
                   capture_output=True)
    ptx = (tmp_path / "pass.ptx").read_text()
    entry = ptx[ptx.index(f".entry {DEQUANTIZE_KERNEL}("):]
    entry = entry[: entry.index("\n}\n")]
    stores = re.findall(r"st\.global(?:\.[a-z0-9]+)*", entry)
    assert stores and set(stores) == {"st.global.v4.u32"}, sorted(set(stores))
    before = entry[: entry.index("bar.sync")]
    assert before.count("ld.global") == 64 * (32 * 2 if "int8" in case else 32) // 256
