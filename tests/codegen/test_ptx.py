"""codegen/ptx.py and ptx_dequant.py: each builder's (name, definition) -- one name per PTX text, the function it
defines, the operands it binds, its qualifiers -- and every definition through ptxas (sm_90a)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from gemm_engine.codegen import ptx, ptx_dequant, ptx_tma
from gemm_engine.codegen.cuda_dialect import CudaDialect

from cuda_compile import SM90A, compile_cuda, nvcc_or_skip

#: Every builder over the parameters the components use (and a few more), as (call text, result).
BUILDS = [
    *(f"ldmatrix({c}, {t})" for c in (1, 2, 4) for t in (False, True)),
    "cvt_tf32()", "cvt_pack('f16x2')", "cvt_pack('bf16x2')",
    "ptx_dequant.dequant_pair('f16')", "ptx_dequant.dequant_pair('bf16')",
    "ptx_dequant.dequant_masked_pair('bf16', 0x000F000F, 0x43004300)", "ptx_dequant.dequant_fp8_pair('bf16')",
    "ptx_dequant.dequant_fp8_pair('f16')", "ptx_dequant.dequant_int8_pair_bf16()",
    "ld_stream_u4()", "ld_stream_f4()",
    "mma_sync(16, 8, 16, 'f16', 'f32', 'f', 'float', 4, 2)",
    "mma_sync(16, 8, 16, 'bf16', 'f32', 'f', 'float', 4, 2)",
    "mma_sync(16, 8, 8, 'tf32', 'f32', 'f', 'float', 4, 2)",
    "mma_sync(16, 8, 32, 's8', 's32', 'r', 'int', 4, 2)",
    "dmma(8, 8, 4)", "dmma(16, 8, 4)", "dmma(16, 8, 8)", "dmma(16, 8, 16)",
    "wgmma(64, 16, 'f16', (0, 1))", "wgmma(128, 16, 'bf16', (1, 0))", "wgmma(64, 16, 'f16', (0, 0), overwrite=True)",
    "wgmma(64, 8, 'tf32', None)", "wgmma(64, 32, 'e4m3', None, rhs_kind='e5m2')",
    "wgmma(64, 32, 's8', None, acc='s32')", "wgmma(256, 16, 'bf16', (0, 0))",
    "wgmma_fence()", "wgmma_commit()", "wgmma_wait(0)", "wgmma_wait(1)",
    "pin_registers(32)", "pin_registers(64, 'i32')", "fence_proxy_async()",
    "cp_async('cg', 16, False)", "cp_async('cg', 16, True)", "cp_async('ca', 8, False)", "cp_async('ca', 4, True)",
    "cp_async_commit()", "cp_async_wait(0)", "cp_async_wait(2)", "cp_async_wait_all()", "st_shared_v4()",
    "mbarrier_init()", "fence_mbarrier_init()", "mbarrier_arrive()", "mbarrier_arrive_expect_tx()",
    "mbarrier_wait()", "cluster_rank()", "mbarrier_arrive_remote()", "cluster_sync()",
    "ptx_tma.tma_load(2)", "ptx_tma.tma_load(3)", "ptx_tma.tma_load_multicast(2)", "ptx_tma.tma_load_multicast(3)",
    "ptx_tma.tma_store(2)", "ptx_tma.tma_store(3)", "ptx_tma.bulk_load()", "ptx_tma.tensor_map_extent(0)",
    "ptx_tma.tensor_map_extent(1)", "ptx_tma.bulk_commit()", "ptx_tma.bulk_wait(0, True)",
    "ptx_tma.bulk_wait(0, False)", "ptx_tma.bulk_wait(1, True)", "named_barrier()",
    "setmaxnreg(True, 240)", "setmaxnreg(False, 40)", "st_global_v4('f32')", "st_global_v4('i32')",
    "ld_global_cg_v4('f32')", "ld_global_cg_v4('i32')", "flag_release()", "flag_acquire_clear()",
]


def build(call: str) -> tuple[str, str]:
    qualified = "." in call.split("(")[0]
    return eval(call if qualified else f"ptx.{call}", {"ptx": ptx, "ptx_dequant": ptx_dequant, "ptx_tma": ptx_tma})


_HEAD = re.compile(r"^INLINE (\w+) (\w+)\(([^)]*)\) \{\n", re.M)


def _asm_operands(definition: str) -> list[tuple[str, int, int]]:
    """(joined PTX text, operands bound, highest %N used) of each asm statement of ``definition``."""
    out = []
    for stmt in re.findall(r"asm(?: volatile)?\((.*?)\);", definition, re.S):
        constraint = r'"[=+]?[a-z]"\('
        bound = len(re.findall(constraint, stmt))
        text = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', re.split(r'\s:', stmt)[0]))
        used = [int(n) for n in re.findall(r"(?<!%)%(\d+)", text)]
        out.append((text, bound, max(used, default=-1)))
    return out


@pytest.mark.parametrize("call", BUILDS)
def test_definition_defines_the_named_function(call):
    name, definition = build(call)
    head = _HEAD.match(definition)
    assert head is not None, definition
    assert head.group(2) == name
    assert definition.rstrip().endswith("}")
    assert definition.count("{") == definition.count("}")


@pytest.mark.parametrize("call", BUILDS)
def test_asm_operands_are_all_bound(call):
    _, definition = build(call)
    statements = _asm_operands(definition)
    if call.startswith("ld_global_cg_v4"):
        assert not statements and "__ldcg" in definition   # a compiler intrinsic on purpose
        return
    assert statements, definition
    for text, bound, used in statements:
        assert used < bound, f"{call}: %{used} used with {bound} operands in {text!r}"


def test_one_name_means_one_definition():
    by_name: dict = {}
    for call in BUILDS:
        name, definition = build(call)
        by_name.setdefault(name, set()).add(definition)
    assert all(len(defs) == 1 for defs in by_name.values())
    # ... and no two parameter sets that change the text share a name.
    texts = {build(c)[1] for c in BUILDS}
    assert len(by_name) == len(texts)


def test_builders_are_deterministic():
    for call in BUILDS:
        assert build(call) == build(call)


@pytest.mark.parametrize("call", ["cp_async('cg', 16, True)", "mbarrier_wait()",
                                  "ptx_tma.tma_load(2)", "ptx_tma.tma_store(3)", "cluster_sync()",
                                  "ptx_tma.bulk_wait(0, True)", "ptx_tma.tensor_map_extent(1)",
                                  "fence_proxy_async()", "wgmma_fence()", "named_barrier()", "flag_release()",
                                  "st_global_v4('f32')", "st_shared_v4()", "mbarrier_arrive_remote()"])
def test_memory_ordering_statements_are_volatile_with_memory_clobber(call):
    _, definition = build(call)
    assert "asm volatile(" in definition
    assert '"memory"' in definition


@pytest.mark.parametrize("call", ["cvt_tf32()", "cvt_pack('bf16x2')", "mma_sync(16, 8, 16, 'f16', 'f32', 'f', 'float', 4, 2)",
                                  "dmma(16, 8, 8)", "ptx_dequant.dequant_pair('f16')", "ld_stream_f4()"])
def test_register_computations_are_plain_asm(call):
    _, definition = build(call)
    assert "asm(" in definition and "asm volatile" not in definition and '"memory"' not in definition


def test_ldmatrix_binds_count_registers_and_the_address():
    for count in (1, 2, 4):
        name, definition = ptx.ldmatrix(count, trans=False)
        assert f"x{count}" in name
        assert definition.count("unsigned& r") == count
        assert f".x{count}.shared.b16" in definition and ".trans" not in definition
        [(text, bound, used)] = _asm_operands(definition)
        assert bound == count + 1 and f"[%{count}]" in text
    assert ".trans" in ptx.ldmatrix(2, trans=True)[1]


def test_mma_sync_accumulates_in_place_from_the_register_counts():
    _, definition = ptx.mma_sync(16, 8, 16, "bf16", "f32", "f", "float", 4, 2)
    [(text, bound, _)] = _asm_operands(definition)
    assert "m16n8k16.row.col.f32.bf16.bf16.f32" in text
    assert bound == 4 + 4 + 2
    assert definition.count('"+f"(c[') == 4                 # read-write: accumulate in place
    # d and c are the same four registers.
    assert text.endswith("{%0, %1, %2, %3};")


@pytest.mark.parametrize("shape, counts, by_value", [((8, 8, 4), (2, 1, 1), ("a", "b")),
                                                      ((16, 8, 4), (4, 2, 1), ("b",)),
                                                      ((16, 8, 8), (4, 4, 2), ()),
                                                      ((16, 8, 16), (4, 8, 4), ())])
def test_dmma_operand_counts(shape, counts, by_value):
    name, definition = ptx.dmma(*shape)
    assert name == "ptx_dmma_m{}n{}k{}".format(*shape)
    nc, na, nb = counts
    assert definition.count('"+d"(c[') == nc
    [(_, bound, used)] = _asm_operands(definition)
    assert bound == used + 1 == nc + na + nb
    for op in ("a", "b"):
        assert (f"double {op}," in definition or f"double {op})" in definition) == (op in by_value)


def test_wgmma_accumulators_scales_and_transposes():
    name, definition = ptx.wgmma(128, 16, "bf16", (1, 0))
    assert definition.count('"+f"(acc[') == 64
    assert "m64n128k16.f32.bf16.bf16" in definition and "p, 1, 1, 1, 0;" in definition
    assert name.endswith("_t10") and '"r"(1)' in definition         # scale-d 1: accumulate
    name0, definition0 = ptx.wgmma(128, 16, "bf16", (1, 0), overwrite=True)
    assert name0 == name + "_d0" and '"r"(0)' in definition0
    # Integer kinds: s32 accumulators in int registers, no imm-scale operands, no transposes.
    name, definition = ptx.wgmma(64, 32, "s8", None, acc="s32")
    assert definition.count('"+r"(acc[') == 32 and "int* acc" in definition
    assert "p;" in definition and ", 1, 1" not in definition and "_t" not in name
    # Mixed fp8 kinds are both named.
    name, definition = ptx.wgmma(64, 32, "e4m3", None, rhs_kind="e5m2")
    assert "e4m3_e5m2" in name and ".f32.e4m3.e5m2" in definition


def test_wait_counts_and_variants_are_in_names_and_text():
    assert ptx.cp_async_wait(3) == ("ptx_cp_async_wait_3", ptx.cp_async_wait(3)[1])
    assert "cp.async.wait_group 3;" in ptx.cp_async_wait(3)[1]
    assert "wgmma.wait_group.sync.aligned 1;" in ptx.wgmma_wait(1)[1]
    read, write = ptx_tma.bulk_wait(2, True), ptx_tma.bulk_wait(2, False)
    assert read[0] != write[0]
    assert "wait_group.read 2;" in read[1] and "wait_group 2;" in write[1]
    inc, dec = ptx.setmaxnreg(True, 232), ptx.setmaxnreg(False, 40)
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in inc[1] and "setmaxnreg.dec.sync.aligned.u32 40;" in dec[1]


def test_cp_async_zfill_reads_src_bytes():
    _, plain = ptx.cp_async("cg", 16, False)
    _, zfill = ptx.cp_async("cg", 16, True)
    assert "int src_bytes" in zfill and "src_bytes" not in plain
    assert "16, %2;" in zfill


@pytest.mark.parametrize("rank", [1, 2, 3, 5])
def test_tma_coordinates(rank):
    for builder, first in ((ptx_tma.tma_load, 3), (ptx_tma.tma_load_multicast, 4), (ptx_tma.tma_store, 2)):
        name, definition = builder(rank)
        assert f"_{rank}d" in name and f".tensor.{rank}d." in definition
        assert ", ".join(f"int c{i}" for i in range(rank)) in definition
        coords = ", ".join(f"%{first + i}" for i in range(rank))
        [(text, bound, used)] = _asm_operands(definition)
        assert "{" + coords + "}" in text and bound == used + 1 == first + rank


@pytest.mark.parametrize("dim", [0, 1])
def test_a_tensor_map_rewritten_on_the_device_is_released_and_acquired(dim):
    name, definition = ptx_tma.tensor_map_extent(dim)
    assert name == f"ptx_tensor_map_extent_{dim}"
    # the copy, then the extent, then the generic proxy's writes made visible to the tensor-map proxy
    order = ["((uint4*)map)[i] = ((const uint4*)src)[i]", f"tensormap.replace.tile.global_dim.global.b1024.b32 [%0], {dim}, %1;",
             "fence.proxy.tensormap::generic.release.gpu;", "fence.proxy.tensormap::generic.acquire.gpu [%0], 128;"]
    at = [definition.index(piece) for piece in order]
    assert at == sorted(at)


def test_pin_registers_reads_and_writes_each_register():
    name, definition = ptx.pin_registers(48, "i32")
    assert name == "ptx_pin_i32_48" and "int* r" in definition and "i < 48" in definition
    assert '"+r"(r[i])' in definition
    assert '"+f"(r[i])' in ptx.pin_registers(48)[1]


def test_dequant_pair_constants_per_kind():
    # 1.0 in both halves, and the -0.0 pair that keeps a zero product's sign.
    f16, bf16 = ptx_dequant.dequant_pair("f16")[1], ptx_dequant.dequant_pair("bf16")[1]
    assert "0x3c003c00u" in f16 and "fma.rn.f16x2" in f16
    assert "0x3f803f80u" in bf16 and "fma.rn.bf16x2" in bf16
    assert all("0x80008000u" in ptx_dequant.dequant_pair(k)[1] for k in ("f16", "bf16"))


def _half_values(bits, kind: str):
    """16-bit patterns as the float64 values of ``kind`` (bf16: the upper half of a float32)."""
    bits = np.asarray(bits, np.uint32)
    if kind == "f16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    return (bits << 16).view(np.float32).astype(np.float64)


@pytest.mark.parametrize("kind", ["bf16", "f16"])
def test_fp8_pair_bits_times_the_undo_constant_are_every_code_exactly(kind):
    """dequant_fp8_pair's arithmetic on every e4m3 code, in numpy: the code's bits placed as the
    helper places them, times `FP8_UNDO`'s constant, is the code's value (subnormal codes too; the
    two NaN codes read as +-480, which quantize never makes)."""
    undo, shift = ptx_dequant.FP8_UNDO[kind]
    assert f"<< {shift})" in ptx_dequant.dequant_fp8_pair(kind)[1] and undo in ptx_dequant.dequant_fp8_pair(kind)[1]
    codes = np.arange(256, dtype=np.uint32)
    placed = ((codes & 0x7F) << shift) | ((codes & 0x80) << 8)
    got = _half_values(placed, kind) * _half_values(int(undo.rstrip("u"), 16) & 0xFFFF, kind)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    e, m = (codes >> 3) & 15, codes & 7
    want = sign * np.where(e == 0, m * 2.0 ** -9, (1 + m / 8) * 2.0 ** (e.astype(np.float64) - 7))
    assert np.array_equal(got, want), np.flatnonzero(got != want)[:8]
    assert want[0x7F] == 480 and want[0x01] == 2.0 ** -9


def test_int8_pair_bf16_arithmetic_is_exact():
    """dequant_int8_pair_bf16's arithmetic in numpy: 2^23 + code plus -(2^23 + zero) in float32 is
    code - zero exactly, and its float32's upper half is that number as a bfloat16 (|code - zero|
    < 2^8: at most 8 significant bits), for every code and zero point."""
    text = ptx_dequant.dequant_int8_pair_bf16()[1]
    assert "0x4b000000u" in text and "0x7632u" in text       # 2^23's upper bytes; the two upper halves
    codes, zeros = np.meshgrid(np.arange(256, dtype=np.uint32), np.arange(256, dtype=np.uint32))
    read = (0x4B000000 | codes).view(np.float32)
    diff = read + (-(np.float32(2 ** 23) + zeros.astype(np.float32)))
    assert np.array_equal(diff, (codes.astype(np.int64) - zeros).astype(np.float32))
    assert np.array_equal(_half_values(diff.view(np.uint32) >> 16, "bf16"), diff.astype(np.float64))


# -- through ptxas ----------------------------------------------------------------------------------
_ARRAYS = {"float": "fbuf", "double": "dbuf", "int": "ibuf", "unsigned": "ubuf"}


def _argument(param: str, locals_: list) -> str:
    """An argument expression for one C parameter of a helper (the harness's buffers and values)."""
    ctype, name = param.rsplit(" ", 1)
    if name.startswith("&"):
        ctype, name = ctype + "&", name[1:]
    ctype = ctype.replace("const ", "")
    if ctype.endswith("&"):
        var = f"v{len(locals_)}"
        locals_.append(f"{ctype[:-1]} {var} = 0;")
        return var
    if ctype.endswith("*"):
        base = ctype[:-1].strip()
        return "g" if base == "void" else f"({base}*)" + _ARRAYS[base]
    return f"({ctype})threadIdx.x"


def _harness(definitions: list[str]) -> str:
    """One kernel that calls every helper once, results stored, so ptxas sees each statement."""
    preamble = CudaDialect._preamble
    body, locals_ = [], []
    for k, definition in enumerate(definitions):
        ret, name, params = _HEAD.match(definition).groups()
        args = ", ".join(_argument(p.strip(), locals_) for p in params.split(",") if p.strip())
        call = f"{name}({args})"
        body.append(f"    {call};" if ret == "void"
                    else f"    {{ {ret} r = {call}; out[{k}] = *(const float*)&r; }}")
    return (preamble + "\n".join(definitions) + "\nKERNEL void gemm_engine_ptx_check(float* out, void* g) {\n"
            "    __shared__ float fbuf[256]; __shared__ double dbuf[64]; __shared__ int ibuf[256];\n"
            "    __shared__ unsigned ubuf[256];\n    " + "\n    ".join(locals_) + "\n" + "\n".join(body)
            + "\n    out[255] = fbuf[threadIdx.x] + (float)dbuf[0] + ibuf[1] + ubuf[2];\n}\n")


@pytest.mark.nvcc
def test_every_definition_passes_ptxas_for_sm_90a():
    nvcc = nvcc_or_skip()
    definitions = list(dict.fromkeys(build(c)[1] for c in BUILDS))
    ok, log = compile_cuda(_harness(definitions), nvcc, SM90A)
    assert ok, log[-4000:]
