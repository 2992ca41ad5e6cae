"""What the distributed GEMMs need of torch.distributed and of the device: the group's ranks, engines
per device, bounded waits, and the `Side` that orders a ring's transfers against its GEMMs.

On CUDA the transfers run on a communication stream of their own: each step's send / receive is
enqueued there (after the compute stream's work it reads, an event per arrived block), and the
compute stream waits on a block's event just before that block's GEMM, so the host never blocks and
the GEMM of one block runs while the next arrives. On CPU (gloo) the same steps run in the same
order, the receives waited for on the host (with the timeout) just before their block's GEMM.
"""
from __future__ import annotations

import datetime
import threading
import weakref

import torch
import torch.distributed as dist

from ..api import default_engine
from ..engine import Engine

#: Seconds a rank waits for a block from its neighbour (gloo; on NCCL the group's own timeout and
#: its watchdog bound the waits: the host never blocks there).
DEFAULT_TIMEOUT = 300.0

_lock = threading.Lock()
_engines: dict = {}
_streams: dict = {}
#: id(group) -> (a weak reference to the group, (rank, size)) (`kept_per_group`): a group's ranks
#: never change, and torch.distributed's lookups cost ~3 us a call (a decode step's small products
#: feel its host time).
_ranks: dict = {}


def kept_per_group(cache: dict, key, group, make, *args):
    """``make(*args)``, kept in ``cache`` under ``key`` (naming ``group``) while ``group`` lives: a
    group gone may leave its id to another, whose answer is made afresh."""
    found = cache.get(key)
    if found is None or found[0]() is not group:
        if len(cache) > 256:
            cache.clear()
        found = cache[key] = (weakref.ref(group), make(*args))
    return found[1]


def engine_for(device: torch.device, engine=None, max_compute_units: int | None = None) -> Engine:
    """``engine`` if given, else one engine per CUDA device (and cap), the default engine on CPU."""
    if engine is not None:
        return engine
    if device.type != "cuda":
        return default_engine()
    index = device.index if device.index is not None else torch.cuda.current_device()
    key = (index, max_compute_units)
    with _lock:
        found = _engines.get(key)
        if found is None:
            found = _engines[key] = Engine("cuda", device=index, max_compute_units=max_compute_units)
    return found


def as_wire(t):
    """``t`` as the backends can move it: one-byte types (fp8) as bytes (NCCL and gloo have no fp8)."""
    return t.view(torch.uint8) if t.element_size() == 1 else t


def comm_stream(device: torch.device, role: str = "transfers"):
    """The device's communication stream for ``role`` (one per device and role, made at first use):
    "transfers" carries copies and collectives, "flags" the flag kernels the peer strategy raises
    after its copies (apart, so a flag kernel waiting for an SM the GEMM holds does not hold back
    the next copy; flags after a GEMM go on the compute stream)."""
    key = (device, role)
    with _lock:
        found = _streams.get(key)
        if found is None:
            found = _streams[key] = torch.cuda.Stream(device)
    return found


def group_ranks(group) -> tuple[int, int]:
    """(this rank's index in ``group`` (None: the default group), the group's size)."""
    if not dist.is_initialized():
        raise RuntimeError("gemm_engine.distributed: torch.distributed is not initialized "
                           "(call torch.distributed.init_process_group first)")
    if group is dist.GroupMember.NON_GROUP_MEMBER:
        raise ValueError("group: this rank is not a member of the group (torch.distributed.new_group gave it "
                         "GroupMember.NON_GROUP_MEMBER); call the collective on the group's ranks only")
    group = group if group is not None else dist.group.WORLD
    return kept_per_group(_ranks, id(group), group, _ranks_now, group)


def _ranks_now(group) -> tuple[int, int]:
    return dist.get_rank(group), dist.get_world_size(group)


def seconds(timeout) -> float:
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ValueError(f"timeout: expected positive seconds or a timedelta, got {timeout!r}")
    return float(timeout)


def wait(works, timeout: float, what: str) -> None:
    """Wait for ``works``, at most ``timeout`` seconds each on the host (gloo); TimeoutError saying
    ``what`` was awaited."""
    for w in works:
        try:
            w.wait(datetime.timedelta(seconds=timeout))
        except RuntimeError as e:
            raise TimeoutError(f"gemm_engine.distributed: {what} did not arrive within {timeout:g} s "
                               f"(a rank late or gone?): {e}") from e


class Side:
    """Orders a ring's transfers against its GEMMs (module docstring). ``exchange`` posts one step's
    send and receive and returns a token; ``ready`` makes the next GEMM wait for the token's
    receive; ``before_send`` orders a send after the compute stream's work so far."""

    def __init__(self, device: torch.device, group, timeout: float, what: str):
        self.group, self.timeout, self.what = group, timeout, what
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.compute = torch.cuda.current_stream(device)
            self.comm = comm_stream(device)

    def before_send(self) -> None:
        if self.cuda:
            self.comm.wait_stream(self.compute)

    def exchange(self, send, to: int, receive, source: int, label: str):
        """Post ``send`` to group rank ``to`` and ``receive`` from ``source`` (either may be None)."""
        send, receive = (None if t is None else as_wire(t) for t in (send, receive))
        ops = []
        if send is not None:
            ops.append(dist.P2POp(dist.isend, send, group=self.group, group_peer=to))
        if receive is not None:
            ops.append(dist.P2POp(dist.irecv, receive, group=self.group, group_peer=source))
        if not ops:
            return None
        if not self.cuda:
            return dist.batch_isend_irecv(ops), label
        with torch.cuda.stream(self.comm):
            for t in (send, receive):
                if t is not None:
                    t.record_stream(self.comm)    # allocated on the compute stream, used here
            works = dist.batch_isend_irecv(ops)
            for w in works:
                w.wait()                          # the comm stream waits (the host does not)
            event = torch.cuda.Event()
            event.record(self.comm)
        return event, label

    def ready(self, token) -> None:
        """Returns None, for the caller's token: a gloo work is waited for once (a second wait on a
        completed send waits for another send)."""
        if token is None:
            return None
        if self.cuda:
            self.compute.wait_event(token[0])
        else:
            wait(token[0], self.timeout, f"{self.what}: {token[1]}")
        return None

    def finish(self) -> None:
        """The compute stream waits for the last transfers (sends whose buffers it may reuse)."""
        if self.cuda:
            self.compute.wait_stream(self.comm)


class GradientMap(torch.autograd.Function):
    """Identity forward; the gradient through ``fn`` backward (an all-reduce, a scale: what a
    placement's gradient needs)."""

    @staticmethod
    def forward(ctx, x, fn):
        ctx.fn = fn
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return ctx.fn(g), None
