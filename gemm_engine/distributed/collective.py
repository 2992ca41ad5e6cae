"""All-gather + GEMM and GEMM + reduce-scatter on row blocks (2-D: ``rows x K``), by one of three
strategies:

* ``"sequential"``: the collective (NCCL / gloo) then one GEMM (GEMM then the collective): the
  fallback, and what small shapes take;
* ``"overlap"``: the ring of order.py, each block's GEMM by the engine into its row block of a
  preallocated output (``out=`` a slice: no copy, no allocation per block), the transfers ordered
  against the GEMMs by comm.py's `Side` (a communication stream and events on CUDA);
* ``"peer"`` (CUDA, one host): peer.py's transfers through symmetric memory on the copy engines and
  the GEMM's own stores, ordered by flags one-thread kernels raise and await: no communication
  kernel takes SMs from the GEMMs.

``"auto"`` takes the peer strategy where it can run (peer.available, not while a CUDA graph is
captured) and the blocks are large enough (`choose`), else the sequential one.
The NCCL ring lost to the sequential strategy on every row measured on 2 and 4 H100s (its send /
recv kernels take SMs from the GEMMs: bench/results/h100/distributed_2gpu.md); it stays for gloo
and as a choice. api.py puts the public functions' dims and autograd around these.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.distributed as dist

from .peer import all_gather_matmul_peer, matmul_reduce_scatter_peer
from .peer import available as peer_available
from .comm import Side, as_wire, comm_stream
from .order import Blocks, gather_steps, scatter_steps

STRATEGIES = ("auto", "sequential", "overlap", "peer")
#: The least bytes a block moves (all-gather: its rows of x; reduce-scatter: its partial sums) for
#: which "auto" takes the peer strategy. The peer strategy splits a call into one GEMM launch, a copy
#: and two flag kernels per block, ~0.1-0.15 ms of host time a block on the H100 hosts. Measured
#: (bench/results/h100/distributed_{2,4}gpu.md): it won from 32 MiB blocks on 2 GPUs (1.21-1.36x
#: NCCL + torch.matmul) and the all-gather's on 4 (1.14-1.24x), lost at 4 MiB (2 GPUs, 0.3x) and
#: in the 4-GPU MLP block (16 MiB: 4.1-5.3 against 3.4 ms). On 4 H200s, with partial sums pushed by
#: the copy engines, the reduce-scatter's won from 56 MiB too (1.54 ms against NCCL + torch's 1.98:
#: bench/results/h200/distributed_4gpu.md) and at 16 MiB (0.80 against 0.90), but the MLP block,
#: 16 MiB blocks both ways, still lost (4.2-6.0 ms against 3.2: host time): one threshold. Bytes,
#: not flop: the rule must give every rank the same answer, and a reduce-scatter's contraction
#: slice may differ between ranks.
PEER_MIN_BYTES = 32 << 20
#: The tensor collectives (torch 2.13 renamed them: the old names warn; older torch has only those).
all_gather_rows_into = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
reduce_scatter_rows_into = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def choose(strategy: str, device: torch.device, block_bytes: int, world: int, group=None) -> str:
    """The strategy an all-gather + GEMM or GEMM + reduce-scatter takes: ``strategy`` where named
    (ValueError where "peer" cannot run), else auto's choice: the peer strategy for blocks moving
    ``block_bytes`` >= PEER_MIN_BYTES, never while a CUDA graph is being captured. Every input is
    the same on every rank of the call (the ranks must agree)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy: expected one of {STRATEGIES}, got {strategy!r}")
    if strategy in ("sequential", "overlap"):
        return strategy
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        why = "a CUDA graph is being captured (the peer strategy's flags count calls on the host)"
    else:
        why = peer_available(device, group if group is not None else dist.group.WORLD)
    if strategy == "peer":
        if why is not None:
            raise ValueError(f"strategy='peer' cannot run here: {why}")
        return strategy
    if why is None and world > 1 and block_bytes >= PEER_MIN_BYTES:
        return "peer"
    return "sequential"


@dataclass(frozen=True)
class Product:
    """The local product every strategy computes block by block: ``a @ w`` with the call's epilogue
    (``bias``; fp8 / int8 operand scales: ``scale_a`` a number, a 0-d tensor or one per row of the
    whole (gathered) x, ``scale_b`` a number or tensor as the dense path takes it; ``out_dtype``)."""
    engine: object
    w: object
    bias: object = None
    scale_a: object = None
    scale_b: object = None
    out_dtype: object = None

    def dtype(self, x):
        return self.out_dtype if self.out_dtype is not None else torch.promote_types(x.dtype, self.w.dtype)

    def partial(self) -> "Product":
        """The product without the bias: a partial sum's, the bias being added once to the sum."""
        return self if self.bias is None else replace(self, bias=None)

    def __call__(self, a, rows: slice, out=None, c=None):
        """The product of ``a``, rows ``rows`` of x (for a per-row scale_a), into ``out`` (+ ``c``)."""
        if a.shape[0] == 0:
            return out if out is not None else a.new_zeros((0, self.w.shape[1]), dtype=self.dtype(a))
        if c is None and self.scale_a is None and self.scale_b is None and self.out_dtype is None:
            return self.engine.compute(a, self.w, out=out, bias=self.bias)     # the common call, no terms to sort
        sa = self.scale_a
        if isinstance(sa, torch.Tensor) and sa.dim() == 2:
            sa = sa[rows]
        terms = dict(c=c, beta=None if c is None else 1.0, scale_a=sa, scale_b=self.scale_b, out_dtype=self.out_dtype)
        return self.engine.compute(a, self.w, out=out, bias=self.bias, **{k: v for k, v in terms.items() if v is not None})


def gather_rows(x, blocks: Blocks, group, rank: int):
    """The sequential all-gather of row blocks: the (total, K) concatenation on every rank (fp8 moved
    as bytes: `as_wire`)."""
    world = len(blocks.sizes)
    wire = as_wire(x)
    if blocks.even:
        full = wire.new_empty((blocks.total, x.shape[1]))
        all_gather_rows_into(full, wire.contiguous(), group=group)
        return full if wire is x else full.view(x.dtype)
    # Uneven: gathered padded to the largest block, then the valid rows put together.
    top = max(blocks.sizes)
    padded = wire.new_zeros((top, x.shape[1]))
    padded[:x.shape[0]] = wire
    parts = wire.new_empty((world * top, x.shape[1]))
    all_gather_rows_into(parts, padded, group=group)
    return torch.cat([parts[i * top:i * top + s] for i, s in enumerate(blocks.sizes)]).view(x.dtype)


def all_gather_matmul_2d(x, product: Product, blocks: Blocks, group, rank: int, strategy: str, *, timeout: float,
                         out=None, gathered: bool = True):
    """(concat of every rank's ``x`` (blocks) @ w by ``product``, the gathered x (None where not
    ``gathered`` and the strategy does not make it anyway)); ``out`` (total, N) optional."""
    world = len(blocks.sizes)
    if strategy == "peer":
        return all_gather_matmul_peer(x, product, blocks, group, rank, out=out, gathered=gathered,
                                      side_stream=comm_stream(x.device), timeout=timeout)
    if strategy == "sequential":
        full = gather_rows(x, blocks, group, rank)
        return product(full, slice(0, blocks.total), out=out), full
    full = x.new_empty((blocks.total, x.shape[1]))
    out = x.new_empty((blocks.total, product.w.shape[1]), dtype=product.dtype(x)) if out is None else out
    side = Side(x.device, group, timeout, "all_gather_matmul")
    mine = x.contiguous()
    side.before_send()
    token = None
    for step in gather_steps(rank, world):
        if step.send is not None:
            send = mine if step.send == rank else full[blocks.rows(step.send)]
            token = side.exchange(send, step.to, full[blocks.rows(step.receive)], step.source,
                                  f"block {step.receive} from group rank {step.source}")
        rows = blocks.rows(step.block)
        product(mine if step.block == rank else full[rows], rows, out=out[rows])
        token = side.ready(token)           # the block received during this GEMM, for the next
    full[blocks.rows(rank)].copy_(mine)
    side.finish()
    return out, full


def matmul_reduce_scatter_2d(x, product: Product, blocks: Blocks, group, rank: int, strategy: str, *,
                             timeout: float, out=None):
    """This rank's row block of the sum over the group of ``x @ w`` by ``product``; ``out`` (its
    rows, N) optional. ``product.bias`` is added once to the sum: by the GEMM of this rank's own
    block where one makes it, else after the sum."""
    world = len(blocks.sizes)
    if strategy == "peer":
        return matmul_reduce_scatter_peer(x, product, blocks, group, rank, out=out, timeout=timeout)
    partial = product.partial()
    if strategy == "sequential":
        result = reduce_scatter_rows(partial(x, slice(0, x.shape[0])), blocks, group, rank, out)
        return result if product.bias is None else result.add_(product.bias)
    n = product.w.shape[1]
    dtype = product.dtype(x)
    side = Side(x.device, group, timeout, "matmul_reduce_scatter")
    token, arrived = None, None
    steps = scatter_steps(rank, world)
    for step in steps:
        rows = blocks.rows(step.block)
        last = step.send is None
        target = (out if out is not None else x.new_empty((blocks.sizes[rank], n), dtype=dtype)) if last \
            else x.new_empty((blocks.sizes[step.block], n), dtype=dtype)
        (product if last else partial)(x[rows], rows, out=target)   # runs while this block's partial sum arrives
        token = side.ready(token)
        if arrived is not None:
            target.add_(arrived)
        if last:
            side.finish()
            return target
        arrived = x.new_empty((blocks.sizes[step.receive], n), dtype=dtype)
        side.before_send()
        token = side.exchange(target, step.to, arrived, step.source,
                              f"partial sum of block {step.receive} from group rank {step.source}")


def reduce_scatter_rows(partial, blocks: Blocks, group, rank: int, out=None):
    """This rank's row block of the sum over the group of ``partial`` (total, N)."""
    world = len(blocks.sizes)
    n = partial.shape[1]
    if blocks.even and dist.get_backend(group) != "gloo":
        result = out if out is not None else partial.new_empty((blocks.sizes[rank], n))
        reduce_scatter_rows_into(result, partial.contiguous(), group=group)
        return result
    if dist.get_backend(group) == "gloo":
        # gloo has no reduce-scatter: the sum everywhere, this rank's rows kept.
        total = partial.contiguous()
        dist.all_reduce(total, group=group)
        mine = total[blocks.rows(rank)]
    else:
        top = max(blocks.sizes)
        padded = partial.new_zeros((world * top, n))
        for i, s in enumerate(blocks.sizes):
            padded[i * top:i * top + s] = partial[blocks.rows(i)]
        mine = partial.new_empty((top, n))
        reduce_scatter_rows_into(mine, padded, group=group)
        mine = mine[:blocks.sizes[rank]]
    if out is None:
        return mine.contiguous()
    out.copy_(mine)
    return out
