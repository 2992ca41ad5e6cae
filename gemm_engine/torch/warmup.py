"""The linear layers of a torch model, as `warmup` compiles them (gemm_engine/compile_ahead.py)."""
from __future__ import annotations

from torch import nn

from .modules import TRAINING_GATES, SwiGLU


def model_layers(model: nn.Module, training: bool = False) -> tuple[list[tuple], object, bool]:
    """(the distinct (in_features, out_features, bias, activation, gated_products) of ``model``'s nn.Linear, `Linear`
    and `SwiGLU` modules (compile_ahead.py's `LinearShape` fields), the dtype of their weights: the
    first one's, None without any; whether it lies on the CPU). ``training``: as a training step
    runs them (a `SwiGLU` with a built-in gate: its two products, gated by torch: gated.py)."""
    layers, dtype, host = [], None, True
    for module in model.modules():
        if isinstance(module, nn.Linear):
            shape = (module.in_features, module.out_features, module.bias is not None,
                     getattr(module, "activation", None), False)
        elif isinstance(module, SwiGLU):
            gated = training and isinstance(module.activation, str) and module.activation in TRAINING_GATES
            shape = (module.in_features, 2 * module.hidden_features, module.bias is not None,
                     None if gated else module.activation, gated)
        else:
            continue
        if dtype is None:
            dtype, host = module.weight.dtype, module.weight.device.type == "cpu"
        layers.append(shape)
    return list(dict.fromkeys(layers)), dtype, host
