"""`ColumnParallelLinear` and `RowParallelLinear`: nn.Linear split over a process group, every local
GEMM the engine's, forward and backward (Megatron-LM's tensor parallelism).

A column-parallel layer holds ``out_features / P`` rows of the weight (and of the bias); a
row-parallel one ``in_features / P`` columns and the whole bias. Paired (column then row, the MLP),
the activations between them stay sharded by features. With ``sequence_parallel`` (the default) the
activations outside the pair are sharded by sequence (dim 0 of x: rows, or (S, B, ...)): the
column layer's input is all-gathered into its GEMM (`all_gather_matmul`) and the row layer's output
reduce-scattered out of its GEMM (`matmul_reduce_scatter`); without it they are replicated (the
column layer's input gradient and the row layer's output all-reduced).
"""
from __future__ import annotations

import functools
import math

import torch
import torch.distributed as dist
from torch import nn

from .api import all_gather_matmul, matmul_reduce_scatter
from .comm import DEFAULT_TIMEOUT, GradientMap, engine_for, group_ranks


def _split(features: int, world: int, label: str) -> int:
    if features % world:
        raise ValueError(f"{label}={features} does not split evenly over the group's {world} ranks")
    return features // world


def _all_reduced(g, group):
    """``g`` summed over the group (a replicated input's gradient)."""
    g = g.contiguous().clone()
    dist.all_reduce(g, group=group)
    return g


class _AllReduce(torch.autograd.Function):
    """The sum over the group forward; the gradient as it is (each rank's partial sum's)."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.contiguous().clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, g):
        return g, None


class _Parallel(nn.Module):
    def _setup(self, group, strategy, engine, timeout, sequence_parallel):
        self.group, self.strategy, self.engine, self.timeout = group, strategy, engine, timeout
        self.sequence_parallel = sequence_parallel
        self.rank, self.world = group_ranks(group)

    def _options(self) -> dict:
        return dict(group=self.group, strategy=self.strategy, engine=self.engine, timeout=self.timeout)


class ColumnParallelLinear(_Parallel):
    """``x @ W_r.T + b_r``: this rank's ``out_features / P`` output features. Input: this rank's
    sequence shard (``sequence_parallel``; ``shard_sizes`` as `all_gather_matmul`'s, None: every
    rank's equals this one's) or the whole x (replicated); output: every row, this rank's features."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, group=None, *,
                 sequence_parallel: bool = True, strategy: str = "auto", engine=None, timeout=DEFAULT_TIMEOUT,
                 device=None, dtype=None):
        super().__init__()
        self._setup(group, strategy, engine, timeout, sequence_parallel)
        self.in_features, self.out_features = in_features, out_features
        local = _split(out_features, self.world, "ColumnParallelLinear: out_features")
        kw = dict(device=device, dtype=dtype)
        self.weight = nn.Parameter(torch.empty(local, in_features, **kw))
        self.bias = nn.Parameter(torch.empty(local, **kw)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x, shard_sizes=None):
        if self.sequence_parallel:
            if shard_sizes is None:
                shard_sizes = [x.shape[0]] * self.world
            return all_gather_matmul(x, self.weight.mT, bias=self.bias, shard_sizes=shard_sizes, **self._options())
        x = GradientMap.apply(x, functools.partial(_all_reduced, group=self.group))
        lead = x.shape[:-1]
        eng = engine_for(x.device, self.engine)
        y = eng.matmul(x.reshape(-1, x.shape[-1]), self.weight.mT, bias=self.bias)
        return y.reshape(*lead, y.shape[-1])

    @classmethod
    def from_linear(cls, linear: nn.Linear, group=None, **kw) -> "ColumnParallelLinear":
        """This rank's part of ``linear`` (its weight's and bias's rows), copied."""
        new = cls(linear.in_features, linear.out_features, linear.bias is not None, group,
                  device=linear.weight.device, dtype=linear.weight.dtype, **kw)
        rows = slice(new.rank * new.weight.shape[0], (new.rank + 1) * new.weight.shape[0])
        with torch.no_grad():
            new.weight.copy_(linear.weight[rows])
            if new.bias is not None:
                new.bias.copy_(linear.bias[rows])
        return new

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features} ({self.weight.shape[0]} here), "
                f"bias={self.bias is not None}, sequence_parallel={self.sequence_parallel}")


class RowParallelLinear(_Parallel):
    """``sum over ranks of x_r @ W_r.T + b``: the input is this rank's ``in_features / P`` features
    (a column-parallel layer's output); the output this rank's sequence shard (``sequence_parallel``:
    equal shards of dim 0, or ``shard_sizes``) or every row (all-reduced)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, group=None, *,
                 sequence_parallel: bool = True, strategy: str = "auto", engine=None, timeout=DEFAULT_TIMEOUT,
                 device=None, dtype=None):
        super().__init__()
        self._setup(group, strategy, engine, timeout, sequence_parallel)
        self.in_features, self.out_features = in_features, out_features
        local = _split(in_features, self.world, "RowParallelLinear: in_features")
        kw = dict(device=device, dtype=dtype)
        self.weight = nn.Parameter(torch.empty(out_features, local, **kw))
        self.bias = nn.Parameter(torch.empty(out_features, **kw)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # nn.Linear's bounds for the whole layer (they depend on in_features, not on the shard).
        bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
        nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x, shard_sizes=None):
        if self.sequence_parallel:
            # The bias added once, in the epilogue of the GEMM making this rank's rows (its gradient
            # summed over the group: every rank adds it to its rows only).
            return matmul_reduce_scatter(x, self.weight.mT, bias=self.bias, shard_sizes=shard_sizes,
                                         **self._options())
        lead = x.shape[:-1]
        eng = engine_for(x.device, self.engine)
        y = eng.matmul(x.reshape(-1, x.shape[-1]), self.weight.mT)
        y = _AllReduce.apply(y.reshape(*lead, y.shape[-1]), self.group)
        return y if self.bias is None else y + self.bias

    @classmethod
    def from_linear(cls, linear: nn.Linear, group=None, **kw) -> "RowParallelLinear":
        """This rank's part of ``linear`` (its weight's columns; the whole bias), copied."""
        new = cls(linear.in_features, linear.out_features, linear.bias is not None, group,
                  device=linear.weight.device, dtype=linear.weight.dtype, **kw)
        cols = slice(new.rank * new.weight.shape[1], (new.rank + 1) * new.weight.shape[1])
        with torch.no_grad():
            new.weight.copy_(linear.weight[:, cols])
            if new.bias is not None:
                new.bias.copy_(linear.bias)
        return new

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features} ({self.weight.shape[1]} here), out_features={self.out_features}, "
                f"bias={self.bias is not None}, sequence_parallel={self.sequence_parallel}")
