"""`all_gather_matmul` and `matmul_reduce_scatter`: the public functions, over any dims, with autograd.

Both put the sharded dim first and flatten the rest into rows (collective.py works on row blocks),
and differentiate through each other (Megatron's sequence parallelism):

* ``y = all_gather(x) @ w``: ``gx = reduce_scatter(gy @ w^T)``, ``gw = all_gather(x)^T @ gy`` (the
  gathered x kept from the forward);
* ``y = reduce_scatter(x @ w)``: ``gx = all_gather(gy) @ w^T``, ``gw = x^T @ all_gather(gy)``.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from .collective import (STRATEGIES, Product, all_gather_matmul_2d, all_gather_rows_into, choose, gather_rows,
                         matmul_reduce_scatter_2d)
from .dtensor import all_gather_matmul as dtensor_all_gather_matmul, is_dtensor
from .dtensor import matmul_reduce_scatter as dtensor_matmul_reduce_scatter
from .comm import DEFAULT_TIMEOUT, engine_for, group_ranks, seconds
from .order import Blocks, blocks_of, even_blocks


def _check(x, w, dim: int, name: str, dim_label: str) -> int:
    if not isinstance(x, torch.Tensor) or not isinstance(w, torch.Tensor):
        raise TypeError(f"{name}: x and w must be torch tensors, got {type(x).__name__} and {type(w).__name__}")
    if w.dim() != 2:
        raise ValueError(f"{name}: w must be 2-D (K, N), got shape {tuple(w.shape)}")
    if x.dim() < 2:
        raise ValueError(f"{name}: x must have at least 2 dims (..., K), got shape {tuple(x.shape)}")
    if x.shape[-1] != w.shape[0]:
        raise ValueError(f"{name}: x's last dim ({x.shape[-1]}) differs from w's first ({w.shape[0]})")
    if x.device != w.device:
        raise ValueError(f"{name}: x is on {x.device}, w on {w.device}")
    if isinstance(dim, bool) or not isinstance(dim, int) or not -x.dim() <= dim < x.dim() - 1:
        raise ValueError(f"{name}: {dim_label}={dim!r} must name one of x's dims but the last "
                         f"(the contraction), x has {x.dim()}")
    return dim % x.dim()


def _check_bias(bias, w, x, name: str) -> None:
    if bias is None:
        return
    if not isinstance(bias, torch.Tensor) or tuple(bias.shape) != (w.shape[1],):
        raise ValueError(f"{name}: bias must be a tensor of shape ({w.shape[1]},) (w's columns), got "
                         f"{tuple(bias.shape) if isinstance(bias, torch.Tensor) else type(bias).__name__}")
    if bias.device != x.device:
        raise ValueError(f"{name}: bias is on {bias.device}, x on {x.device}")


def _no_gradient(name: str, *tensors) -> None:
    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors):
        raise ValueError(f"{name}: no gradient through a scaled product (scale_a, scale_b, out_dtype: fp8 / int8 "
                         f"forward only); call under torch.no_grad() or detach the inputs")


def _scale_rows(scale_a, x, dim: int, name: str):
    """``scale_a`` as the local product takes it: None or one number as given, one per row of x
    ((..., 1) like x but its last dim) flattened as x's rows are (`_rows`)."""
    if scale_a is None or not isinstance(scale_a, torch.Tensor) or scale_a.dim() == 0:
        return scale_a
    if tuple(scale_a.shape) != tuple(x.shape[:-1]) + (1,):
        raise ValueError(f"{name}: scale_a must be one number or one per row of x, shape "
                         f"{tuple(x.shape[:-1]) + (1,)}; got {tuple(scale_a.shape)}")
    if scale_a.device != x.device:
        raise ValueError(f"{name}: scale_a is on {scale_a.device}, x on {x.device}")
    return _rows(scale_a, dim)[0]


def _torch_dtype(dtype):
    """``out_dtype`` as a torch dtype (a torch dtype or its name)."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    found = getattr(torch, str(dtype), None)
    if not isinstance(found, torch.dtype):
        raise ValueError(f"out_dtype: expected a torch dtype or its name, got {dtype!r}")
    return found


def _check_strategy(strategy) -> None:
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy: expected one of {STRATEGIES}, got {strategy!r}")


def _rows(x, dim: int):
    """x with ``dim`` first, flattened to rows (rows of one index of ``dim`` consecutive)."""
    if x.dim() == 2:        # rows already (dim 0): no view to make
        return x, ()
    moved = x.movedim(dim, 0)
    return moved.reshape(-1, x.shape[-1]), moved.shape[1:-1]


def _unrows(y, dim: int, rest, n: int):
    if not rest and dim == 0:
        return y
    return y.reshape(-1, *rest, n).movedim(0, dim)


def _gather_blocks(x, dim: int, shard_sizes, group, world: int) -> Blocks:
    """Blocks of rows per rank: ``shard_sizes`` given, else this rank's size exchanged with the group's."""
    if shard_sizes is None:
        mine = torch.tensor([x.shape[dim]], dtype=torch.int64, device=x.device)
        every = mine.new_empty(world)
        all_gather_rows_into(every, mine, group=group)
        shard_sizes = [int(s) for s in every.tolist()]
    return blocks_of(shard_sizes, world)


class _Options:
    """What a call fixes besides its tensors (kept for the backward)."""

    def __init__(self, group, rank, strategy, engine, timeout, blocks, per_row, return_gathered=False):
        self.group, self.rank, self.strategy, self.engine = group, rank, strategy, engine
        self.timeout, self.blocks, self.per_row = timeout, blocks, per_row
        self.return_gathered = return_gathered
        #: scale_a (per row of the whole x, or one number), scale_b, out_dtype: fp8 / int8, forward only.
        self.scale_a = self.scale_b = self.out_dtype = None

    def product(self, x, w, bias=None, scaled: bool = False) -> Product:
        """The local product of ``x``'s device: ``@ w (+ bias)``, with the call's scales where ``scaled``."""
        eng = engine_for(x.device, self.engine)
        if not scaled:
            return Product(eng, w, bias)
        return Product(eng, w, bias, self.scale_a, self.scale_b, self.out_dtype)

    def row_blocks(self) -> Blocks:
        if self.per_row == 1:
            return self.blocks
        return Blocks(tuple(s * self.per_row for s in self.blocks.sizes))

    def pick(self, x, product: Product, kind: str) -> str:
        """The strategy of a call of ``kind`` on ``x`` by ``product``, from what every rank shares:
        the largest block's rows and the width it moves (x's K gathered, the product's N scattered)."""
        b = self.row_blocks()
        rows = max(b.sizes) if b.sizes else 0
        width, item = ((x.shape[1], x.element_size()) if kind == "gather" else
                       (product.w.shape[1], product.dtype(x).itemsize))
        return choose(self.strategy, x.device, rows * width * item, len(b.sizes), self.group)


def _detached(t):
    """``t`` out of autograd's graph as a plain tensor (a frozen ``nn.Parameter`` too: the engine's
    fast path takes plain tensors only); None, or a plain tensor outside the graph, as it is (a
    call's host time)."""
    return t.detach() if t is not None and (t.requires_grad or type(t) is not torch.Tensor) else t


def _gather_forward(x2, w, bias, opts, keep: bool):
    """(all-gathered x2 @ w (+ bias), the gathered x2 where ``keep`` or the strategy makes it)."""
    product = opts.product(x2, _detached(w), _detached(bias), scaled=True)
    return all_gather_matmul_2d(_detached(x2), product, opts.row_blocks(), opts.group, opts.rank,
                                opts.pick(x2, product, "gather"), timeout=opts.timeout, gathered=keep)


def _scatter_forward(x2, w, bias, opts):
    """This rank's block of the reduce-scattered x2 @ w (+ bias, added once)."""
    product = opts.product(x2, _detached(w), _detached(bias), scaled=True)
    return matmul_reduce_scatter_2d(_detached(x2), product, opts.row_blocks(), opts.group, opts.rank,
                                    opts.pick(x2, product, "scatter"), timeout=opts.timeout)


def _needs_grad(*tensors) -> bool:
    """Whether autograd must record the call (outside it a call skips autograd.Function's cost, tens
    of microseconds of host time that a decode step's small products feel)."""
    if not torch.is_grad_enabled():
        return False
    for t in tensors:       # a loop, not any() over a generator: ~1 us a call less
        if t is not None and t.requires_grad:
            return True
    return False


class _AllGatherMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x2, w, bias, opts):
        # The gathered x: for w's gradient, or asked for (the peer strategy makes it only then).
        y, full = _gather_forward(x2, w, bias, opts, opts.return_gathered or ctx.needs_input_grad[1])
        ctx.save_for_backward(full, w)
        if full is not None:
            ctx.mark_non_differentiable(full)
        # No zeros made for the gathered x's gradient (it has none): a fill of the whole gathered
        # x per backward (21 us of a 5.3 ms MLP step on 2 H100s).
        ctx.set_materialize_grads(False)
        ctx.opts, ctx.has_bias = opts, bias is not None
        return y, full

    @staticmethod
    def backward(ctx, gy, gfull):
        full, w = ctx.saved_tensors
        opts = ctx.opts
        gx = gw = gbias = None
        if gy is None:      # y not used by what was differentiated
            return gx, gw, gbias, None
        gy = gy.contiguous()
        if ctx.needs_input_grad[0]:
            product = opts.product(gy, w.mT)
            gx = matmul_reduce_scatter_2d(gy, product, opts.row_blocks(), opts.group, opts.rank,
                                          opts.pick(gy, product, "scatter"), timeout=opts.timeout)
        if ctx.needs_input_grad[1]:
            gw = _weight_grad(full, gy, w, opts)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            gbias = gy.sum(0)
        return gx, gw, gbias, None


class _MatmulReduceScatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x2, w, bias, opts):
        y = _scatter_forward(x2, w, bias, opts)
        ctx.save_for_backward(x2, w)
        ctx.opts, ctx.has_bias = opts, bias is not None
        return y

    @staticmethod
    def backward(ctx, gy):
        x2, w = ctx.saved_tensors
        opts = ctx.opts
        gy = gy.contiguous()
        product = opts.product(gy, w.mT)
        gx, gfull = all_gather_matmul_2d(gy, product, opts.row_blocks(), opts.group, opts.rank,
                                         opts.pick(gy, product, "gather"), timeout=opts.timeout,
                                         gathered=ctx.needs_input_grad[1])
        gw = _weight_grad(x2, gfull, w, opts) if ctx.needs_input_grad[1] else None
        gbias = None
        if ctx.has_bias and ctx.needs_input_grad[2]:
            # Every rank adds the bias to its rows: its gradient is the sum over all the rows.
            gbias = gy.sum(0)
            dist.all_reduce(gbias, group=opts.group)
        return (gx if ctx.needs_input_grad[0] else None), gw, gbias, None


def _weight_grad(a, g, w, opts):
    """``a^T @ g`` by the engine, in w's layout (a column-major w, a linear layer's ``weight.mT``,
    gets a column-major gradient) and dtype."""
    eng = engine_for(a.device, opts.engine)
    if w.stride(0) == 1 and w.stride(1) != 1:
        return eng.compute(g.mT, a).mT.to(w.dtype)
    return eng.compute(a.mT, g).to(w.dtype)


def all_gather_matmul(x_shard, w, group=None, gather_dim: int = 0, *, bias=None, shard_sizes=None,
                      strategy: str = "auto", engine=None, timeout=DEFAULT_TIMEOUT, return_gathered: bool = False,
                      scale_a=None, scale_b=None, out_dtype=None):
    """``concat(every rank's x_shard along gather_dim) @ w (+ bias)`` on every rank of ``group``.

    ``x_shard``: (..., K), this rank's shard along ``gather_dim`` (any dim but the last); ``w``: (K, N),
    the same shape on every rank (any layout: ``weight.mT`` of a linear layer reads in place).
    ``shard_sizes``: every rank's size along ``gather_dim`` (None: exchanged, one small collective).
    ``strategy``: "sequential" (all-gather, then one GEMM), "peer" (CUDA, one host: each block pushed
    into the peers' memory by the copy engines, this rank's block's GEMM at once and each other's
    as its flag arrives: peer.py), "overlap" (a ring: this rank's block's
    GEMM at once, each other block's as it arrives, into its rows of the output) or "auto".
    ``engine``: the engine of x's device (default: one per CUDA device, the default engine on CPU).
    ``timeout``: seconds a rank waits for a block (gloo; NCCL: the group's own timeout) before a
    TimeoutError (the peer strategy: its waiting kernel stops the CUDA context, saying which rank's
    block did not arrive). ``return_gathered``: also return the gathered x (as torch's fused op does).
    ``scale_a``, ``scale_b``, ``out_dtype``: fp8 / int8 operands' scales as the dense path takes
    them (``scale_a`` one number or one per row of x_shard: (..., 1), gathered with the rows;
    ``scale_b`` a number or one per column of w) and the result's dtype; no gradient through them.
    Differentiable in x_shard, w and bias. With ``gather_dim`` other than 0 the shard is copied with
    that dim first, and the result is a view with it moved back. DTensors on a 1-D mesh: x sharded
    along gather_dim, w sharded by columns (a sharded result) or replicated (a replicated one):
    dtensor.py."""
    if is_dtensor(x_shard) or is_dtensor(w) or is_dtensor(bias):
        return dtensor_all_gather_matmul(
            all_gather_matmul, x_shard, w, group, gather_dim, bias=bias, shard_sizes=shard_sizes, strategy=strategy,
            engine=engine, timeout=timeout, return_gathered=return_gathered, scale_a=scale_a, scale_b=scale_b,
            out_dtype=out_dtype)
    dim = _check(x_shard, w, gather_dim, "all_gather_matmul", "gather_dim")
    _check_strategy(strategy)
    rank, world = group_ranks(group)
    blocks = _gather_blocks(x_shard, dim, shard_sizes, group, world)
    if blocks.sizes[rank] != x_shard.shape[dim]:
        raise ValueError(f"all_gather_matmul: shard_sizes[{rank}] = {blocks.sizes[rank]} but x_shard has "
                         f"{x_shard.shape[dim]} along gather_dim={gather_dim}")
    x2, rest = _rows(x_shard, dim)
    per_row = 1
    for s in rest:
        per_row *= s
    opts = _Options(group, rank, strategy, engine, seconds(timeout), blocks, per_row, return_gathered)
    if scale_a is not None or scale_b is not None or out_dtype is not None:
        _no_gradient("all_gather_matmul", x_shard, w, bias)
        sa = _scale_rows(scale_a, x_shard, dim, "all_gather_matmul")
        if isinstance(sa, torch.Tensor) and sa.dim() == 2:
            sa = gather_rows(sa.contiguous(), opts.row_blocks(), group, rank)
        opts.scale_a, opts.scale_b, opts.out_dtype = sa, scale_b, _torch_dtype(out_dtype)
    if _needs_grad(x2, w, bias):
        y2, full = _AllGatherMatmul.apply(x2, w, bias, opts)
    else:       # nothing to record: no grad mode to enter (its 2-3 us of host time a call)
        y2, full = _gather_forward(x2, w, bias, opts, return_gathered)
    y = _unrows(y2, dim, rest, w.shape[1])
    return (y, _unrows(full, dim, rest, w.shape[0])) if return_gathered else y


def matmul_reduce_scatter(x, w, group=None, scatter_dim: int = 0, *, bias=None, shard_sizes=None,
                          strategy: str = "auto", engine=None, timeout=DEFAULT_TIMEOUT, scale_a=None, scale_b=None,
                          out_dtype=None):
    """This rank's shard along ``scatter_dim`` of the sum over ``group`` of ``x @ w`` (``+ bias``).

    Each rank passes its slice of the contraction: ``x`` (..., K_r) and ``w`` (K_r, N); ``bias`` (N,),
    the same on every rank, is added once to the sum (in the epilogue of the GEMM that makes this
    rank's rows where the strategy has one: a row-parallel layer's bias). ``shard_sizes``:
    every rank's size along ``scatter_dim`` (None: equal shards; ValueError where they do not divide).
    ``strategy``, ``engine``, ``timeout``, ``scale_a`` (one per row of x: (..., 1)), ``scale_b``,
    ``out_dtype``: as `all_gather_matmul`'s; the partial sums are added in the result's dtype.
    Differentiable in x and w (without scales). DTensors on a 1-D mesh (x sharded along its last
    dim, w along its first) give a DTensor sharded along scatter_dim (dtensor.py)."""
    if is_dtensor(x) or is_dtensor(w):
        if bias is not None:
            raise ValueError("matmul_reduce_scatter: bias with DTensor arguments is not supported; add it to "
                             "the result")
        return dtensor_matmul_reduce_scatter(
            matmul_reduce_scatter, x, w, group, scatter_dim, shard_sizes=shard_sizes, strategy=strategy,
            engine=engine, timeout=timeout, scale_a=scale_a, scale_b=scale_b, out_dtype=out_dtype)
    dim = _check(x, w, scatter_dim, "matmul_reduce_scatter", "scatter_dim")
    _check_bias(bias, w, x, "matmul_reduce_scatter")
    _check_strategy(strategy)
    rank, world = group_ranks(group)
    blocks = (even_blocks(x.shape[dim], world, f"matmul_reduce_scatter: x's dim {scatter_dim} (scatter_dim)")
              if shard_sizes is None else blocks_of(shard_sizes, world))
    if blocks.total != x.shape[dim]:
        raise ValueError(f"matmul_reduce_scatter: shard_sizes sum to {blocks.total} but x has {x.shape[dim]} "
                         f"along scatter_dim={scatter_dim}")
    x2, rest = _rows(x, dim)
    per_row = 1
    for s in rest:
        per_row *= s
    opts = _Options(group, rank, strategy, engine, seconds(timeout), blocks, per_row)
    if scale_a is not None or scale_b is not None or out_dtype is not None:
        _no_gradient("matmul_reduce_scatter", x, w, bias)
        opts.scale_a = _scale_rows(scale_a, x, dim, "matmul_reduce_scatter")
        opts.scale_b, opts.out_dtype = scale_b, _torch_dtype(out_dtype)
    if _needs_grad(x2, w, bias):
        y2 = _MatmulReduceScatter.apply(x2, w, bias, opts)
    else:
        y2 = _scatter_forward(x2, w, bias, opts)
    return _unrows(y2, dim, rest, w.shape[1])
