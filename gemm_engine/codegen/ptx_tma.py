"""The PTX of the bulk tensor copy engine (TMA, sm_90): tensor-map copies between global and shared
memory, plain bulk copies, bulk groups, and tensor maps rewritten on the device; each builder
returns (name, definition) of an inline function, as codegen/ptx.py's do."""
from __future__ import annotations

from .asm import asm_statement
from .ptx import inline_function


def statement(name: str, text: str) -> tuple[str, str]:
    """An inline function of no parameters running the PTX ``text`` (a memory clobber)."""
    return inline_function(name, "", asm_statement(text, memory=True))


def _tma_coords(rank: int, first: int) -> tuple[str, str, list[str]]:
    """A TMA copy's ``rank`` coordinates: their asm operands (from ``%first``), C parameters
    ``c0..`` and asm inputs."""
    return (", ".join(f"%{first + i}" for i in range(rank)), ", ".join(f"int c{i}" for i in range(rank)),
            [f'"r"(c{i})' for i in range(rank)])


def tma_load(rank: int) -> tuple[str, str]:
    """``cp.async.bulk.tensor.{rank}d`` of one box of the tensor map at generic address ``map``
    (a ``__grid_constant__`` parameter), whose first element is at coordinates ``c0..``, into
    shared memory at ``dst``, completing (bytes counted) on the mbarrier ``bar``. Coordinates
    outside the tensor read zeros."""
    coords, cparams, cins = _tma_coords(rank, 3)
    return inline_function(f"ptx_tma_load_{rank}d", f"unsigned dst, const void* map, unsigned bar, {cparams}",
               asm_statement(f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                    f"[%0], [%1, {{{coords}}}], [%2];", ins=['"r"(dst)', '"l"(map)', '"r"(bar)', *cins], memory=True))


def bulk_load() -> tuple[str, str]:
    """``cp.async.bulk`` of ``bytes`` (a multiple of 16) from global ``src`` to shared ``dst`` (both
    16-byte aligned), completing (bytes counted) on the mbarrier ``bar``: a run with no tensor map."""
    return inline_function("ptx_bulk_load", "unsigned dst, const void* src, unsigned bytes, unsigned bar",
               asm_statement("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];",
                    ins=['"r"(dst)', '"l"(src)', '"r"(bytes)', '"r"(bar)'], memory=True))


def tma_load_multicast(rank: int) -> tuple[str, str]:
    """`tma_load` delivered to every cube of the cluster whose bit is set in ``mask``: the box lands
    at shared address ``dst`` in each of them and completes on the mbarrier at ``bar`` in each."""
    coords, cparams, cins = _tma_coords(rank, 4)
    return inline_function(f"ptx_tma_load_{rank}d_multicast",
               f"unsigned dst, const void* map, unsigned bar, unsigned short mask, {cparams}",
               asm_statement(f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                    f".multicast::cluster [%0], [%1, {{{coords}}}], [%2], %3;",
                    ins=['"r"(dst)', '"l"(map)', '"r"(bar)', '"h"(mask)', *cins], memory=True))


def tensor_map_extent(dim: int) -> tuple[str, str]:
    """A tensor map in global memory at generic address ``map`` made a copy of the map at ``src``
    (a ``__grid_constant__`` parameter) whose extent along dimension ``dim`` is ``extent``, ready for
    this unit's next TMA copies through it: the 128 bytes copied by ordinary loads and stores,
    the extent replaced (``tensormap.replace``, sm_90a), then the generic proxy's writes released
    to the tensor-map proxy and the map acquired there (the copies read it through that proxy)."""
    body = "\n".join([
        "    #pragma unroll",
        "    for (int i = 0; i < 8; ++i) ((uint4*)map)[i] = ((const uint4*)src)[i];",
        asm_statement(f"tensormap.replace.tile.global_dim.global.b1024.b32 [%0], {dim}, %1;",
             ins=['"l"(map)', '"r"(extent)'], memory=True),
        asm_statement("fence.proxy.tensormap::generic.release.gpu;", memory=True),
        asm_statement("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;", ins=['"l"(map)'], memory=True)])
    return inline_function(f"ptx_tensor_map_extent_{dim}", "void* map, const void* src, unsigned extent", body)


def tma_store(rank: int, add: bool = False) -> tuple[str, str]:
    """``cp.async.bulk.tensor.{rank}d`` of one box from shared memory at ``src`` to the tensor map
    at generic address ``map`` (a ``__grid_constant__`` parameter) at coordinates ``c0..``, in this
    unit's bulk group; ``add``: ``cp.reduce.async.bulk.tensor`` adding the box into the tensor (in
    the map's element type). Elements of the box outside the tensor are not written."""
    coords, cparams, cins = _tma_coords(rank, 2)
    op, reduce = ("add", ".add") if add else ("store", "")
    return inline_function(f"ptx_tma_{op}_{rank}d", f"const void* map, unsigned src, {cparams}",
               asm_statement(f"cp{'.reduce' if add else ''}.async.bulk.tensor.{rank}d.global.shared::cta{reduce}.tile.bulk_group "
                    f"[%0, {{{coords}}}], [%1];", ins=['"l"(map)', '"r"(src)', *cins], memory=True))


def bulk_commit() -> tuple[str, str]:
    """Close this unit's bulk group of TMA stores issued since the last one."""
    return statement("ptx_bulk_commit", "cp.async.bulk.commit_group;")


def bulk_wait(pending: int, read: bool) -> tuple[str, str]:
    """Wait until at most ``pending`` of this unit's bulk groups are outstanding: ``read``, until
    their sources in shared memory have been read (the buffer may be written again); else until
    their writes are done."""
    suffix = ".read" if read else ""
    return statement(f"ptx_bulk_wait{'_read' if read else ''}_{pending}",
                      f"cp.async.bulk.wait_group{suffix} {pending};")
