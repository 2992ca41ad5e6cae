"""The PTX intrinsics only the OpenCL dialect renders (codegen/opencl_dialect.py): in OpenCL C's
spelling (``ulong``, its 64-bit word), each ``(name, definition)`` as codegen/ptx.py builds them."""
from __future__ import annotations

from .asm import asm_statement as _asm
from .ptx import inline_function as _fn


def cvta_to_shared() -> tuple[str, str]:
    """The 32-bit shared-window address of the generic address ``p`` (``cvta.to.shared``): what a
    compiler that hands inline assembly generic pointers to local memory needs before ldmatrix."""
    return _fn("ptx_cvta_to_shared", "ulong p",
               "    ulong s;\n" + _asm("cvta.to.shared.u64 %0, %1;", ['"=l"(s)'], ['"l"(p)'], volatile=False)
               + "\n    return (unsigned)s;", ret="unsigned")


def lane0_value() -> tuple[str, str]:
    """Lane 0's value of the 32-bit ``v`` (``shfl.sync.idx`` from lane 0): ptxas then keeps what is
    derived from it in uniform registers (OpenCL's spelling of CUDA's ``__shfl_sync(~0, v, 0)``)."""
    return _fn("ptx_lane0_value", "int v",
               "    int r;\n" + _asm("shfl.sync.idx.b32 %0, %1, 0, 31, -1;", ['"=r"(r)'], ['"r"(v)'], volatile=False)
               + "\n    return r;", ret="int")


def is_shared_window() -> tuple[str, str]:
    """1 when the 64-bit value ``p`` is a generic address inside the shared window (``isspacep``),
    else 0: tells the probe whether a compiler hands inline assembly generic or shared-window values."""
    return _fn("ptx_is_shared_window", "ulong p",
               "    unsigned r;\n" + _asm("{\n.reg .pred q;\nisspacep.shared q, %1;\nselp.u32 %0, 1, 0, q;\n}\n",
                                      ['"=r"(r)'], ['"l"(p)']) + "\n    return r;", ret="unsigned")
