"""``torch.ops.gemm_engine.*``: the engine's matmul as registered torch operators.

Three operators, defined with `torch.library.Library` (``define`` / ``impl``: the cheaper of torch's
two registration paths, pytorch issue 177109) and implemented by `Engine.compute` for every device:

* ``matmul(a, b, engine, algorithm, precision)``: numpy's matmul;
* ``matmul_fused(a, b, c, bias, mul, alpha, beta, bias_axis, activation, out_dtype, casting, engine,
  algorithm, precision)``: the fused epilogue ``act(alpha * (a @ b) + beta * c + bias) * mul``;
* ``scaled_matmul(a, b, scale_a, scale_b, alpha, bias, bias_axis, activation, out_dtype, casting,
  engine, algorithm, precision)``: fp8 / int8 (or any) operands with their dequantizing scales.

Every argument is positional (autocast kernels take no keywords). ``engine`` is a handle
(`engine_handle`: 0 is the default engine), ``activation`` a key (`activation_key`: a registered
name, ``"derivative:<key>"``, or a key kept for an unregistered instance), "" for none.

The fake implementation of each (`torch.library.register_fake`) runs the engine's own rules,
call/numpy_rules.py `call_shape` and `result_types` (the one dtype rule), on the tensors' shapes
and dtypes, so torch.compile traces every call numpy's rules allow, symbolic sizes included; the
result is contiguous on the first operand's device, as the engine's is. Under autocast the float
operands (not float64 nor fp8) are cast to autocast's dtype first (`_autocast`), as torch's matmul
is. Each op has a twin without autograd, ``_matmul``, ``_matmul_fused``, ``_scaled_matmul``
(`kernel_name`): `gemm_engine.matmul` and the modules call the twin, through the autograd.Functions
of gemm_engine/torch/autograd.py where an input requires grad, so a compiled graph calls the engine
with no Python autograd frame; the public ops' autograd kernels (registered there) apply the same
Functions, so ``torch.ops.gemm_engine.matmul`` called directly has its gradient too.
"""
from __future__ import annotations

import threading

import torch

from ..handles import engine_of
from ..call import numpy_rules
from ..epilogue.activations import ACTIVATIONS, Activation, Derivative, resolve_activation
from ..epilogue.scales import check_scale
from ..tensors import numpy_torch_dtype, torch_functions, torch_numpy_dtype

torch_functions()    # before any tracing (tensors.py)
LIB = torch.library.Library("gemm_engine", "DEF")
_COMMON = "int engine, str? algorithm, str precision"
SCHEMAS = {
    "matmul": f"(Tensor a, Tensor b, {_COMMON}) -> Tensor",
    "matmul_fused": ("(Tensor a, Tensor b, Tensor? c, Tensor? bias, Tensor? mul, float alpha, float beta, "
                     f"int bias_axis, str activation, ScalarType? out_dtype, str casting, {_COMMON}) -> Tensor"),
    "scaled_matmul": ("(Tensor a, Tensor b, Tensor? scale_a, Tensor? scale_b, float alpha, Tensor? bias, "
                      f"int bias_axis, str activation, ScalarType? out_dtype, str casting, {_COMMON}) -> Tensor"),
}

# -- handles: engines and activations as schema values -------------------------------------------------
_lock = threading.Lock()
_ACTIVATIONS: dict = {}        # key -> unregistered Activation instance
_ACTIVATION_KEYS: dict = {}    # Activation instance -> key


def engine_handle(engine) -> int:
    """The handle an op takes for ``engine``: its `Engine.handle`, 0 for None (the default engine,
    made where the call runs: torch.compile traces this without making one)."""
    return 0 if engine is None else engine.handle


def activation_key(activation) -> str:
    """The schema string of an activation (None, a registered name, an Activation or a subclass)."""
    if activation is None:
        return ""
    if isinstance(activation, str):
        resolve_activation(activation)        # ValueError naming the registered ones
        return activation
    act = resolve_activation(activation)
    if isinstance(act, Derivative):
        return "derivative:" + activation_key(act.of)
    cls = ACTIVATIONS.get(act.name)
    if cls is type(act) and act == cls():
        return act.name
    found = _ACTIVATION_KEYS.get(act)
    if found is None:
        with _lock:
            found = f"instance:{len(_ACTIVATIONS)}:{act.name}"
            _ACTIVATIONS[found], _ACTIVATION_KEYS[act] = act, found
    return found


def activation_of(key: str) -> Activation | None:
    if not key:
        return None
    if key.startswith("derivative:"):
        return Derivative(activation_of(key[len("derivative:"):]))
    if key.startswith("instance:"):
        return _ACTIVATIONS[key]
    return resolve_activation(key)


# -- implementations ------------------------------------------------------------------------------------
def plain(x):
    """A tensor as the engine reads it: Parameters and tensors that require grad detached (no
    autograd below the op; the fast path takes plain tensors)."""
    return x if x is None or (type(x) is torch.Tensor and not x.requires_grad) else x.detach()


def _options(algorithm, precision) -> dict:
    return dict(algorithm=algorithm or None, precision=precision or None)


def matmul_impl(a, b, engine, algorithm, precision):
    # What a compiled graph's call runs: kept to one frame before the engine's call (`Engine.compute`'s,
    # its arguments in order: out, alpha, beta, c, bias, bias_axis, activation, out_dtype, casting,
    # algorithm, precision, tune, scale_a, scale_b, mul).
    return engine_of(engine).run_call(plain(a), plain(b), None, 1.0, None, None, None, -1, None, None, "same_kind",
                                      algorithm or None, precision or None, False, None, None, None)


def fused_impl(a, b, c, bias, mul, alpha, beta, bias_axis, activation, out_dtype, casting, engine, algorithm,
               precision):
    return engine_of(engine).compute(
        plain(a), plain(b), c=plain(c), bias=plain(bias), mul=plain(mul), alpha=alpha,
        beta=beta if c is not None else None, bias_axis=bias_axis, activation=activation_of(activation),
        out_dtype=_numpy_dtype(out_dtype), casting=casting, **_options(algorithm, precision))


def scaled_impl(a, b, scale_a, scale_b, alpha, bias, bias_axis, activation, out_dtype, casting, engine, algorithm,
                precision):
    return engine_of(engine).compute(
        plain(a), plain(b), scale_a=plain(scale_a), scale_b=plain(scale_b), alpha=alpha, bias=plain(bias),
        bias_axis=bias_axis, activation=activation_of(activation), out_dtype=_numpy_dtype(out_dtype),
        casting=casting, **_options(algorithm, precision))


def _numpy_dtype(dtype):
    return None if dtype is None else torch_numpy_dtype(dtype)


# -- fake implementations: the engine's rules on shapes and dtypes -----------------------------------
class _Meta:
    """What numpy_rules reads of an array: its shape and numpy dtype."""

    def __init__(self, tensor):
        self.shape, self.dtype = tuple(tensor.shape), torch_numpy_dtype(tensor.dtype)


def fake_result(a, b, *, c=None, bias=None, mul=None, beta=0.0, activation="", out_dtype=None, casting="same_kind",
                scale_a=None, scale_b=None):
    """An empty tensor of the shape, dtype, strides and device ``matmul`` returns for these."""
    act = activation_of(activation)
    shape = numpy_rules.call_shape(tuple(a.shape), tuple(b.shape), numpy_rules.pairs_of(act))
    kinds = {check_scale(_Meta(s), label, shape.m, shape.n, shape.k, lhs).kind
             for label, s, lhs in (("scale_a", scale_a, True), ("scale_b", scale_b, False)) if s is not None}
    dtypes = {name: None if x is None else torch_numpy_dtype(x.dtype)
              for name, x in (("c", c if beta != 0 else None), ("bias", bias), ("mul", mul))}
    types = numpy_rules.result_types(torch_numpy_dtype(a.dtype), torch_numpy_dtype(b.dtype), **dtypes,
                                     scales="block" if "block" in kinds else "vector" if kinds else "",
                                     out_dtype=_numpy_dtype(out_dtype), casting=casting)
    return a.new_empty(shape.out_shape, dtype=numpy_torch_dtype(types.result))


def matmul_fake(a, b, engine, algorithm, precision):
    return fake_result(a, b)


def fused_fake(a, b, c, bias, mul, alpha, beta, bias_axis, activation, out_dtype, casting, engine, algorithm,
               precision):
    return fake_result(a, b, c=c, bias=bias, mul=mul, beta=beta, activation=activation, out_dtype=out_dtype,
                       casting=casting)


def scaled_fake(a, b, scale_a, scale_b, alpha, bias, bias_axis, activation, out_dtype, casting, engine, algorithm,
                precision):
    return fake_result(a, b, bias=bias, activation=activation, out_dtype=out_dtype, casting=casting,
                       scale_a=scale_a, scale_b=scale_b)


# -- autocast: the float operands in autocast's dtype, as torch's matmul casts them ----------------------
def autocast_cast(x, device_type: str):
    """``x`` in autocast's dtype where it is a float32 / float16 / bfloat16 tensor on ``device_type``."""
    eligible = (isinstance(x, torch.Tensor) and x.device.type == device_type
                and x.dtype in (torch.float32, torch.float16, torch.bfloat16))
    return x.to(torch.get_autocast_dtype(device_type)) if eligible else x


def _autocast_kernel(op, device_type: str):
    key = getattr(torch._C.DispatchKey, "Autocast" + torch._C._dispatch_key_for_device(device_type))

    def kernel(keyset, *args):
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(key)):
            return op(*(autocast_cast(x, device_type) for x in args))
    return kernel


IMPLS = {"matmul": (matmul_impl, matmul_fake), "matmul_fused": (fused_impl, fused_fake),
         "scaled_matmul": (scaled_impl, scaled_fake)}
#: The ops autocast casts (a scaled product's operands are what their scales dequantize).
AUTOCAST = ("matmul", "matmul_fused")
#: The devices whose autocast casts their operands.
AUTOCAST_DEVICES = ("cpu", "cuda")

def kernel_name(name: str) -> str:
    """The op without autograd that the public op ``name`` and its autograd.Function run:
    ``_matmul`` for ``matmul`` (what a compiled graph calls: no autograd frame)."""
    return "_" + name


for _name, _schema in SCHEMAS.items():
    _impl, _fake = IMPLS[_name]
    for _defined in (_name, kernel_name(_name)):
        LIB.define(_defined + _schema)
        LIB.impl(_defined, _impl, "CompositeExplicitAutograd")
        torch.library.register_fake(f"gemm_engine::{_defined}", _fake, lib=LIB)
        if _name in AUTOCAST:
            for _device in AUTOCAST_DEVICES:
                _op = getattr(torch.ops.gemm_engine, _defined).default
                _key = "Autocast" + torch._C._dispatch_key_for_device(_device)
                LIB.impl(_defined, _autocast_kernel(_op, _device), _key, with_keyset=True)


def op(name: str):
    """``torch.ops.gemm_engine._<name>.default``: the op without autograd (`kernel_name`), which
    `gemm_engine.matmul`, the modules and the autograd.Functions call."""
    return getattr(torch.ops.gemm_engine, kernel_name(name)).default


__all__ = ["activation_key", "activation_of", "autocast_cast", "engine_handle", "engine_of", "fake_result",
           "kernel_name", "op"]
