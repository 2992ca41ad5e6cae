"""Drop-in modules: `Linear` (nn.Linear's parameters, layout and state_dict keys, with a fused bias
and activation), `replace_linear`, and `SwiGLU`, the fused gate/up projection of a gated MLP.

Each forward is one engine GEMM (``x @ weight.T``: the weight read in place as a column-major
operand) with its epilogue fused; leading axes of ``x`` are flattened into M (a view where x's
strides allow), as F.linear does. Gradients: gemm_engine/torch/autograd.py.

`SwiGLU` keeps the gate and up projections in one weight of ``2 * hidden`` rows, interleaved (row
2j the gate's j-th, 2j + 1 the up projection's), so that the gated epilogue finds each pair in one
unit's accumulators (global_/write/pairs.py): one GEMM, ``silu(g) * u`` in the epilogue, only the
``hidden`` results written. Where a gradient is wanted it writes both products instead and gates
them with torch's elementwise ops, whose backward needs no second GEMM (`TRAINING_GATES`; gated.py
lays the products out for those ops and the backward GEMMs). `SwiGLU.from_linears` builds one from
two nn.Linear; `gate_up` gives the two projections' weights back (views).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from ..api import matmul
from ..epilogue.activations import resolve_activation
from .gated import gated_projection
from .gates import GATES, activated


def linear(x, weight, bias=None, activation=None):
    """``activation(x @ weight.T + bias)`` by one engine GEMM (F.linear with a fused epilogue)."""
    lead = x.shape[:-1]
    flat = x.reshape(-1, x.shape[-1]) if x.dim() > 2 else x
    y = matmul(flat, weight.mT, bias=bias, activation=activation)
    return y.reshape(*lead, y.shape[-1]) if x.dim() > 2 else y


class Linear(nn.Linear):
    """nn.Linear computed by the engine, with an optional fused ``activation`` (a name or an
    `Activation`; gated ones belong to `SwiGLU`). Same parameters, initialization, layout
    (``weight``: out_features x in_features) and state_dict keys as nn.Linear."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, activation=None, device=None,
                 dtype=None):
        super().__init__(in_features, out_features, bias, device, dtype)
        act = resolve_activation(activation)
        if act is not None and act.arity != 1:
            raise ValueError(f"Linear: activation {act!r} pairs output columns; use gemm_engine.torch.SwiGLU")
        self.activation = activation

    def forward(self, x):
        return linear(x, self.weight, self.bias, self.activation)

    def extra_repr(self) -> str:
        act = "" if self.activation is None else f", activation={self.activation!r}"
        return super().extra_repr() + act

    @classmethod
    def from_linear(cls, module: nn.Linear, activation=None) -> "Linear":
        """A `Linear` sharing ``module``'s parameters (optimizers holding them keep working)."""
        new = cls.__new__(cls)
        nn.Module.__init__(new)
        new.in_features, new.out_features = module.in_features, module.out_features
        new.weight = module.weight
        new.bias = module.bias
        new.activation = activation
        new.train(module.training)
        return new


def replace_linear(module: nn.Module) -> nn.Module:
    """Swap every nn.Linear inside ``module`` for a `Linear` sharing its parameters, in place, and
    return ``module`` (a `Linear` for a bare nn.Linear)."""
    if type(module) is nn.Linear:
        return Linear.from_linear(module)
    for name, child in module.named_children():
        if type(child) is nn.Linear:
            setattr(module, name, Linear.from_linear(child))
        else:
            replace_linear(child)
    return module


#: The built-in gated activations' gates as torch functions: `SwiGLU`'s training path.
TRAINING_GATES = {name: entry[0] for name, entry in GATES.items()}


class SwiGLU(nn.Module):
    """``gate(x @ Wg.T + bg) * (x @ Wu.T + bu)`` (silu for SwiGLU, ``activation`` for another gated
    one: "geglu", "reglu") by one GEMM over the interleaved weight (see the module docstring)."""

    def __init__(self, in_features: int, hidden_features: int, bias: bool = False, activation="swiglu",
                 device=None, dtype=None):
        super().__init__()
        act = resolve_activation(activation)
        if act is None or act.arity != 2:
            raise ValueError(f"SwiGLU: activation must be a gated one (swiglu, geglu, reglu), got {activation!r}")
        self.in_features, self.hidden_features, self.activation = in_features, hidden_features, activation
        kw = dict(device=device, dtype=dtype)
        self.weight = nn.Parameter(torch.empty(2 * hidden_features, in_features, **kw))
        self.bias = nn.Parameter(torch.empty(2 * hidden_features, **kw)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """nn.Linear's initialization of each projection (it depends on in_features only)."""
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        gated = isinstance(self.activation, str) and self.activation in TRAINING_GATES
        if gated and torch.is_grad_enabled() and any(
                t is not None and t.requires_grad for t in (x, self.weight, self.bias)):
            # Training: the products kept for the backward (as torch's mm + silu + mul keep them).
            # The fused epilogue's backward recomputes the whole up-projection GEMM, more than the
            # two elementwise passes it saves (the H100 block: 0.87x torch's step); gated.py says
            # how the products are laid out for torch's elementwise kernels and the backward GEMMs.
            if not torch.is_autocast_enabled(x.device.type):
                return gated_projection(x, self.weight, self.bias, self.activation)
            z = linear(x, self.weight, self.bias)      # autocast: torch's ops cast z's halves
            return activated(z, None, self.activation)
        return linear(x, self.weight, self.bias, self.activation)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, hidden_features={self.hidden_features}, "
                f"bias={self.bias is not None}, activation={self.activation!r}")

    def gate_up(self) -> tuple:
        """(gate weight, up weight), each hidden x in: views of the interleaved weight's rows."""
        return self.weight[0::2], self.weight[1::2]

    @classmethod
    def from_linears(cls, gate: nn.Linear, up: nn.Linear, activation="swiglu") -> "SwiGLU":
        """A `SwiGLU` holding copies of the two projections' parameters, interleaved."""
        if gate.weight.shape != up.weight.shape or (gate.bias is None) != (up.bias is None):
            raise ValueError(f"SwiGLU.from_linears: gate and up differ ({gate} against {up})")
        hidden, features = gate.weight.shape
        new = cls(features, hidden, gate.bias is not None, activation, gate.weight.device, gate.weight.dtype)
        with torch.no_grad():
            new.weight.copy_(torch.stack((gate.weight, up.weight), dim=1).reshape(2 * hidden, features))
            if new.bias is not None:
                new.bias.copy_(torch.stack((gate.bias, up.bias), dim=1).reshape(2 * hidden))
        return new
