"""A neutral strided-copy kernel (``dst[...] = src`` for any strides): used where the array library
has no copy of its own for non-contiguous device arrays (PyOpenCL)."""
from __future__ import annotations

from .dialect import Dialect


def strided_copy_source(d: Dialect, ndim: int, itemsize: int) -> str:
    word = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}[itemsize]
    if d.backend == "opencl" and itemsize == 8:
        word = "ulong"  # OpenCL C has no `long long`
    params = ", ".join(f"i64 n{i}, i64 s{i}, i64 t{i}" for i in range(ndim))
    walk = "\n".join(
        f"    {{ const i64 q = rest % n{i}; rest /= n{i}; src_at += q * s{i}; dst_at += q * t{i}; }}"
        for i in reversed(range(ndim)))
    return d.preamble(()) + f"""
KERNEL void strided_copy(const GLOBAL {word}* src, i64 src_offset, GLOBAL {word}* dst,
                         i64 dst_offset, i64 size, {params})
{{
    const i64 i = CUBE_ID * 64 + UNIT_ID;
    if (i >= size) return;
    i64 rest = i, src_at = src_offset, dst_at = dst_offset;
{walk}
    dst[dst_at] = src[src_at];
}}
"""
