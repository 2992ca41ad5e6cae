"""Activations a fused epilogue applies to each output element, one small class each.

An activation renders a C expression of one variable (the pre-activation value, already in a
local, so it may appear several times) through a `Math` helper that spells functions and literals
for the dialect and compute type. Adding one is a subclass plus `@register_activation`; no template
changes. The numpy reference for each lives in ``reference`` so tests check every registered one.

Derivatives (what backward passes need): `Activation.derivative` renders f'(x) the same way and
``reference_derivative`` is its numpy reference. The engine computes a gradient through the
activation as another fused epilogue: ``Derivative(f)`` applied to the recomputed pre-activation,
multiplied by the upstream gradient (the epilogue's ``mul`` term). An activation without a
derivative is refused by name where a gradient is asked for (`Derivative`).

Gated activations (`Gated`: SwiGLU, GeGLU, ReGLU) combine two output columns: ``out[:, j] =
gate(z[:, 2j]) * z[:, 2j + 1]``, the gate and up projections' columns interleaved in one GEMM, so
that each pair lies in one thread's accumulators (global_/write/pairs.py); the result has half the
columns. Their derivative (`Derivative` of one) writes both columns of each pair: ``u * gate'(g) *
dy`` and ``gate(g) * dy``.
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
    """Function names, division and literals of one dialect and compute word ("f32" / "f64");
    ``fast``: the result is rounded to 16 bits or fewer, so the dialect may use faster, less exact
    forms (`Dialect.math`, `Dialect.divide`)."""

    dialect: Dialect
    word: str
    fast: bool = False

    def call(self, fn: str, *args: str) -> str:
        return f"{self.dialect.math(fn, self.word, self.fast)}({', '.join(args)})"

    def div(self, a: str, b: str) -> str:
        return self.dialect.divide(a, b, self.word, self.fast)

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
    #: Output columns each result reads: 1 (elementwise) or 2 (`Gated`: a pair of columns).
    arity: ClassVar[int] = 1

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

    def derivative(self, x: str, m: Math) -> str:
        """C expression of the derivative f'(x) (for gradients; see `Derivative`). Optional: an
        activation without one computes forward passes only."""
        raise NotImplementedError

    def reference_derivative(self, x: np.ndarray) -> np.ndarray:
        """f'(x) in numpy (float64), for tests."""
        raise NotImplementedError

    @property
    def has_derivative(self) -> bool:
        return type(self).derivative is not Activation.derivative


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


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
    """An `Activation` instance from an instance, a subclass or a registered name (None: none)."""
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

    def derivative(self, x, m):
        return f"({x} > {m.lit(0)} ? {m.lit(1)} : {m.lit(0)})"   # 0 at 0, as torch's

    def reference_derivative(self, x):
        return np.where(x > 0, 1.0, 0.0)


@register_activation
class Gelu(Activation):
    """The exact GELU, x * Phi(x), through erf."""

    name = "gelu"

    def render(self, x, m):
        return f"({m.lit(0.5)} * {x} * ({m.lit(1)} + {m.call('erf', f'{x} * {m.lit(math.sqrt(0.5))}')}))"

    def reference(self, x):
        return 0.5 * x * (1 + _erf(x * math.sqrt(0.5)))

    def derivative(self, x, m):
        # Phi(x) + x phi(x); where x * x overflows exp gives 0, and x * 0 is 0 for finite x.
        return (f"({m.lit(0.5)} * ({m.lit(1)} + {m.call('erf', f'{x} * {m.lit(math.sqrt(0.5))}')}) + {x} * "
                f"{m.lit(1 / math.sqrt(2 * math.pi))} * {m.call('exp', f'{m.lit(-0.5)} * {x} * {x}')})")

    def reference_derivative(self, x):
        with np.errstate(over="ignore", invalid="ignore"):
            return 0.5 * (1 + _erf(x * math.sqrt(0.5))) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


@register_activation
class GeluTanh(Activation):
    """GELU's tanh approximation (PyTorch's approximate="tanh"): 0.5 x (1 + tanh(u)), rendered as
    x / (1 + exp(-2u)), the same function, because it saturates exactly: where u runs to -inf,
    exp gives inf and the result 0 on every backend, while 1 + tanh(u) is not exactly 0 on every
    one (PoCL's tanh stops one step short of -1: gelu_tanh(-1e30) was -3e22)."""

    name = "gelu_tanh"

    def render(self, x, m):
        inner = f"{m.lit(2 * math.sqrt(2 / math.pi))} * ({x} + {m.lit(0.044715)} * {x} * {x} * {x})"
        return m.div(x, f"({m.lit(1)} + {m.call('exp', f'-({inner})')})")

    def reference(self, x):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))

    #: Past this magnitude the derivative is 0 or 1 to double precision (and x^3 may overflow).
    SATURATED = 1e4

    def derivative(self, x, m):
        # x * s(2u) differentiated: s + x s (1 - s) 2u'; s(1 - s) as e / (1 + e)^2, e = exp(-|2u|).
        c = 2 * math.sqrt(2 / math.pi)
        u2 = f"{m.lit(c)} * ({x} + {m.lit(0.044715)} * {x} * {x} * {x})"
        e = m.call("exp", f"-{m.call('fabs', u2)}")
        s = m.div(m.lit(1), f"({m.lit(1)} + {m.call('exp', f'-({u2})')})")
        slope = f"{m.lit(c)} * ({m.lit(1)} + {m.lit(3 * 0.044715)} * {x} * {x})"
        formula = f"({s} + {x} * {m.div(e, f'(({m.lit(1)} + {e}) * ({m.lit(1)} + {e}))')} * {slope})"
        lit = m.lit(self.SATURATED)
        return f"({x} < {lit} && {x} > -{lit} ? {formula} : ({x} > {m.lit(0)} ? {m.lit(1)} : {m.lit(0)}))"

    def reference_derivative(self, x):
        c = 2 * math.sqrt(2 / math.pi)
        with np.errstate(over="ignore", invalid="ignore"):
            u2 = c * (x + 0.044715 * x ** 3)
            s = 1 / (1 + np.exp(-u2))
            e = np.exp(-np.abs(u2))
            formula = s + x * e / (1 + e) ** 2 * c * (1 + 3 * 0.044715 * x * x)
        return np.where(np.abs(x) < self.SATURATED, formula, np.where(x > 0, 1.0, 0.0))


@register_activation
class Sigmoid(Activation):
    name = "sigmoid"

    def render(self, x, m):
        return m.div(m.lit(1), f"({m.lit(1)} + {m.call('exp', f'-{x}')})")

    def reference(self, x):
        with np.errstate(over="ignore"):
            return 1 / (1 + np.exp(-x))

    def derivative(self, x, m):
        s = self.render(x, m)
        return f"({s} * ({m.lit(1)} - {s}))"

    def reference_derivative(self, x):
        s = self.reference(x)
        return s * (1 - s)


@register_activation
class Silu(Activation):
    """x * sigmoid(x)."""

    name = "silu"

    def render(self, x, m):
        return m.div(x, f"({m.lit(1)} + {m.call('exp', f'-{x}')})")

    def reference(self, x):
        with np.errstate(over="ignore"):
            return x / (1 + np.exp(-x))

    def derivative(self, x, m):
        # s (1 + x (1 - s)): where s is 0 (x very negative) the product is 0 for finite x.
        s = m.div(m.lit(1), f"({m.lit(1)} + {m.call('exp', f'-{x}')})")
        return f"({s} * ({m.lit(1)} + {x} * ({m.lit(1)} - {s})))"

    def reference_derivative(self, x):
        s = Sigmoid().reference(x)
        return s * (1 + x * (1 - s))


@register_activation
class Tanh(Activation):
    name = "tanh"

    def render(self, x, m):
        return m.call("tanh", x)

    def reference(self, x):
        return np.tanh(x)

    def derivative(self, x, m):
        t = m.call("tanh", x)
        return f"({m.lit(1)} - {t} * {t})"

    def reference_derivative(self, x):
        return 1 - np.tanh(x) ** 2


# -- gated activations and derivatives ------------------------------------------------------------
class Gated(Activation):
    """``gate(g) * u`` of a pair of output columns (g, u) = (z[:, 2j], z[:, 2j + 1]): the gate and up
    projections of a gated MLP interleaved column by column in one GEMM. A subclass names its gate
    (``gate_class``) and registers; the call's result has half the GEMM's columns."""

    name = "gated"
    arity = 2
    gate_class: ClassVar[type[Activation]] = Activation

    @property
    def gate(self) -> Activation:
        return self.gate_class()

    def render(self, x, m):
        raise TypeError(f"activation {self.name!r} combines two columns: it renders through `render_pair`")

    def render_pair(self, g: str, u: str, m: Math) -> str:
        return f"({self.gate.render(g, m)} * {u})"

    def reference(self, x):
        """``x``'s columns taken in pairs (..., 2n) -> (..., n)."""
        return self.reference_pair(x[..., 0::2], x[..., 1::2])

    def reference_pair(self, g, u):
        return self.gate.reference(g) * u

    def derivative(self, x, m):
        raise TypeError(f"activation {self.name!r} combines two columns: its derivative renders through "
                        f"`derivative_pair`")

    def derivative_pair(self, g: str, u: str, m: Math) -> tuple[str, str]:
        """The partial derivatives (d/dg, d/du) of ``gate(g) * u``."""
        return f"({u} * {self.gate.derivative(g, m)})", self.gate.render(g, m)

    def reference_derivative_pair(self, g, u):
        return u * self.gate.reference_derivative(g), self.gate.reference(g)

    @property
    def has_derivative(self) -> bool:
        return self.gate.has_derivative


@register_activation
class SwiGlu(Gated):
    """SwiGLU: silu(g) * u."""

    name = "swiglu"
    gate_class = Silu


@register_activation
class GeGlu(Gated):
    """GeGLU: gelu(g) * u (the exact GELU)."""

    name = "geglu"
    gate_class = Gelu


@register_activation
class ReGlu(Gated):
    """ReGLU: relu(g) * u."""

    name = "reglu"
    gate_class = Relu


class Derivative(Activation):
    """The derivative of activation ``of``: f'(x) of an elementwise one; of a `Gated` one both
    partial derivatives, written to the pair's two columns. Multiplied by the epilogue's ``mul``
    (the upstream gradient) it is the gradient with respect to the pre-activation. Not registered by
    name: built for the activation at hand. ValueError when ``of`` has no derivative."""

    name = "derivative"

    def __init__(self, of):
        of = resolve_activation(of)
        if of is None or isinstance(of, Derivative):
            raise ValueError(f"Derivative: expected an activation (not None or a derivative), got {of!r}")
        if not of.has_derivative:
            raise ValueError(f"activation {of.name!r} defines no `derivative`, so no gradient flows through it; "
                             f"give {type(of).__name__} a `derivative(x, m)` (and `reference_derivative`) "
                             f"to train through it")
        self.of = of

    @property
    def arity(self) -> int:
        return self.of.arity

    def __repr__(self):
        return f"derivative of {self.of!r}"

    def render(self, x, m):
        return self.of.derivative(x, m)

    def reference(self, x):
        if self.of.arity == 2:
            g, u = x[..., 0::2], x[..., 1::2]
            dg, du = self.of.reference_derivative_pair(g, u)
            out = np.empty(np.broadcast_shapes(dg.shape, du.shape)[:-1] + (2 * dg.shape[-1],))
            out[..., 0::2], out[..., 1::2] = dg, du
            return out
        return self.of.reference_derivative(x)
