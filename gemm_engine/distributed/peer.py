"""The ``"peer"`` strategy: all-gather + GEMM and GEMM + reduce-scatter through the peers' memory,
the transfers on the copy engines or in the GEMM's own stores (CUDA, one host: torch's symmetric
memory), so no communication kernel takes SMs from the GEMMs.

Each group keeps, per kind of call, one symmetric buffer (`Area`): a flag page, then two sets
(alternate calls) of one slot per source rank. A flag counts calls (``epoch``); one-thread kernels
(codegen/flag_wait.py) raise them in a peer's memory after the stream's copy or GEMM, and wait for
them, bounded by the call's ``timeout``: past it the waiting kernel prints which rank's block did not
arrive and stops the CUDA context. (The stream front end's own write and wait need no SM, but a flag
written over NVLink was seen ~300 us late and a wait found unmet re-polled only ~1 ms later:
measured on 2 H100s, bench/results/h100/distributed_2gpu.md.)

* all-gather + GEMM: the communication stream pushes this rank's shard into its slot on every peer
  with the copy engines (``copy_`` into the peer's buffer); after each copy a stream of flag
  kernels (waiting for the communication stream) raises that peer's flag. The
  compute stream multiplies the local shard at once, then each peer's slot as its flag arrives (the
  peer that pushes to this rank first, first), each into its rows of the output. Where the gathered
  x is kept (w's gradient), the communication stream copies the shard and each arrived slot into it,
  beside the GEMMs. No host synchronization, no barrier, nothing between the caller's stream and
  the first GEMM.
* GEMM + reduce-scatter: the compute stream multiplies each peer's row block first, then its own.
  On 2 ranks the writer stores the peer's partial straight into this rank's slot on that peer
  (NVLink stores from the GEMM's epilogue), the compute stream raises the peer's flag, and the own
  block's GEMM adds the arrived partial in its epilogue (``c``, ``beta = 1``). On more, each
  partial goes to a local buffer that the communication stream pushes with the copy engines (the
  epilogue's NVLink stores to three peers cost a 4-H200 run 0.93 ms against 0.80, 8192 x 4096 x
  8192 a rank; on 2 they won, 0.78 against 0.84), the flag stream raising the peer's flag after
  the copy; the own block's GEMM writes this rank's own slot and one pass sums the slots.

Why no "slot free" flags: a write into a peer's set ``p`` at call ``e`` must follow the peer's last
read of it, at call ``e - 2``. Every rank hears from every other at every call, and a rank raises
its flags for call ``e - 1`` only after its streams have passed call ``e - 2``: a flag raised on the
compute stream follows it; one raised on the flag stream waits for the communication stream, which
waits for the compute stream at the call's start (and after each partial sum it pushes) and has
made the copies out of the slots first. This rank's stream waited for that flag in call ``e - 1``,
and its writes of call ``e`` follow its stream (the pushes: the communication stream's wait for it).
Two sets make the stream order enough. The call ends with the compute stream waiting for the
communication and flag streams, so the next call's GEMMs rewrite ``Area.outgoing`` after its pushes.

A call that runs on another stream than the last one first waits for the last one's end
(`Area.next_epoch`), so the argument holds across streams. As with any collective, every rank must
make the same calls in the same order (a rank one call behind waits for a flag that never comes, and
the timeout stops it; two calls behind, nothing would catch it). Not under CUDA-graph capture (the
epochs are host counters: a replayed graph would repeat them): collective.choose takes the
sequential strategy there.
"""
from __future__ import annotations

import os
import socket
import threading
import warnings

import torch
import torch.distributed as dist

from ..codegen import flag_wait
from .comm import comm_stream, kept_per_group
from .order import Blocks

#: Bytes of the flag page at each buffer's start: ``arrived[set][source]``.
FLAG_BYTES = 4096
#: Slots start on 256-byte boundaries (TMA and vector loads want 16; the copy engines like more).
SLOT_ALIGN = 256

_lock = threading.Lock()
_areas: dict = {}
#: group name -> None (one host) or why the peer strategy cannot span it (`_one_host`).
_hosts: dict = {}
#: (device, id(group)) -> (a weak reference to the group, `available`'s answer).
_available: dict = {}
#: (id(runtime), name) -> (the runtime, its kernel): found without hashing the source each call.
_wait_kernels: dict = {}


def available(device: torch.device, group) -> str | None:
    """None where the peer strategy can run on ``device`` for ``group``, else why not (asked once
    per device and group: nothing it depends on changes while the group lives)."""
    if device.type != "cuda":
        return "not a CUDA device"
    return kept_per_group(_available, (device, id(group)), group, _available_now, device, group)


def _available_now(device: torch.device, group) -> str | None:
    if dist.get_backend(group) != "nccl":
        return f"the group's backend is {dist.get_backend(group)}, not nccl"
    if dist.get_world_size(group) > FLAG_BYTES // 8:
        return f"more than {FLAG_BYTES // 8} ranks"
    try:
        import torch.distributed._symmetric_memory  # noqa: F401
    except ImportError:
        return "this torch has no symmetric memory"
    return _one_host(group, device)


def _one_host(group, device: torch.device) -> str | None:
    """None where every rank of ``group`` runs on this host (symmetric memory maps peers' memory
    within one host), else why not; asked once per group (a small collective every rank makes at
    its first such call, so every rank gets the same answer)."""
    name = group.group_name
    if name not in _hosts:
        hosts = [None] * dist.get_world_size(group)
        with torch.cuda.device(device):     # NCCL's object collective works on the current device
            dist.all_gather_object(hosts, socket.gethostname(), group=group)
        _hosts[name] = None if len(set(hosts)) == 1 else f"the group spans hosts {sorted(set(hosts))}"
    return _hosts[name]


class Area:
    """One symmetric buffer of a group on this device: the flag page and 2 x world slots."""

    def __init__(self, group, device: torch.device, slot_bytes: int):
        # Symmetric memory may map NVLink multicast, which can take a shared host's GPUs out of service.
        os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
        import torch.distributed._symmetric_memory as symm
        enable = getattr(symm, "enable_symm_mem_for_group", None)
        if enable is not None:             # needed before torch 2.9, deprecated (a no-op) since
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                enable(group.group_name)
        self.world, self.rank = dist.get_world_size(group), dist.get_rank(group)
        self.slot_bytes = slot_bytes
        self.buffer = symm.empty(FLAG_BYTES + 2 * self.world * slot_bytes, dtype=torch.uint8, device=device)
        self.buffer[:FLAG_BYTES].zero_()
        self.handle = symm.rendezvous(self.buffer, group)
        self.bases = list(self.handle.buffer_ptrs)
        torch.cuda.synchronize(device)
        dist.barrier(group=group)          # every rank's flags are zero before any peer writes them
        self.epoch = 0
        self._views: dict = {}
        self._last = None        # (stream, event at the end of the last call on it)
        self._outgoing = None    # plain memory for partial sums the copy engines push (`outgoing`)

    def next_epoch(self, stream) -> tuple[int, int]:
        """The call's (epoch, buffer set); ``stream`` (the call's compute stream) first waits for
        the last call's end where that ran on another stream: the stream order the module
        docstring relies on then holds across streams too."""
        if self._last is not None and self._last[0] != stream:
            stream.wait_event(self._last[1])
        self.epoch += 1
        return self.epoch, self.epoch & 1

    def finish(self, stream) -> None:
        """Marks the end of a call on ``stream`` (for `next_epoch`)."""
        event = torch.cuda.Event()
        event.record(stream)
        self._last = (stream, event)

    def flag(self, holder: int, parity: int, rank: int) -> int:
        """The address of ``holder``'s flag of set ``parity`` for ``rank``'s block."""
        return self.bases[holder] + 4 * (parity * self.world + rank)

    def _offset(self, parity: int, source: int) -> int:
        return FLAG_BYTES + (parity * self.world + source) * self.slot_bytes

    def slot(self, holder: int, parity: int, source: int, shape, dtype) -> torch.Tensor:
        """``holder``'s slot for ``source`` in set ``parity``, as a (rows, cols) tensor of ``dtype``
        (this rank's memory, or the peer's mapped here); views kept (making one costs 7-12 us)."""
        return self._kept((holder, parity, source, tuple(shape), dtype), self._view, holder, parity, source, shape,
                          dtype)

    def set_of(self, parity: int, shape, dtype) -> torch.Tensor:
        """This rank's slots of set ``parity`` (one per source, its own among them) as one (world,
        rows, cols) tensor of ``dtype``, each slot's start of the shape (``slot``'s layout)."""
        return self._kept(("set", parity, tuple(shape), dtype), self._set_view, parity, shape, dtype)

    def outgoing(self, peer: int, shape, dtype) -> torch.Tensor:
        """This rank's buffer (its own memory, made at first use, kept: no allocation per call) for
        its partial sum of ``peer``'s block, pushed from there into ``peer``'s slot. A call's GEMM
        rewrites it after the last call's push: the call's end waits for the pushes."""
        if self._outgoing is None:      # one slot a peer (none for this rank's own block)
            self._outgoing = torch.empty((self.world - 1) * self.slot_bytes, dtype=torch.uint8,
                                         device=self.buffer.device)
        return self._kept(("outgoing", peer, tuple(shape), dtype), self._outgoing_view, peer, shape, dtype)

    def _outgoing_view(self, peer: int, shape, dtype) -> torch.Tensor:
        start = ((peer - self.rank) % self.world - 1) * self.slot_bytes
        return self._outgoing[start:start + shape[0] * shape[1] * dtype.itemsize].view(dtype).view(tuple(shape))

    def _kept(self, key, make, *args) -> torch.Tensor:
        found = self._views.get(key)
        if found is None:
            if len(self._views) > 256:
                self._views.clear()
            found = self._views[key] = make(*args)
        return found

    def _set_view(self, parity: int, shape, dtype) -> torch.Tensor:
        item = dtype.itemsize
        return self.buffer.view(dtype).as_strided((self.world, *shape), (self.slot_bytes // item, shape[1], 1),
                                                  self._offset(parity, 0) // item)

    def _view(self, holder: int, parity: int, source: int, shape, dtype) -> torch.Tensor:
        item = dtype.itemsize
        offset = self._offset(parity, source)
        if holder == self.rank:
            count = shape[0] * shape[1]
            return self.buffer[offset:offset + count * item].view(dtype).view(tuple(shape))
        return self.handle.get_buffer(holder, tuple(shape), dtype, offset // item)


def area_for(kind: str, group, device: torch.device, slot_bytes: int) -> Area:
    """The group's area for ``kind`` on ``device`` with slots of at least ``slot_bytes`` (every rank
    asks for the same size: a larger one is made on all of them together)."""
    # Powers of two: shapes that grow call by call (sequence lengths) regrow the buffer (a device
    # synchronization and a collective) a few times, not at every call.
    slot_bytes = max(SLOT_ALIGN, 1 << (max(slot_bytes, 1) - 1).bit_length())
    key = (kind, group.group_name, device.index)
    with _lock:
        found = _areas.get(key)
        if found is not None and found.slot_bytes >= slot_bytes:
            return found
    if found is not None:
        torch.cuda.synchronize(device)     # the old buffer's last transfers are done before it goes
        dist.barrier(group=group)
    made = Area(group, device, slot_bytes)
    with _lock:
        _areas[key] = made
    return made


def _group(group):
    return group if group is not None else dist.group.WORLD


def raise_flag(engine, stream, address: int, epoch: int) -> None:
    """After ``stream``'s work so far, ``*address = epoch`` (another GPU's memory): a one-thread
    kernel (codegen/flag_wait.py). The front end's ``cuStreamWriteValue32`` needs no SM but took
    ~300 us to be seen by the peer (a ping-pong of flags on 2 H100s: 604 us a round trip against
    31 us with kernels on both sides)."""
    rt = engine.runtime
    with rt.on_stream(stream.cuda_stream):
        rt.launch(_kernel(rt, flag_wait.RAISE_NAME), 1, 1, (address, epoch))


def _kernel(rt, name: str):
    found = _wait_kernels.get((id(rt), name))
    if found is None or found[0] is not rt:
        if len(_wait_kernels) > 64:
            _wait_kernels.clear()
        found = _wait_kernels[(id(rt), name)] = (rt, rt.kernel(flag_wait.SOURCE, name))
    return found[1]


def _push(engine, area: Area, comm, flags, peer: int, parity: int, rank: int, epoch: int, block) -> None:
    """``block`` (None: nothing to send) copied into this rank's slot on ``peer`` by the
    communication stream ``comm`` (the copy engines), then ``peer``'s flag for it raised on the
    flag stream ``flags`` once the copy is done."""
    if block is not None:
        with torch.cuda.stream(comm):
            area.slot(peer, parity, rank, block.shape, block.dtype).copy_(block)
    flags.wait_stream(comm)
    raise_flag(engine, flags, area.flag(peer, parity, rank), epoch)


def wait_arrival(engine, stream, address: int, epoch: int, source: int, timeout: float) -> None:
    """``stream`` waits (codegen/flag_wait.py's kernel: a flag a peer writes does not wake the front
    end for about a millisecond) until the flag at ``address`` reaches ``epoch``; past ``timeout``
    seconds the kernel stops the context, naming group rank ``source``."""
    rt = engine.runtime
    kernel = _kernel(rt, flag_wait.NAME)
    with rt.on_stream(stream.cuda_stream):
        rt.launch(kernel, 1, 1, (address, epoch, int(min(timeout, 9e9) * 1e9), source))   # at most ~285 years


def all_gather_matmul_peer(x, product, blocks: Blocks, group, rank: int, *, out=None, gathered: bool = True,
                           side_stream=None, timeout: float = 300.0):
    """(concat of every rank's ``x`` (blocks) @ w, the gathered x or None); ``product(a, rows, out)``
    is the local GEMM (collective.Product). The module docstring says how."""
    group = _group(group)
    world = len(blocks.sizes)
    engine = product.engine
    k = x.shape[1]
    mine = x.contiguous()
    area = area_for("gather", group, x.device, max(blocks.sizes) * k * mine.element_size())
    compute = torch.cuda.current_stream(x.device)
    epoch, parity = area.next_epoch(compute)
    comm = side_stream
    out = x.new_empty((blocks.total, product.w.shape[1]), dtype=product.dtype(x)) if out is None else out
    # The gathered x is put together by the copy engines on the side stream, beside the GEMMs (on
    # the compute stream its copies held the next GEMM back: 89 us of a 5.3 ms MLP step on 2 H100s).
    full = x.new_empty((blocks.total, k)) if gathered else None
    comm.wait_stream(compute)                       # the shard is written (and full's memory free)
    # This rank's block's GEMM first, before the host enqueues the pushes (their copies and flag
    # kernels took ~0.1-0.25 ms of host time ahead of it on an idle H200 pair); the comm stream
    # waits only for the work before it (the wait above).
    product(mine, blocks.rows(rank), out[blocks.rows(rank)])
    peers = [(rank + hop) % world for hop in range(1, world)]
    flags = comm_stream(x.device, "flags")
    with torch.cuda.stream(comm):
        # Each peer's flag right after its copy, on a stream of their own: a flag's kernel may wait
        # for an SM the GEMM holds, and the next copies (copy engines) should not wait behind it.
        # (With every flag after every copy, 4 ranks waited ~0.1 ms for their first peer block.)
        for peer in peers:
            _push(engine, area, comm, flags, peer, parity, rank, epoch, mine if mine.shape[0] else None)
        if full is not None:
            full[blocks.rows(rank)].copy_(mine)
    mine.record_stream(comm)
    for hop in range(1, world):
        source = (rank - hop) % world
        wait_arrival(engine, compute, area.flag(rank, parity, source), epoch, source, timeout)
        shape = (blocks.sizes[source], k)
        slot = area.slot(rank, parity, source, shape, x.dtype)
        if shape[0] and full is not None:
            # Its slot is rewritten two calls on, after this rank's next flags, which the flag
            # stream raises after the communication stream has made this copy.
            arrived = torch.cuda.Event()
            arrived.record(compute)
            comm.wait_event(arrived)
            with torch.cuda.stream(comm):
                full[blocks.rows(source)].copy_(slot)
        if shape[0]:
            product(slot, blocks.rows(source), out[blocks.rows(source)])
    compute.wait_stream(comm)                       # the pushes and copies are done before x or full is used
    compute.wait_stream(flags)
    area.finish(compute)
    return out, full


def matmul_reduce_scatter_peer(x, product, blocks: Blocks, group, rank: int, *, out=None, timeout: float = 300.0):
    """This rank's row block of the sum over the group of ``x @ w``; ``product(a, rows, out, c)`` is
    the local GEMM (``+ c`` when c is given: collective.Product; its bias added by the own block's
    GEMM only). The module docstring says how."""
    group = _group(group)
    world = len(blocks.sizes)
    engine = product.engine
    n = product.w.shape[1]
    dtype = product.dtype(x)
    item = dtype.itemsize
    area = area_for("scatter", group, x.device, max(blocks.sizes) * n * item)
    compute = torch.cuda.current_stream(x.device)
    epoch, parity = area.next_epoch(compute)
    mine = blocks.sizes[rank]
    result = x.new_empty((mine, n), dtype=dtype) if out is None else out
    sources = [(rank - hop) % world for hop in range(1, world)]
    if world == 2:
        peer = sources[0]
        if blocks.sizes[peer]:
            product.partial()(x[blocks.rows(peer)], blocks.rows(peer),
                              area.slot(peer, parity, rank, (blocks.sizes[peer], n), dtype))
        raise_flag(engine, compute, area.flag(peer, parity, rank), epoch)
        wait_arrival(engine, compute, area.flag(rank, parity, peer), epoch, peer, timeout)
        if mine:
            product(x[blocks.rows(rank)], blocks.rows(rank), result, area.slot(rank, parity, peer, (mine, n), dtype))
        area.finish(compute)
        return result
    comm, flags = comm_stream(x.device), comm_stream(x.device, "flags")
    comm.wait_stream(compute)               # this call's flags follow the last call's reads of the slots
    for hop in range(1, world):
        peer = (rank + hop) % world
        part = None
        if blocks.sizes[peer]:
            part = area.outgoing(peer, (blocks.sizes[peer], n), dtype)
            product.partial()(x[blocks.rows(peer)], blocks.rows(peer), part)
            comm.wait_stream(compute)
        _push(engine, area, comm, flags, peer, parity, rank, epoch, part)
    # The own block's GEMM into this rank's own slot of the set, then one pass summing every slot
    # of the set (world reads and one write; an add per arrival read and wrote the result world - 1
    # times: 4 H200s, 16384 x 7168 x 4096 a rank, 1.74 ms against 1.62).
    slots = area.set_of(parity, (mine, n), dtype)
    if mine:
        product(x[blocks.rows(rank)], blocks.rows(rank), slots[rank])
    for s in sources:
        wait_arrival(engine, compute, area.flag(rank, parity, s), epoch, s, timeout)
    if mine:
        torch.sum(slots, dim=0, out=result)
    compute.wait_stream(comm)
    compute.wait_stream(flags)
    area.finish(compute)
    return result
