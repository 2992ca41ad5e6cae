"""Activations a fused epilogue applies to each output element, one small class each.

An activation renders a C expression of one variable (the pre-activation value, already in a
local, so it may appear several times) through a `Math` helper that spells functions and literals
for the dialect and compute type. Adding one is a subclass plus `@register_activation`; no template
changes. The numpy reference for each lives in ``reference`` so tests check every registered one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..codegen.dialect import Dialect
from ..compose.registry import Registry


@dataclass(frozen=True)
class Math:
    """Function names and literals of one dialect and compute word ("f32" / "f64")."""

    dialect: Dialect
    word: str

    def call(self, fn: str, *args: str) -> str:
        return f"{self.dialect.math(fn, self.word)}({', '.join(args)})"

    def lit(self, value: float) -> str:
        return self.dialect.literal(value, self.word)


class Activation:
    """A function applied to each output element after ``alpha * (a @ b) + beta * c + bias``,
    inside the kernel (``matmul(..., activation=...)`` takes an instance, a subclass or a
    registered name).

    A subclass sets ``name`` and defines `render` (the C expression, spelled through `Math` so one
    definition serves CUDA and OpenCL, float32 and float64) and `reference` (the same function in
    numpy, which the tests check every registered activation against). Fields an instance keeps
    (e.g. a slope) become part of the kernel: equal activations share compiled kernels. Decorate
    with `register_activation` to make it reachable by name.
    """

    name: ClassVar[str] = "activation"

    # Equal activations render equal code: compare by type and fields, so a fresh instance per
    # call still hits the compiled-kernel caches.
    def __eq__(self, other):
        return type(self) is type(other) and vars(self) == vars(other)

    def __hash__(self):
        return hash((type(self), _frozen(vars(self))))

    def __repr__(self):
        return self.name

    def render(self, x: str, m: Math) -> str:
        """C expression of the activation of variable ``x``."""
        raise NotImplementedError

    def reference(self, x: np.ndarray) -> np.ndarray:
        """The same function in numpy (float64), for tests."""
        raise NotImplementedError


def _frozen(value):
    """A hashable stand-in for a field's value (lists, dicts and arrays by their contents)."""
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, np.ndarray):
        return (value.shape, tuple(value.ravel().tolist()))
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


ACTIVATIONS: Registry = Registry("activation")


def register_activation(cls: type[Activation] | None = None, *, replace: bool = False):
    """Class decorator (also as ``@register_activation(replace=True)``): make an activation reachable
    by name in ``matmul(..., activation=name)``. A taken name (a built-in such as "relu" too) is
    refused unless ``replace``: the name's meaning would change for the whole process."""
    def apply(cls):
        if not (isinstance(cls, type) and issubclass(cls, Activation)):
            raise TypeError(f"register_activation: expected an Activation subclass, got {cls!r}")
        return ACTIVATIONS.register(cls.name, cls, replace)
    return apply if cls is None else apply(cls)


def resolve_activation(activation) -> Activation | None:
    if activation is None:
        return None
    if isinstance(activation, Activation):
        return activation
    if isinstance(activation, type) and issubclass(activation, Activation):
        return activation()
    if isinstance(activation, str) and activation in ACTIVATIONS:
        return ACTIVATIONS[activation]()
    raise ValueError(f"activation: expected None, an Activation or one of {sorted(ACTIVATIONS)}, "
                     f"got {activation!r}")


@register_activation
class Relu(Activation):
    name = "relu"

    def render(self, x, m):
        # Written so NaN passes through (NaN < 0 is false), as numpy.maximum(x, 0) does.
        return f"({x} < {m.lit(0)} ? {m.lit(0)} : {x})"

    def reference(self, x):
        return np.maximum(x, 0)


@register_activation
class Gelu(Activation):
    """The exact GELU, x * Phi(x), through erf."""

    name = "gelu"

    def render(self, x, m):
        return f"({m.lit(0.5)} * {x} * ({m.lit(1)} + {m.call('erf', f'{x} * {m.lit(math.sqrt(0.5))}')}))"

    def reference(self, x):
        erf = np.vectorize(math.erf, otypes=[np.float64])
        return 0.5 * x * (1 + erf(x * math.sqrt(0.5)))


@register_activation
class GeluTanh(Activation):
    """GELU's tanh approximation (PyTorch's approximate="tanh"): 0.5 x (1 + tanh(u)), rendered as
    x / (1 + exp(-2u)), the same function, because it saturates exactly: where u runs to -inf,
    exp gives inf and the result 0 on every backend, while 1 + tanh(u) is not exactly 0 on every
    one (PoCL's tanh stops one step short of -1: gelu_tanh(-1e30) was -3e22)."""

    name = "gelu_tanh"

    def render(self, x, m):
        inner = f"{m.lit(2 * math.sqrt(2 / math.pi))} * ({x} + {m.lit(0.044715)} * {x} * {x} * {x})"
        return f"({x} / ({m.lit(1)} + {m.call('exp', f'-({inner})')}))"

    def reference(self, x):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


@register_activation
class Sigmoid(Activation):
    name = "sigmoid"

    def render(self, x, m):
        return f"({m.lit(1)} / ({m.lit(1)} + {m.call('exp', f'-{x}')}))"

    def reference(self, x):
        with np.errstate(over="ignore"):
            return 1 / (1 + np.exp(-x))


@register_activation
class Silu(Activation):
    """x * sigmoid(x)."""

    name = "silu"

    def render(self, x, m):
        return f"({x} / ({m.lit(1)} + {m.call('exp', f'-{x}')}))"

    def reference(self, x):
        with np.errstate(over="ignore"):
            return x / (1 + np.exp(-x))


@register_activation
class Tanh(Activation):
    name = "tanh"

    def render(self, x, m):
        return m.call("tanh", x)

    def reference(self, x):
        return np.tanh(x)
