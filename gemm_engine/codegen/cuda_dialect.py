"""The CUDA dialect: CUDA C++ words for the neutral vocabulary, and every PTX intrinsic.

Components that exist only on CUDA (tensor-core tiles, ``cp.async`` loaders, the Hopper pipeline)
call the intrinsic methods below; each returns a call of a named helper from `codegen.ptx` and the
helper is defined only in sources that call it (`Dialect.helpers_for`). The WMMA API's words
(``nvcuda::wmma``) are rendered here too, so no component spells a backend word.
"""
from __future__ import annotations

import re

from . import ptx, ptx_dequant, ptx_tma
from .device import DeviceInfo
from .dialect_base import Dialect
from .ptx_intrinsics import PtxIntrinsics

WMMA = "nvcuda::wmma"


class CudaDialect(PtxIntrinsics, Dialect):
    backend = "cuda"
    _preamble = r"""
#define KERNEL extern "C" __global__
#define LAUNCH_BOUNDS(n) __launch_bounds__(n)
#define LAUNCH_BOUNDS_MIN(n, c) __launch_bounds__(n, c)
#define GLOBAL
#define LOCAL __shared__
#define RESTRICT __restrict__
#define INLINE static __device__ __forceinline__
#define UNIT_ID ((int)threadIdx.x)
#define CUBE_ID ((i64)blockIdx.x)
#define CUBE_COUNT ((i64)gridDim.x)
#define SYNC_CUBE() __syncthreads()
#define SYNC_PLANE() __syncwarp()
#define ALIGN16 __attribute__((aligned(16)))
#define FLOAT_AS_UINT(x) __float_as_uint(x)
#define UINT_AS_FLOAT(x) __uint_as_float(x)
typedef long long i64;
typedef unsigned long long u64;
"""
    _c_types = {"f32": "float", "f64": "double", "f16_bits": "unsigned short", "bf16_bits": "unsigned short",
                "i8": "signed char", "i32": "int", "i64": "i64",
                "f8e4m3": "unsigned char", "f8e5m2": "unsigned char", "u32": "unsigned int"}

    #: A by-value structure lives in the kernel's constant parameter space (no copy to local memory).
    _by_value = "const __grid_constant__ {type} {name}"

    def _struct(self, type_name: str, size: int, align: int) -> str:
        return f"struct __align__({align}) {type_name} {{ unsigned char bytes[{size}]; }};\n"

    def supports(self, feature: str) -> bool:
        cc = self.device.compute_capability or (0, 0)
        if feature in ("mma_sync", "cp_async", "ldmatrix", "bf16_mma", "tf32_mma", "s8_mma", "pack_half2", "f64_mma",
                       "plane_mma", "dequant_pair"):
            return cc >= (8, 0)
        if feature in ("wgmma", "f64_mma_m16"):
            return cc >= (9, 0)
        return super().supports(feature)

    def compile_note(self, source: str) -> str:
        arch = cuda_target_arch(self.device, source)
        compute = arch.replace("sm_", "compute_")
        why = " (wgmma / setmaxnreg: the arch-specific target; plain -arch=sm_90 rejects them)" \
            if arch.endswith("a") else ""
        return (f"/* build: nvcc -cubin -gencode=arch={compute},code={arch} kernel.cu{why}; "
                f"NVRTC: --gpu-architecture={arch} --std=c++17 */\n")

    def math(self, fn: str, word: str, fast: bool = False) -> str:
        if fast and (fn, word) == ("exp", "f32"):
            return "__expf"       # MUFU.EX2: a few ulp, far inside a 16-bit result's rounding
        return fn + "f" if word == "f32" else fn

    def divide(self, a: str, b: str, word: str, fast: bool = False) -> str:
        # The approximate reciprocal and a multiply instead of IEEE division's refinement and slow
        # path (a divisor past 2^126, infinity included, gives 0: x / (1 + exp(-x)) -> 0 as
        # x -> -inf). SwiGLU's fused GEMM (bf16, 8192 x 4096 -> 2 x 14336): 2452 us against 2536
        # with expf and division, the plain GEMM 2467 (bench/SELECTION_NOTES.md, "Paired stores").
        if fast and word == "f32":
            return f"__fdividef({a}, {b})"
        return f"({a} / {b})"

    def stream_vector(self, word: str, width: int, pointer: str) -> str:
        if (word, width) == ("u32", 4):
            return f"{self._use(ptx.ld_stream_u4())}((const unsigned*)({pointer}))"
        if (word, width) != ("f32", 4):
            return super().stream_vector(word, width, pointer)
        # Read-only path, no L1 allocation: bf16 1 x 8192 x 8192 split over cubes 0.0497 -> 0.0488
        # ms on the H100 against __ldg (bench/results/h100/gemv_bandwidth.md, na vs ldg).
        return f"{self._use(ptx.ld_stream_f4())}((const float*)({pointer}))"

    def dynamic_shared(self, name: str) -> str:
        """Declaration (at kernel scope) of the cube's dynamic shared memory as 16-byte aligned
        bytes, sized at launch (a config's ``dynamic_shared_bytes``): the only way past 48 KiB."""
        return f"extern __shared__ __align__(16) unsigned char {name}[];"

    aligns_rings = False

    def ring_declaration(self, name: str, nbytes: int, align: int = 16) -> str:
        return self.dynamic_shared(name)

    def plane_uniform(self, value: str) -> str:
        """A warp shuffle from lane 0: nvcc then keeps values derived from it in uniform registers.
        For a warpgroup's index this moves the wgmma descriptors' address arithmetic to the uniform
        datapath: the fp8 128 x 128 kernel's SASS drops from 1520 to 1464 instructions, with 15
        R2UR moves instead of 46, and its rowwise-scaled 4096^3 kernel runs 1.1% faster on the H100
        (bench/results/h100/kernel_durations.md, notes)."""
        return f"__shfl_sync(0xffffffffu, ({value}), 0)"

    def shared_address(self, pointer: str) -> str:
        """Expression: the 32-bit shared-window address of a generic pointer into shared memory,
        the operand form PTX instructions such as ldmatrix take."""
        return f"((unsigned)__cvta_generic_to_shared({pointer}))"

    def _f16_helpers(self) -> str:
        # Inline PTX conversions need no cuda_fp16.h (NVRTC has no CUDA include path by default).
        return r"""
INLINE float f16_to_f32(unsigned short bits) {
    float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits)); return f;
}
INLINE unsigned short f32_to_f16(float value) {
    unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(value)); return h;
}
"""

    # -- the decode kernel's plane product and int4 pairs (mma.sync itself: codegen/ptx_intrinsics.py)
    plane_mma_native = True

    def plane_mma(self, kind: str, acc: str, a: str, b: str, scratch: str) -> str:
        return self.mma_sync((16, 8, 16), kind, "f32", "f32", acc, a, b, 4, 2)

    def pack16x2(self, kind: str, hi: str, lo: str) -> str:
        return self.pack_half2(f"{kind}x2", hi, lo)

    #: The bits of 1024.0 (f16) and 128.0 (bf16) in both halves: or'ed with an int4 code in each
    #: half's low mantissa bits they read as ``bias + code`` (`dequant_pair`).
    PAIR_MAGIC = {"f16": (0x64006400, 1024), "bf16": (0x43004300, 128)}

    def dequant_pair(self, kind: str, codes: str, s2: str, nz2: str) -> str:
        """Expression: the 16-bit pair of two int4 codes (``codes``: each in the low 4 bits of a
        half) as ``kind`` values ``(code - zero) * scale``, rounded once: ``s2`` the scale in both
        halves, ``nz2`` ``-(bias + zero)`` in both (`PAIR_MAGIC`'s bias)."""
        magic = self.PAIR_MAGIC[kind][0]
        return f"{self._use(ptx_dequant.dequant_pair(kind))}(({codes}) | {magic:#010x}u, {s2}, {nz2})"

    def dequant_shifted_pair(self, kind: str, word: str, shift: int, s2: str, nz2: str) -> str:
        """`dequant_pair` of the int4 codes at bits ``shift`` and ``shift + 16`` of ``word`` (the
        prepacked layout's pairs): the mask and the magic in one instruction."""
        codes = f"(({word}) >> {shift})" if shift else word
        return (f"{self._use(ptx_dequant.dequant_masked_pair(kind, 0x000F000F, self.PAIR_MAGIC[kind][0]))}"
                f"({codes}, {s2}, {nz2})")

    def dequant_pair_zero(self, kind: str, zero: str, code: str = "int4") -> str:
        """Expression: the ``nz2`` of `dequant_pair` / `dequant_pair8` for the float zero point
        ``zero``: ``-(bias + zero)`` in both halves (exact: a whole number below 2^8 plus the bias
        fits either 16-bit type), for int8 codes under bf16 its float32 bits (bias 2^23)."""
        if code == "int8" and kind == "bf16":
            return f"FLOAT_AS_UINT(-(8388608.0f + {zero}))"
        bias = self.PAIR_MAGIC[kind][1]
        return self.pack16x2(kind, f"-({bias}.0f + {zero})", f"-({bias}.0f + {zero})")

    def dequant_pair8(self, code: str, kind: str, word: str, lo: int, hi: int, s2: str, nz2: str) -> str:
        """Expression: the 16-bit pair of the 8-bit codes in bytes ``lo`` and ``hi`` of the 32-bit
        ``word`` as ``kind`` values (``(code - zero) * scale`` for int8, ``fp8(code) * scale`` for
        fp8 e4m3), rounded once; ``s2`` the scale in both halves, ``nz2`` `dequant_pair_zero`'s
        (int8). A byte permute picks the codes (one instruction for both, where shifts and masks
        take four): int8 under f16 straight into 1024.0's mantissas, then `dequant_pair`'s FMAs."""
        if code == "fp8_e4m3":
            sel = lo | 4 << 4 | hi << 8 | 4 << 12
            return f"{self._use(ptx_dequant.dequant_fp8_pair(kind))}({word}, {sel:#06x}u, {s2})"
        if kind == "f16":      # bytes 1 and 3 of 0x64006400 (indices 5, 7) above the codes
            sel = lo | 5 << 4 | hi << 8 | 7 << 12
            return f"{self._use(ptx_dequant.dequant_pair(kind))}(__byte_perm({word}, 0x64006400u, {sel:#06x}u), {s2}, {nz2})"
        sel_lo, sel_hi = (b | 5 << 4 | 6 << 8 | 7 << 12 for b in (lo, hi))
        return (f"{self._use(ptx_dequant.dequant_int8_pair_bf16())}({word}, {sel_lo:#06x}u, {sel_hi:#06x}u, {s2}, "
                f"{nz2})")

    # -- mbarriers, TMA and register reallocation (sm_90) ------------------------------------------
    def mbarrier_init(self, bar: str, count) -> str:
        return f"{self._use(ptx.mbarrier_init())}({bar}, {count});"

    def fence_mbarrier_init(self) -> str:
        return f"{self._use(ptx.fence_mbarrier_init())}();"

    def mbarrier_arrive(self, bar: str) -> str:
        return f"{self._use(ptx.mbarrier_arrive())}({bar});"

    def mbarrier_arrive_expect_tx(self, bar: str, nbytes) -> str:
        return f"{self._use(ptx.mbarrier_arrive_expect_tx())}({bar}, {nbytes});"

    def cp_async_mbarrier_arrive(self, bar: str) -> str:
        """Statement: one arrival on ``bar`` once this unit's earlier ``cp.async`` copies are done."""
        return f"{self._use(ptx.cp_async_mbarrier_arrive())}({bar});"

    def mbarrier_wait(self, bar: str, parity: str) -> str:
        """Statement: wait until the phase of ``bar`` with parity ``parity`` (0 / 1) has completed."""
        return f"{self._use(ptx.mbarrier_wait())}({bar}, {parity});"

    def mbarrier_arrive_remote(self, bar: str, rank: str) -> str:
        """Statement: one arrival on the mbarrier at shared address ``bar`` of the cluster's cube
        ``rank`` (this cube's own rank included)."""
        return f"{self._use(ptx.mbarrier_arrive_remote())}({bar}, {rank});"

    def tma_load(self, dst: str, tensor_map: str, bar: str, coords: list[str], multicast: str | None = None) -> str:
        """Statement: copy the box of the tensor-map parameter ``tensor_map`` at ``coords`` (innermost
        first) into shared address ``dst``, completing on the mbarrier at ``bar``; ``multicast`` (a
        mask of cluster ranks): into ``dst`` of each of those cubes, completing on each one's ``bar``."""
        args = ", ".join(f"(int)({c})" for c in coords)
        if multicast is not None:
            name = self._use(ptx_tma.tma_load_multicast(len(coords)))
            return f"{name}({dst}, &{tensor_map}, {bar}, (unsigned short)({multicast}), {args});"
        return f"{self._use(ptx_tma.tma_load(len(coords)))}({dst}, &{tensor_map}, {bar}, {args});"

    def tensor_map_extent(self, dst: str, tensor_map: str, dim: int, extent: str) -> str:
        """Statement (one unit): the 128 bytes of global memory at ``dst`` (64-byte aligned) made
        the tensor-map parameter ``tensor_map`` with its extent along dimension ``dim`` (innermost
        0) set to ``extent``, for this unit's TMA copies through `tensor_map_at` ``dst`` from here
        on (copies still in flight through an earlier map at ``dst`` must be complete)."""
        return f"{self._use(ptx_tma.tensor_map_extent(dim))}((void*)({dst}), (const void*)&{tensor_map}, (unsigned)({extent}));"

    @staticmethod
    def tensor_map_at(tensor_map: str, address: str) -> str:
        """Expression: the tensor map of the type of parameter ``tensor_map`` at global ``address``
        (what `tma_load` takes as its map)."""
        return f"(*(const decltype({tensor_map})*)({address}))"

    def bulk_load(self, dst: str, src: str, nbytes: str, bar: str) -> str:
        """Statement: ``nbytes`` (a multiple of 16) from global ``src`` to shared address ``dst``,
        completing on the mbarrier at ``bar`` (no tensor map: a contiguous run)."""
        return f"{self._use(ptx_tma.bulk_load())}({dst}, (const void*)({src}), {nbytes}, {bar});"

    # -- clusters (sm_90) ----------------------------------------------------------------------------
    @staticmethod
    def cluster_dims(cubes: int) -> str:
        """The kernel attribute launching its cubes in clusters of ``cubes`` consecutive cube ids
        (compile-time cluster dimensions: an ordinary launch with a grid that is a multiple)."""
        return f"__cluster_dims__({cubes}, 1, 1)"

    def cluster_rank(self) -> str:
        """Expression: this cube's rank in its cluster (unsigned)."""
        return f"{self._use(ptx.cluster_rank())}()"

    def cluster_sync(self) -> str:
        """Statement: every unit of the cluster's cubes meets here (writes before, mbarrier
        initializations included, are visible to all after)."""
        return f"{self._use(ptx.cluster_sync())}();"

    def tma_store(self, tensor_map: str, src: str, coords: list[str], add: bool = False) -> str:
        """Statement: copy the box at shared address ``src`` to the tensor-map parameter
        ``tensor_map`` at ``coords`` (innermost first), in this unit's bulk group; ``add``: add it
        into what is there."""
        name = self._use(ptx_tma.tma_store(len(coords), add))
        return f"{name}(&{tensor_map}, {src}, {', '.join(f'(int)({c})' for c in coords)});"

    def bulk_commit(self) -> str:
        return f"{self._use(ptx_tma.bulk_commit())}();"

    def bulk_wait(self, pending: int, read: bool) -> str:
        return f"{self._use(ptx_tma.bulk_wait(pending, read))}();"

    def sync_units(self, ident, count: int) -> str:
        """Statement: ``count`` units meet at named barrier ``ident`` (a number, or an expression)."""
        ident = f"{ident}u" if isinstance(ident, int) else f"(unsigned)({ident})"
        return f"{self._use(ptx.named_barrier())}({ident}, {count}u);"

    # -- partial sums between cubes (batch/split_tail.py) --------------------------------------------
    def store_global_v4(self, pointer: str, regs: list[str], word: str = "f32") -> str:
        """Statement: four 32-bit ``word`` values to 16 global bytes at ``pointer``."""
        return f"{self._use(ptx.st_global_v4(word))}((void*)({pointer}), {', '.join(regs)});"

    def load_global_l2_v4(self, pointer: str, regs: list[str], word: str = "f32") -> str:
        """Statement: 16 global bytes at ``pointer`` (written by another cube in this kernel) into
        four ``word`` variables, read from L2."""
        return f"{self._use(ptx.ld_global_cg_v4(word))}((const void*)({pointer}), {', '.join(regs)});"

    def fence_device(self) -> str:
        return "__threadfence();"

    def ticket(self, pointer: str) -> str:
        return f"atomicAdd((unsigned int*)({pointer}), 1u)"

    def load_other_cube(self, ctype: str, pointer: str, index: str) -> str:
        return f"__ldcg(({pointer}) + ({index}))"   # from L2: this SM's L1 may hold nothing of it, or old lines

    def flag_release(self, pointer: str) -> str:
        """Statement: set the global flag at ``pointer`` (release, GPU scope)."""
        return f"{self._use(ptx.flag_release())}((unsigned*)({pointer}));"

    def flag_acquire_clear(self, pointer: str) -> str:
        """Statement: wait until the global flag at ``pointer`` is set (acquire, GPU scope), then
        clear it."""
        return f"{self._use(ptx.flag_acquire_clear())}((unsigned*)({pointer}));"

    def setmaxnreg(self, increase: bool, count: int) -> str:
        return f"{self._use(ptx.setmaxnreg(increase, count))}();"

    # -- the WMMA API ------------------------------------------------------------------------------
    #: WMMA element types by neutral kind: fragment element, pointer type read from shared memory.
    _WMMA_TYPES = {"f16": ("__half", "__half"), "bf16": ("__nv_bfloat16", "__nv_bfloat16"),
                   "tf32": (f"{WMMA}::precision::tf32", "float")}
    wmma_headers = ("<mma.h>",)

    def wmma_fragment(self, use: str, k: int, kind: str | None, layout: str | None = None) -> str:
        """Type: a 16 x 16 x k fragment (``use``: matrix_a, matrix_b, accumulator)."""
        if use == "accumulator":
            return f"{WMMA}::fragment<{WMMA}::accumulator, 16, 16, {k}, float>"
        elem = self._WMMA_TYPES[kind][0]
        return f"{WMMA}::fragment<{WMMA}::{use}, 16, 16, {k}, {elem}, {WMMA}::{layout}>"

    def wmma_fill(self, frag: str, value: str) -> str:
        return f"{WMMA}::fill_fragment({frag}, {value});"

    def wmma_load(self, frag: str, kind: str, pointer: str, ld) -> str:
        ctype = self._WMMA_TYPES[kind][1]
        return f"{WMMA}::load_matrix_sync({frag}, reinterpret_cast<const {ctype}*>({pointer}), {ld});"

    def wmma_round_tf32(self, frag: str) -> str:
        """Statement: round every element of a loaded fragment to tf32, as the instruction expects."""
        return (f"#pragma unroll\nfor (int e = 0; e < {frag}.num_elements; ++e) "
                f"{frag}.x[e] = {WMMA}::__float_to_tf32({frag}.x[e]);")

    def wmma_mma(self, acc: str, a: str, b: str) -> str:
        return f"{WMMA}::mma_sync({acc}, {a}, {b}, {acc});"

    def wmma_store_row_major(self, pointer: str, frag: str, ld) -> str:
        return f"{WMMA}::store_matrix_sync({pointer}, {frag}, {ld}, {WMMA}::mem_row_major);"


#: PTX that exists only on an architecture-specific target (sm_90a: wgmma, setmaxnreg). A kernel
#: using it must be compiled for that target, whose code runs on exactly that compute capability.
_ARCH_SPECIFIC_PTX = ("wgmma.", "setmaxnreg.")


#: PTX that needs sm_90 but no architecture-specific target (the f64 m16n8 mma.sync shapes).
_SM90_PTX = re.compile(r"mma\.sync\.aligned\.m16n8k\d+\.row\.col\.f64")


def source_needs_sm90(source: str) -> bool:
    """Whether a kernel's source uses PTX that sm_80 lacks (an sm_90 target, "a" or not)."""
    return any(w in source for w in _ARCH_SPECIFIC_PTX) or _SM90_PTX.search(source) is not None


def cuda_target_arch(device: DeviceInfo, source: str) -> str | None:
    """The CUDA target a kernel's source needs on ``device``: its arch ("sm_90"), with the "a"
    suffix ("sm_90a") when the source uses architecture-specific PTX on a 9.0 device."""
    arch = device.arch
    if device.compute_capability == (9, 0) and any(w in source for w in _ARCH_SPECIFIC_PTX):
        return arch + "a"
    return arch
