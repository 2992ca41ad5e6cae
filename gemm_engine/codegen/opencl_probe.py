"""The capability probe's kernels: tiny OpenCL programs whose build and result say what a device's
compiler offers (runtime/opencl_probe.py builds and runs them, once per device).

Each `Probe` names the features it grants, the features it needs first, its source and the exact
words its one work-group of `PROBE_UNITS` units must write. The kernels are rendered by the same
dialect methods the tiles use (`PtxOpenCLDialect` for NVIDIA, given the features found so far), so
a probe that passes has built and run the very helper text a GEMM kernel will contain: the
``mma.sync`` of each kind, ``ldmatrix`` and ``cp.async`` on ``__local`` addresses converted as the
probe found they must be, the f16x2 pack. Operands are small integers, so every result is exact.

On NVIDIA the address form is found first, without touching memory through a possibly wrong
address: ``isspacep.shared`` of a ``__local`` pointer's value says whether the compiler hands
inline assembly generic addresses (feature ``local_generic``: converted with ``cvta.to.shared``) or
shared-window ones (used as they are); ``ldmatrix`` and ``cp.async`` are then run through that form
and checked word by word.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from .amdgcn_dialect import AmdgcnOpenCLDialect
from .device import DeviceInfo
from .intel_dialect import IntelOpenCLDialect
from .opencl_dialect import ASM_PLAIN, LOCAL_GENERIC, PtxOpenCLDialect

#: Units of the probe's one work-group (two 32-wide planes) and output words per unit.
PROBE_UNITS = 64
WORDS = 4
#: What an output word the kernel does not write keeps (the buffer is filled with it first).
POISON = 0xDEADBEEF
#: Bumped when a probe's meaning changes: part of the runtime's cache key.
PROBE_VERSION = 1


@dataclass(frozen=True)
class Probe:
    name: str                       # what a report calls it
    grants: frozenset               # features granted when it builds and writes `expected`
    needs: frozenset                # features that must have been granted first
    render: Callable[[DeviceInfo], str]   # the source, for the device with the features so far
    expected: Callable[[], np.ndarray]    # PROBE_UNITS * WORDS uint32 words
    unless: str = ""                # skipped when this feature is already granted (a fallback)
    finding: bool = False           # a fact, not a capability: failing it refuses nothing
    inputs: Callable[[], np.ndarray] = lambda: np.zeros(PROBE_UNITS * WORDS, np.uint32)


def _kernel(d, body: str, shared: str = "") -> str:
    text = (f"KERNEL LAUNCH_BOUNDS({PROBE_UNITS}) void probe(GLOBAL uint* out, const GLOBAL uint* in) {{\n"
            f"{shared}\nconst int u = UNIT_ID;\nconst int lane = u & 31;\n{body}\n}}\n")
    return d.preamble([]) + d.helpers_for(text) + text


def _expect(fill: Callable[[int], list[int]]) -> Callable[[], np.ndarray]:
    """Expected words: unit u writes ``fill(u)`` from word u * WORDS on; the rest stay poison."""
    def expected() -> np.ndarray:
        out = np.full(PROBE_UNITS * WORDS, POISON, np.uint32)
        for u in range(PROBE_UNITS):
            words = fill(u)
            out[u * WORDS:u * WORDS + len(words)] = words
        return out
    return expected


def _dialect(device: DeviceInfo) -> PtxOpenCLDialect:
    return PtxOpenCLDialect(replace(device, features=device.features | {"inline_ptx"}))


# -- inline PTX at all, and which keyword ----------------------------------------------------------
def _laneid(keyword: str) -> Callable[[DeviceInfo], str]:
    def render(device: DeviceInfo) -> str:
        d = _dialect(device)
        return _kernel(d, f'uint id;\n{keyword} volatile("mov.u32 %0, %%laneid;" : "=r"(id));\nout[u * {WORDS}] = id;')
    return render


# -- the address form of __local pointers ----------------------------------------------------------
def _address_form(device: DeviceInfo) -> str:
    d = _dialect(device)
    check = d.is_shared_window("(ulong)(size_t)&buf[u]")
    return _kernel(d, f"buf[u] = (uint)u;\nSYNC_CUBE();\nout[u * {WORDS}] = {check};",
                   f"LOCAL uint buf[{PROBE_UNITS}];")


# -- ldmatrix: 32 rows of 8 halves (four 8 x 8 blocks), element i holding i -------------------------
def _ldmatrix(device: DeviceInfo) -> str:
    d = _dialect(device)
    regs = [f"r[{j}]" for j in range(4)]
    body = "\n".join([
        f"for (int i = u; i < 256; i += {PROBE_UNITS}) tile[i] = (ushort)i;",
        "SYNC_CUBE();",
        "unsigned r[4];",
        d.ldmatrix(regs, d.shared_address("&tile[lane * 8]"), trans=False),
        *(f"out[u * {WORDS} + {j}] = r[{j}];" for j in range(4)),
    ])
    return _kernel(d, body, "LOCAL ushort tile[256] ALIGN16;")


def _ldmatrix_words(u: int) -> list[int]:
    lane = u & 31
    words = []
    for j in range(4):   # register j: block j, row lane / 4, columns 2 (lane % 4) and the next
        e = j * 64 + (lane >> 2) * 8 + 2 * (lane & 3)
        words.append(e | ((e + 1) << 16))
    return words


# -- cp.async: 16 bytes per unit into local memory, read back by the neighbouring unit ---------------
def _cp_async(device: DeviceInfo) -> str:
    d = _dialect(device)
    body = "\n".join([
        d.cp_async("cg", 16, d.shared_address(f"&buf[u * {WORDS}]"), f"(const GLOBAL char*)(in + u * {WORDS})"),
        d.cp_async_commit(),
        d.cp_async_wait_all(),
        "SYNC_CUBE();",
        *(f"out[u * {WORDS} + {j}] = buf[(u ^ 1) * {WORDS} + {j}];" for j in range(WORDS)),
    ])
    return _kernel(d, body, f"LOCAL uint buf[{PROBE_UNITS * WORDS}] ALIGN16;")


def _pattern() -> np.ndarray:
    return (np.arange(PROBE_UNITS * WORDS, dtype=np.uint64) * 2654435761 % (1 << 32)).astype(np.uint32)


def _cp_async_words(u: int) -> list[int]:
    src = _pattern()
    return [int(src[(u ^ 1) * WORDS + j]) for j in range(WORDS)]


# -- mma.sync of each kind: a = 1, b = 2 everywhere, c = the lane: d = lane + 2k -----------------------
#: kind -> (shape, PTX type, accumulator (PTX, word), a registers, b registers, the bits of 1 and 2)
_MMA = {
    "mma_sync": ((16, 8, 16), "f16", ("f32", "f32"), 4, 2, 0x3C003C00, 0x40004000),
    "bf16_mma": ((16, 8, 16), "bf16", ("f32", "f32"), 4, 2, 0x3F803F80, 0x40004000),
    "tf32_mma": ((16, 8, 8), "tf32", ("f32", "f32"), 4, 2, 0x3F800000, 0x40000000),
    "s8_mma": ((16, 8, 32), "s8", ("s32", "i32"), 4, 2, 0x01010101, 0x02020202),
}


def _mma(feature: str) -> Callable[[DeviceInfo], str]:
    shape, kind, (acc_ptx, acc_word), na, nb, one, two = _MMA[feature]

    def render(device: DeviceInfo) -> str:
        d = _dialect(device)
        ctype = d.c_type(acc_word)
        body = "\n".join([
            f"unsigned a[{na}], b[{nb}];",
            f"{ctype} c[4];",
            *(f"a[{i}] = {one}u;" for i in range(na)), *(f"b[{i}] = {two}u;" for i in range(nb)),
            *(f"c[{i}] = ({ctype})lane;" for i in range(4)),
            d.mma_sync(shape, kind, acc_ptx, acc_word, "c", "a", "b", na, nb),
            *(f"out[u * {WORDS} + {i}] = (uint)c[{i}];" for i in range(4)),
        ])
        return _kernel(d, body)
    return render


def _dmma(shape: tuple[int, int, int]) -> Callable[[DeviceInfo], str]:
    m, _, k = shape
    nc, na, nb = m // 4, m * k // 32, k // 4

    def render(device: DeviceInfo) -> str:
        d = _dialect(device)
        a = "a" if na > 1 else "a[0]"
        b = "b" if nb > 1 else "b[0]"
        body = "\n".join([
            f"double a[{na}], b[{nb}], c[{nc}];",
            *(f"a[{i}] = 1.0;" for i in range(na)), *(f"b[{i}] = 2.0;" for i in range(nb)),
            *(f"c[{i}] = (double)lane;" for i in range(nc)),
            d.dmma(shape, "c", a, b),
            *(f"out[u * {WORDS} + {i}] = (uint)c[{i}];" for i in range(nc)),
        ])
        return "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" + _kernel(d, body)
    return render


def _pack(device: DeviceInfo) -> str:
    d = _dialect(device)
    return _kernel(d, f"out[u * {WORDS}] = {d.pack_half2('f16x2', '2.0f', '1.0f')};")


PTX = frozenset({"inline_ptx"})

#: The NVIDIA probes, in order (a probe runs once the features it needs are granted).
NVIDIA_PROBES: tuple[Probe, ...] = (
    Probe("inline PTX (__asm__)", frozenset({"inline_ptx"}), frozenset(), _laneid("__asm__"),
          _expect(lambda u: [u & 31])),
    Probe("inline PTX (asm)", frozenset({"inline_ptx", ASM_PLAIN}), frozenset(), _laneid("asm"),
          _expect(lambda u: [u & 31]), unless="inline_ptx"),
    Probe("local addresses are generic", frozenset({LOCAL_GENERIC}), PTX, _address_form,
          _expect(lambda u: [1]), finding=True),
    Probe("ldmatrix", frozenset({"ldmatrix"}), PTX, _ldmatrix, _expect(_ldmatrix_words)),
    Probe("cp.async", frozenset({"cp_async"}), PTX, _cp_async, _expect(_cp_async_words), inputs=_pattern),
    *(Probe(f"mma.sync {_MMA[f][1]}", frozenset({f}), PTX, _mma(f),
            _expect(lambda u, k=_MMA[f][0][2]: [(u & 31) + 2 * k] * 4)) for f in _MMA),
    Probe("mma.sync f64 m8n8k4", frozenset({"f64_mma"}), PTX, _dmma((8, 8, 4)),
          _expect(lambda u: [(u & 31) + 8] * 2)),
    Probe("mma.sync f64 m16n8k8", frozenset({"f64_mma_m16"}), PTX | {"f64_mma"}, _dmma((16, 8, 8)),
          _expect(lambda u: [(u & 31) + 16] * 4)),
    Probe("cvt f16x2", frozenset({"pack_half2"}), PTX, _pack, _expect(lambda u: [0x40003C00])),
)


# -- AMD: MFMA (CDNA, 64-wide waves) and WMMA (RDNA3, 32-wide): a = 1, b = 2, c = the lane ---------
def _amd(builtin: str, a: str, b: str, acc: str, regs: int, fp64: bool = False) -> Callable[[DeviceInfo], str]:
    def render(device: DeviceInfo) -> str:
        d = AmdgcnOpenCLDialect(device)
        body = "\n".join([f"{acc} c = ({acc})((float)lane);" if not fp64 else f"{acc} c = ({acc})((double)lane);",
                          f"c = {builtin}({a}, {b}, c{', 0, 0, 0' if 'mfma' in builtin else ''});",
                          *(f"out[u * {WORDS} + {i}] = (uint)c.s{i};" for i in range(regs))])
        return ("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" if fp64 else "") + _kernel(d, body)
    return render


AMD_PROBES: tuple[Probe, ...] = (
    Probe("MFMA f16 16x16x16", frozenset({"mfma"}), frozenset(),
          _amd("__builtin_amdgcn_mfma_f32_16x16x16f16", "(half4)(1.0h)", "(half4)(2.0h)", "float4", 4),
          _expect(lambda u: [(u & 31) + 32] * 4)),
    Probe("MFMA f64 16x16x4", frozenset({"mfma_f64"}), frozenset({"mfma"}),
          _amd("__builtin_amdgcn_mfma_f64_16x16x4f64", "1.0", "2.0", "double4", 4, fp64=True),
          _expect(lambda u: [(u & 31) + 8] * 4)),
    Probe("WMMA f16 16x16x16 (wave32)", frozenset({"wmma_gfx11"}), frozenset(),
          _amd("__builtin_amdgcn_wmma_f32_16x16x16_f16_w32", "(half16)(1.0h)", "(half16)(2.0h)", "float8", 4),
          _expect(lambda u: [(u & 31) + 32] * 4)),
)


# -- Intel: DPAS in sub-groups of the device's plane size ---------------------------------------------
def _dpas(device: DeviceInfo) -> str:
    d = IntelOpenCLDialect(device)
    a = "(int8)(0x3C003C00)" if device.plane_size == 8 else "(short8)((short)0x3C00)"   # f16 ones
    body = "\n".join(["float8 c = (float8)(1.0f);", d.dpas("f16", "c", a, "(int8)(0x40004000)"),   # b: twos
                      *(f"out[u * {WORDS} + {i}] = (uint)c.s{i};" for i in range(4))])
    return _kernel(d, body)


INTEL_PROBES: tuple[Probe, ...] = (
    Probe("DPAS f16 k16", frozenset({"intel_dpas"}), frozenset(), _dpas, _expect(lambda u: [33] * 4)),
)
