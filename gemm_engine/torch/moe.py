"""A mixture-of-experts feed-forward layer on the engine's grouped products: `Experts` (every
expert's SwiGLU MLP over tokens sorted by expert) and `MoE` (a top-k router in front of them).

Per expert e, ``down_e(gate(x up_g,e^T) * (x up_u,e^T))``; `Experts` holds the up projections as
one (experts, 2 ffn, hidden) parameter, the gate and up rows interleaved (row 2j: gate j, 2j + 1:
up j, as `SwiGLU` keeps them: `from_weights` interleaves Mixtral's w1 / w3), and the down
projections as (experts, hidden, ffn). Its forward is two grouped products
(`gemm_engine.grouped_matmul`, contiguous layout):

* up: gate and up of every token's expert in one launch, the gate in the epilogue (only the ffn
  gated values written);
* down: the routing weight of each (token, expert) pair applied in the epilogue (``row_scale``).

`Experts.quantized` gives the same experts with quantized weights (`QuantizedExpertMLPs`: int4 /
int8 / fp8 codes read by the quantized grouped kernels, for inference); `MoE.experts` takes either.

`MoE` routes: the router's logits, the top ``top_k`` experts of each token and the softmax of their
logits (Mixtral's), the (token, expert) pairs sorted by expert (a stable sort), each expert's count
by a scatter-add and the end offsets by a cumulative sum, the tokens gathered in that order, and
the experts' results put back in token order and summed per token (a gather: deterministic, no
atomics). Everything stays on the device: no host synchronization, so a step captures in a CUDA
graph, and every op has a static shape, so ``torch.compile(fullgraph=True)`` traces it. Gradients
flow to the tokens, the router (through the routing weights) and both projections: torch/grouped.py's
formulas. In training the up projection keeps its pre-activation for the gate's gradient (the gate
then by torch's kernels, as torch's layers run it); without grad the gate is the GEMM's epilogue.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from ..api import grouped_matmul
from ..quant import QuantizedExperts, quantize
from .gates import GATES, activated


class Experts(nn.Module):
    """``experts`` SwiGLU MLPs (hidden -> ffn -> hidden) over tokens sorted by expert (see the module
    docstring); ``forward(x, offsets, weights=None)``: x (T, hidden) sorted by expert, offsets (E,)
    int32 end offsets on x's device, weights (T,) a routing weight per row, or None."""

    def __init__(self, experts: int, hidden: int, ffn: int, activation: str = "swiglu", device=None, dtype=None):
        super().__init__()
        self.experts, self.hidden, self.ffn, self.activation = experts, hidden, ffn, activation
        kw = dict(device=device, dtype=dtype)
        self.up = nn.Parameter(torch.empty(experts, 2 * ffn, hidden, **kw))
        self.down = nn.Parameter(torch.empty(experts, hidden, ffn, **kw))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """nn.Linear's initialization of each expert's projections (uniform in +-1/sqrt(fan_in) after
        kaiming's a = sqrt(5), which is the same bound)."""
        for p, fan_in in ((self.up, self.hidden), (self.down, self.ffn)):
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            nn.init.uniform_(p, -bound, bound)

    @classmethod
    def from_weights(cls, gate, up, down, activation: str = "swiglu") -> "Experts":
        """Experts holding copies of per-expert weights as Mixtral stores them: ``gate`` (w1) and
        ``up`` (w3) (experts, ffn, hidden), ``down`` (w2) (experts, hidden, ffn)."""
        e, ffn, hidden = gate.shape
        if up.shape != gate.shape or down.shape != (e, hidden, ffn):
            raise ValueError(f"Experts.from_weights: gate {tuple(gate.shape)} and up {tuple(up.shape)} must be "
                             f"(experts, ffn, hidden) and down {tuple(down.shape)} (experts, hidden, ffn)")
        new = cls(e, hidden, ffn, activation, gate.device, gate.dtype)
        with torch.no_grad():
            new.up.copy_(torch.stack((gate, up), dim=2).reshape(e, 2 * ffn, hidden))
            new.down.copy_(down)
        return new

    def forward(self, x, offsets, weights=None):
        h = grouped_matmul(x, self.up.mT, offsets=offsets, activation=self.activation)
        return grouped_matmul(h, self.down.mT, offsets=offsets, row_scale=weights)

    def extra_repr(self) -> str:
        return f"experts={self.experts}, hidden={self.hidden}, ffn={self.ffn}, activation={self.activation!r}"

    def quantized(self, format: str = "int4", group_size=128, symmetric: bool = True) -> "QuantizedExpertMLPs":
        """These experts with their weights quantized (`gemm_engine.quantize`, prepacked), for
        inference: the same forward, the quantized grouped kernels reading the packed codes."""
        return QuantizedExpertMLPs(self, format, group_size, symmetric)


class QuantizedExpertMLPs(nn.Module):
    """`Experts` whose projections are `gemm_engine.QuantizedExperts` (int4 / int8 / fp8 codes with
    group scales; `Experts.quantized`): ``forward(x, offsets, weights=None)`` as `Experts`'s, the gate
    and routing weight in the epilogues as there. The codes take no gradient (x does: the weights
    expanded on the device for it, torch/dequantize.py). They are held as the engine's objects, not
    as buffers: the engine uploads them to a device on first use there; a state_dict holds none."""

    def __init__(self, experts: Experts, format: str, group_size, symmetric: bool):
        super().__init__()
        self.experts, self.hidden, self.ffn = experts.experts, experts.hidden, experts.ffn
        self.activation, self.format = experts.activation, format

        def packed(w):          # (experts, K, N) in matmul's b orientation, prepacked per expert
            q = quantize(w.detach().float().cpu().numpy().transpose(0, 2, 1), format, group_size, symmetric)
            return QuantizedExperts([q[e].prepack() for e in range(len(q))])
        self.up, self.down = packed(experts.up), packed(experts.down)

    def forward(self, x, offsets, weights=None):
        if self.activation in GATES:
            # The quantized kernels that stream codes fast (decode, register-operand wgmma) store
            # element by element, so a gated epilogue falls to the slow dequantizing loader (Mixtral
            # decode, int4: 2.68 ms fused against bf16's 0.76, bench/results/h200/moe_layer.md):
            # the up projection's product first, the gate by torch's kernels.
            h = activated(grouped_matmul(x, self.up, offsets=offsets), None, self.activation)
        else:
            h = grouped_matmul(x, self.up, offsets=offsets, activation=self.activation)
        return grouped_matmul(h, self.down, offsets=offsets, row_scale=weights)

    def extra_repr(self) -> str:
        return (f"experts={self.experts}, hidden={self.hidden}, ffn={self.ffn}, activation={self.activation!r}, "
                f"format={self.format}")


def route(logits, top_k: int):
    """(pairs, offsets, weights) of a top-k routing of ``logits`` (tokens, experts): the (token,
    expert) pairs in expert order, as indices ``token * top_k + slot``; each expert's end offset
    among them (int32); the pairs' routing weights in that order (the softmax of each token's top-k
    logits, float32)."""
    experts = logits.shape[-1]
    top, chosen = logits.topk(top_k, dim=-1)
    weights = top.float().softmax(-1).reshape(-1)
    sorted_experts, pairs = torch.sort(chosen.reshape(-1), stable=True)
    counts = torch.zeros(experts, dtype=torch.int64, device=logits.device).scatter_add_(
        0, sorted_experts, torch.ones_like(sorted_experts))
    return pairs, counts.cumsum(0).to(torch.int32), weights[pairs]


def combine(y, pairs, top_k: int):
    """The (tokens, ...) sums of each token's ``top_k`` results ``y``, which lie in `route`'s pair
    order: put back in token order (the pairs' inverse permutation) and summed, a gather and a sum,
    deterministic, where an index_add would add them by atomics."""
    inverse = torch.empty_like(pairs).scatter_(0, pairs, torch.arange(pairs.numel(), device=pairs.device))
    return y[inverse].unflatten(0, (-1, top_k)).sum(1)


class MoE(nn.Module):
    """A top-``top_k`` router in front of `Experts` (see the module docstring): ``forward(x)`` for x
    (..., hidden) returns the same shape."""

    def __init__(self, hidden: int, ffn: int, experts: int, top_k: int = 2, activation: str = "swiglu",
                 device=None, dtype=None):
        super().__init__()
        if not 1 <= top_k <= experts:
            raise ValueError(f"MoE: top_k must be between 1 and experts = {experts}, got {top_k}")
        self.top_k = top_k
        self.router = nn.Linear(hidden, experts, bias=False, device=device, dtype=dtype)
        self.experts = Experts(experts, hidden, ffn, activation, device=device, dtype=dtype)

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        pairs, offsets, weights = route(self.router(flat), self.top_k)
        y = self.experts(flat[pairs // self.top_k], offsets, weights)
        return combine(y, pairs, self.top_k).reshape(x.shape)
