"""The dialect base: the neutral vocabulary both backends share (codegen/dialect.py picks one).

Templates are written once against a neutral vocabulary (in the manner of PyOpenCL's CLUDA and
tinygrad's C-style renderer). A dialect supplies:

* a preamble of macros that define the neutral words for its backend:
  `KERNEL`, `LAUNCH_BOUNDS(n)`, `LAUNCH_BOUNDS_MIN(n, c)` (n units, and c cubes per compute unit
  are enough: the compiler may spend registers on loads in flight; OpenCL ignores c), `GLOBAL`, `LOCAL`, `RESTRICT`, `INLINE`, `UNIT_ID`, `CUBE_ID`,
  `CUBE_COUNT` (cubes in the launch),
  `SYNC_CUBE()`, `ALIGN16` (after a declarator) and the bit casts `FLOAT_AS_UINT` / `UINT_AS_FLOAT`, plus the integer types `i64` and `u64`;
* C type names for the neutral element words (`f32`, `f64`, `f16_bits`, `bf16_bits`, `i8`, `i32`,
  `f8e4m3`, `f8e5m2`: fp8 held as unsigned bytes)
  and the zero literal of each compute word;
* expressions that read and write one element of global memory with conversion to the compute
  type (half precision without headers or `cl_khr_fp16`);
* capability queries (`supports("fp64")`, `"mma_sync"`...) used by component setup (on OpenCL
  the probe's findings, `DeviceInfo.features`).

A test greps every other module for backend words, so keep them here.
"""
from __future__ import annotations

import re

from ..dtypes import ElementType
from .device import DeviceInfo

# Conversions shared by both dialects, written with the neutral words defined in each preamble.
_BF16_HELPERS = """
INLINE float bf16_to_f32(unsigned short bits) { return UINT_AS_FLOAT(((unsigned int)bits) << 16); }
INLINE unsigned short f32_to_bf16(float value) {
    unsigned int u = FLOAT_AS_UINT(value);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);  /* round to nearest, ties to even */
    return (unsigned short)(u >> 16);
}
"""

# fp8 -> float32, exact (every fp8 value is a float32), by bits so that no backend needs fp8 types.
# e4m3fn: bias 7, no infinities, 0x7f / 0xff NaN; e5m2: bias 15, IEEE-like (the upper byte of a half).
_FP8_HELPERS = {
    "f8e4m3": """
INLINE float f8e4m3_to_f32(unsigned char b) {
    const unsigned int s = ((unsigned int)b & 0x80u) << 24, e = ((unsigned int)b >> 3) & 15u, m = (unsigned int)b & 7u;
    if (e == 15u && m == 7u) return UINT_AS_FLOAT(s | 0x7fc00000u);
    if (e == 0u) return UINT_AS_FLOAT(s | FLOAT_AS_UINT((float)m * 0.001953125f)); /* m * 2^-9 */
    return UINT_AS_FLOAT(s | ((e + 120u) << 23) | (m << 20));
}
""",
    "f8e5m2": """
INLINE float f8e5m2_to_f32(unsigned char b) {
    const unsigned int s = ((unsigned int)b & 0x80u) << 24, e = ((unsigned int)b >> 2) & 31u, m = (unsigned int)b & 3u;
    if (e == 31u) return UINT_AS_FLOAT(s | 0x7f800000u | (m << 21)); /* infinity or NaN */
    if (e == 0u) return UINT_AS_FLOAT(s | FLOAT_AS_UINT((float)m * 0.0000152587890625f)); /* m * 2^-16 */
    return UINT_AS_FLOAT(s | ((e + 112u) << 23) | (m << 21));
}
""",
}


class Dialect:
    """Base dialect: what both backends share. Subclasses fill in the words."""

    backend: str = ""
    _preamble: str = ""
    _c_types: dict[str, str] = {}

    def __init__(self, device: DeviceInfo):
        if device.backend != self.backend:
            raise ValueError(f"{type(self).__name__} needs a {self.backend} device, got {device.backend}")
        self.device = device
        #: Helpers generated on request (the CUDA dialect's PTX intrinsics, by-value parameter
        #: types), name -> (definition, whether it is called like a function).
        self._generated: dict[str, tuple[str, bool]] = {}

    # -- identity --------------------------------------------------------------------------
    @property
    def key(self) -> tuple:
        """What makes rendered source differ between two dialect instances (part of cache keys)."""
        return (self.backend, self.device.compute_capability)

    # -- capabilities ----------------------------------------------------------------------
    def supports(self, feature: str) -> bool:
        if feature == "fp64":
            return self.device.fp64
        return False

    # -- words -----------------------------------------------------------------------------
    def c_type(self, word: str) -> str:
        return self._c_types[word]

    def storage_type(self, et: ElementType) -> str:
        return self.c_type(et.storage)

    def compute_type(self, et: ElementType) -> str:
        return self.c_type(et.compute)

    def math(self, fn: str, word: str, fast: bool = False) -> str:
        """Name of the C math function ``fn`` ("exp", "erf", "tanh", ...) for compute word
        ``word``: OpenCL overloads one name, CUDA spells the float versions with an ``f``.
        ``fast``: a faster, less exact form may stand in (the result is rounded to 16 bits or
        fewer after it); here the exact one."""
        return fn

    def divide(self, a: str, b: str, word: str, fast: bool = False) -> str:
        """``a / b`` in compute word ``word`` (``fast``: as `math`'s)."""
        return f"({a} / {b})"

    @staticmethod
    def literal(value: float, word: str) -> str:
        """A floating literal of compute word ``word`` (a float literal needs its ``f``: a double
        would promote the whole expression)."""
        text = repr(float(value))
        return text if word == "f64" else text + "f"

    #: The zero literal of each compute word (integer accumulators must not start from a float).
    _zeros = {"f32": "0.0f", "f64": "0.0", "i32": "0"}

    def zero(self, et: ElementType | str) -> str:
        """The zero literal of an element type's compute type, or of a compute word (``"i32"``)."""
        return self._zeros[et if isinstance(et, str) else et.compute]

    def preamble(self, element_types, headers=()) -> str:
        """Macros and helpers for a kernel that touches these element types (after ``headers``)."""
        parts = [f"#include {h}" for h in headers] + [self._preamble]
        storages = {et.storage for et in element_types}
        if "f64" in storages:
            parts.append(self._fp64_enable())
        if "f16_bits" in storages:
            parts.append(self._f16_helpers())
        if "bf16_bits" in storages:
            parts.append(_BF16_HELPERS)
        parts += [code for word, code in _FP8_HELPERS.items() if word in storages]
        return "\n".join(p.strip("\n") for p in parts if p) + "\n"

    def load_global(self, et: ElementType, ptr: str, index: str) -> str:
        """Expression: element `index` of global array `ptr`, converted to the compute type."""
        if et.storage == "f16_bits":
            return self._load_f16(ptr, index)
        if et.storage == "bf16_bits":
            return f"bf16_to_f32({ptr}[{index}])"
        if et.storage in _FP8_HELPERS:
            return f"{et.storage}_to_f32({ptr}[{index}])"
        return f"{ptr}[{index}]"

    def store_global(self, et: ElementType, ptr: str, index: str, value: str) -> str:
        """Statement: convert compute-type `value` and store it at element `index` of `ptr`."""
        if et.storage == "f16_bits":
            return self._store_f16(ptr, index, value)
        if et.storage == "bf16_bits":
            return f"{ptr}[{index}] = f32_to_bf16({value});"
        return f"{ptr}[{index}] = {value};"

    #: Address-space qualifier a pointer into shared (local) memory needs in a cast: OpenCL's
    #: pointers carry their space, CUDA's generic pointers reach shared memory unqualified.
    _local_pointer_space: str = ""

    def pointer_space(self, space: str) -> str:
        """The qualifier of a pointer into ``space`` ("global" or "local") memory ("" if none)."""
        return {"global": "GLOBAL", "local": self._local_pointer_space}[space]

    def vector_ref(self, space: str, word: str, width: int, pointer: str, const: bool = False) -> str:
        """Lvalue: the ``width``-wide vector of element word ``word`` (``float4``, ``double2``: the
        same type names in both backends, components ``.x .y .z .w``) at ``pointer``, an element
        pointer into ``space`` ("global" or "local") memory aligned to the whole vector."""
        vec = f"{'const ' if const else ''}{self.pointer_space(space)} {self.vector_type(word, width)}".strip()
        return f"(*({vec}*)({pointer}))"

    #: Helper functions defined only in sources that call them (name -> definition).
    _on_demand: dict = {}

    def helpers_for(self, body: str) -> str:
        """Definitions of the on-demand helpers (and generated intrinsics) that ``body`` calls."""
        helpers = {**{n: (code, True) for n, code in self._on_demand.items()}, **self._generated}
        return "".join(code for name, (code, call) in helpers.items()
                       if re.search(rf"\b{name}\(" if call else rf"\b{name}\b", body))

    def _use(self, built: tuple[str, str], call: bool = True) -> str:
        """Record a generated helper ``(name, definition)``; returns its name."""
        name, code = built
        self._generated.setdefault(name, (code, call))
        return name

    #: How a structure passed by value is declared as a kernel parameter (``{type}``, ``{name}``).
    _by_value = "const {type} {name}"

    def by_value_param(self, name: str, size: int, align: int) -> str:
        """A kernel parameter ``name``: ``size`` bytes passed by value, ``align``-byte aligned (a
        TMA tensor map: 128 bytes, 64-aligned), as a structure type defined where it is used."""
        type_name = f"ge_bytes{size}_a{align}"
        self._use((type_name, self._struct(type_name, size, align)), call=False)
        return self._by_value.format(type=type_name, name=name)

    def _struct(self, type_name: str, size: int, align: int) -> str:
        return f"typedef struct {{ unsigned char bytes[{size}]; }} __attribute__((aligned({align}))) {type_name};\n"

    #: Whether `ring_declaration` places the ring at the alignment it is asked for (a static array;
    #: CUDA's dynamic shared memory is 16-byte aligned only, so a ring that needs more is aligned
    #: at run time and asks for the slack).
    aligns_rings = True

    def ring_declaration(self, name: str, nbytes: int, align: int = 16) -> str:
        """Declaration (at kernel scope) of ``nbytes`` of shared memory called ``name`` for a ring
        of stages, ``align``-byte aligned where `aligns_rings`: CUDA's dynamic shared memory (sized
        at launch, past 48 KiB), an OpenCL ``__local`` array (the device's limit)."""
        if align == 16:
            return f"LOCAL unsigned char {name}[{nbytes}] ALIGN16;"
        return f"LOCAL unsigned char {name}[{nbytes}] __attribute__((aligned({align})));"

    #: Vector type names whose base differs from the element's C type (CUDA spells 32-bit unsigned
    #: words ``unsigned int`` but their vectors ``uint4``, as OpenCL does).
    _vector_bases = {"u32": "uint"}

    def vector_type(self, word: str, width: int) -> str:
        """The ``width``-wide vector type of element word ``word`` (``float4``, ``uint4``)."""
        return f"{self._vector_bases.get(word, self.c_type(word))}{width}"

    def stream_vector(self, word: str, width: int, pointer: str) -> str:
        """Rvalue: like a const global `vector_ref`, for data read once (a streamed operand): the
        backend may keep it out of its caches. Portable default: the plain load."""
        return self.vector_ref("global", word, width, pointer, const=True)

    def compile_note(self, source: str) -> str:
        """A comment line saying how to build ``source`` by hand (for `gemm_engine.source`)."""
        return ""

    def plane_uniform(self, value: str) -> str:
        """Expression: ``value`` (an int the same on every unit of a plane), as the plane's first
        unit has it, which tells the compiler it is uniform across the plane. Portable default:
        ``value`` itself."""
        return value

    # -- a plane's 16 x 8 x 16 tensor-core product, native or emulated ---------------------------
    #: Whether `plane_mma` is the hardware instruction (else an emulation through shared memory,
    #: correct but slow: every plane's call is a cube barrier, so every plane must make it).
    plane_mma_native: bool = False

    def plane_mma_scratch(self) -> int:
        """float32 elements of shared memory each plane hands `plane_mma` (0: none needed)."""
        return 0

    def plane_mma(self, kind: str, acc: str, a: str, b: str, scratch: str) -> str:
        """Statement: ``acc[0..4) += A @ B`` for the plane's m16n8k16 product in the register
        layout of PTX's ``mma.sync`` (row-major A in ``a[0..4)``, column-major B in ``b[0..2)``, 32-bit
        words of two ``kind`` ("f16" / "bf16") halves; float32 accumulators), ``scratch`` the plane's
        shared memory (`plane_mma_scratch` floats)."""
        raise NotImplementedError(f"{type(self).__name__} has no plane mma")

    def pack16x2(self, kind: str, hi: str, lo: str) -> str:
        """Expression: two floats rounded to nearest even as one 32-bit word of two ``kind`` ("f16" /
        "bf16") halves, ``hi`` in the upper one."""
        raise NotImplementedError(f"{type(self).__name__} does not pack 16-bit pairs")

    # -- cubes that hand each other results through global memory ------------------------------
    def fence_device(self) -> str:
        """Statement: this unit's global writes before it are visible device-wide before its
        later ones (and an atomic after it)."""
        raise NotImplementedError(f"{type(self).__name__} has no device fence")

    def ticket(self, pointer: str) -> str:
        """Expression: atomically add 1 to the 32-bit counter at ``pointer`` (global memory);
        its value before."""
        raise NotImplementedError(f"{type(self).__name__} has no atomic counter")

    def load_other_cube(self, ctype: str, pointer: str, index: str) -> str:
        """Expression: element ``index`` of the global array ``pointer`` of C type ``ctype`` that
        another cube of this kernel wrote (not from this cube's own cache)."""
        raise NotImplementedError(f"{type(self).__name__} has no coherent load")

    # -- backend hooks ----------------------------------------------------------------------
    def _fp64_enable(self) -> str:
        return ""

    def _f16_helpers(self) -> str:
        return ""

    # Half precision is held as 16 raw bits (unsigned short) in both backends and converted by
    # the preamble's helpers (`_f16_helpers`), so a kernel may also copy it without converting.
    def _load_f16(self, ptr: str, index: str) -> str:
        return f"f16_to_f32({ptr}[{index}])"

    def _store_f16(self, ptr: str, index: str, value: str) -> str:
        return f"{ptr}[{index}] = f32_to_f16({value});"
