"""PTX intrinsics for writing a cluster partner's shared memory (sm_90): the converting loader's
stores of a slot into the partner's, each counted on the partner's mbarrier.
Builders as in ptx.py: each returns ``(name, definition)``."""
from __future__ import annotations

from .asm import asm_statement as _asm
from .ptx import inline_function as _fn


def map_shared() -> tuple[str, str]:
    """The shared::cluster address of this cube's shared address ``addr`` in the cube of rank
    ``rank`` (``mapa``; the partner's window is contiguous, so offsets add after mapping)."""
    return _fn("ptx_map_shared", "unsigned addr, unsigned rank",
               "    unsigned r;\n" + _asm("mapa.shared::cluster.u32 %0, %1, %2;", ['"=r"(r)'],
                                          ['"r"(addr)', '"r"(rank)']) + "\n    return r;", ret="unsigned")


def st_async_v4() -> tuple[str, str]:
    """``st.async`` of four 32-bit registers to the shared::cluster address ``addr`` (a partner's),
    completing 16 bytes on the partner's mbarrier at shared::cluster address ``bar``: the store is
    counted by the barrier it lands under, as a TMA copy is (no fence, no arrival)."""
    return _fn("ptx_st_async_v4", "unsigned addr, unsigned bar, unsigned a, unsigned b, unsigned c, unsigned d",
               _asm("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%2, %3, %4, %5}, [%1];",
                    ins=['"r"(addr)', '"r"(bar)', '"r"(a)', '"r"(b)', '"r"(c)', '"r"(d)'], memory=True))
