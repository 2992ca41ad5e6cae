"""A small pre-norm transformer block (attention projections and a SwiGLU MLP), in torch's modules
and in the engine's: what the training-parity test and the benchmark (bench/torch_op.py) train.

`Block` is written with nn.Linear only (torch's reference); `engine_block` turns a copy of one into
the engine's: the attention projections and the MLP's down projection become `Linear` (through
`replace_linear`), the MLP's gate and up projections one fused `SwiGLU` (interleaved copies of
their weights). Both then compute the same function from the same parameters, so two copies
trained on the same data must follow the same loss curve.
"""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from .modules import SwiGLU, replace_linear


class GatedMLP(nn.Module):
    """``down(silu(gate(x)) * up(x))``: torch's reference of the SwiGLU MLP."""

    def __init__(self, dim: int, hidden: int, device=None, dtype=None):
        super().__init__()
        kw = dict(bias=False, device=device, dtype=dtype)
        self.gate, self.up = nn.Linear(dim, hidden, **kw), nn.Linear(dim, hidden, **kw)
        self.down = nn.Linear(hidden, dim, **kw)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class FusedMLP(nn.Module):
    """The same MLP with the gate and up projections in one `SwiGLU`."""

    def __init__(self, mlp: GatedMLP):
        super().__init__()
        self.up = SwiGLU.from_linears(mlp.gate, mlp.up)
        self.down = mlp.down

    def forward(self, x):
        return self.down(self.up(x))


class Block(nn.Module):
    """x + attention(norm(x)), then + mlp(norm(x)): causal multi-head attention (torch's SDPA) between
    a fused qkv projection and an output projection, a SwiGLU MLP; RMSNorm before each."""

    def __init__(self, dim: int, heads: int, hidden: int, device=None, dtype=None):
        super().__init__()
        if dim % heads:
            raise ValueError(f"Block: dim {dim} is not a multiple of heads {heads}")
        kw = dict(device=device, dtype=dtype)
        self.heads = heads
        self.norm1, self.norm2 = nn.RMSNorm(dim, **kw), nn.RMSNorm(dim, **kw)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False, **kw)
        self.proj = nn.Linear(dim, dim, bias=False, **kw)
        self.mlp = GatedMLP(dim, hidden, **kw)

    def forward(self, x):
        batch, tokens, dim = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(batch, tokens, 3, self.heads, dim // self.heads).unbind(2)
        att = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(batch, tokens, dim))
        return x + self.mlp(self.norm2(x))


def engine_block(block: Block) -> Block:
    """A copy of ``block`` computing with the engine's modules (see the module docstring)."""
    new = copy.deepcopy(block)
    new.mlp = FusedMLP(new.mlp)
    return replace_linear(new)


def train(block: nn.Module, data, steps: int, lr: float = 1e-3) -> list[float]:
    """``steps`` AdamW steps of a regression of ``block(x)`` onto ``y``, ``data``: (x, y); the losses."""
    x, y = data
    opt = torch.optim.AdamW(block.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(block(x).float(), y.float())
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses
