"""torch tensors as the engine's arrays: dtypes, bit views, streams (torch imported only when a
tensor is at hand: it stays an optional dependency)."""
from __future__ import annotations

import sys

import numpy as np

from .dtypes import FP8_NAMES, bfloat16_dtype, ml_dtype


def is_torch(x) -> bool:
    t = type(x)
    return t.__name__ in ("Tensor", "Parameter") and t.__module__.split(".")[0] == "torch"


def torch_bits(t):
    """A tensor whose elements DLPack and numpy consumers know: bfloat16 as its 16 bits, fp8 as
    its 8."""
    import torch
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16)
    if str(t.dtype).removeprefix("torch.") in FP8_NAMES:
        return t.view(torch.uint8)
    return t


#: torch dtypes whose elements numpy names alike (torch_bits gives the others' bits as these).
_PLAIN = frozenset({"float16", "float32", "float64", "int8", "uint8", "int16", "int32", "int64", "bool"})


def torch_memory(t):
    """(address, shape, strides in bytes, numpy dtype) of a tensor's elements as `torch_bits` gives
    them, for a view made from its address; None where DLPack must say (a conjugate or negative
    view, a dtype numpy does not name)."""
    if str(t.layout) != "torch.strided":      # sparse, mkldnn...: DLPack says what it can
        return None
    bits = torch_bits(t)
    name = str(bits.dtype).removeprefix("torch.")
    if name not in _PLAIN or bits.is_conj() or bits.is_neg():
        return None
    size = bits.element_size()
    return bits.data_ptr(), tuple(bits.shape), tuple(s * size for s in bits.stride()), np.dtype(name)


def torch_numpy_dtype(torch_dtype) -> np.dtype:
    name = str(torch_dtype).removeprefix("torch.")
    if name in ("bfloat16",) + FP8_NAMES:
        dt = ml_dtype(name)
        if dt is None:
            raise TypeError(f"matmul: {name} tensors need the ml_dtypes package (pip install ml_dtypes)")
        return dt
    return np.dtype(name)


def numpy_torch_dtype(dtype: np.dtype):
    import torch
    return getattr(torch, np.dtype(dtype).name)


def torch_stream(torch, index: int) -> int:
    """The raw handle of torch's current CUDA stream on device ``index``. torch's C accessor (the
    one Triton launches with) where it exists: ``torch.cuda.current_stream`` builds a Stream object
    in Python, a few microseconds of a 64^3 call's budget."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(index)
    return torch.cuda.current_stream(index).cuda_stream


def host_tensor(result, device):
    """A host result (a numpy array or scalar, bfloat16 included) as a torch tensor on ``device``."""
    import torch
    host = np.asarray(result)
    dtype = host.dtype
    bits = host.view(np.int16) if dtype == bfloat16_dtype() else host
    # reshape: ascontiguousarray makes a 0-d result 1-d (torch's vector @ vector is 0-d).
    tensor = torch.from_numpy(np.ascontiguousarray(bits).reshape(bits.shape))
    if dtype == bfloat16_dtype():
        tensor = tensor.view(torch.bfloat16)
    return tensor.to(device)


_TORCH: list = [None]     # torch and the functions `torch_op_wanted` asks, once a call has seen a tensor


def torch_functions() -> tuple:
    """What `torch_op_wanted` asks, kept once (gemm_engine.torch fills it on import: torch.compile
    guards on it, and filling it while tracing would cost the first compiled function a recompile)."""
    if _TORCH[0] is None:
        import torch
        _TORCH[0] = (torch, torch.Tensor, torch.nn.Parameter, torch._C._is_any_autocast_enabled,
                     torch.is_grad_enabled, torch.compiler.is_compiling)
    return _TORCH[0]


def torch_op_wanted(a, b, extras=()) -> bool:
    """Whether a call goes through gemm_engine.torch's registered ops rather than straight to the
    engine: torch tensors among ``a``, ``b`` and ``extras`` (c, bias, mul) that require grad while
    grad mode is on, any tensor under torch.compile's tracing or autocast, or a tensor subclass
    other than a Parameter (fake and functional tensors). Cheap for every other call: the common
    one (two plain tensors, no epilogue arrays) reads two flags and asks three C functions."""
    found = _TORCH[0]
    if found is None:
        if not (is_torch(a) or is_torch(b) or any(is_torch(x) for x in extras)):
            return False
        found = torch_functions()
    _, tensor, parameter, autocast, grad_enabled, compiling = found
    if type(a) is tensor and type(b) is tensor:
        if compiling() or autocast():
            return True
        # `is`, never ==: tuple.count(None) asks Tensor.__eq__(None), 12 us a tensor (a TypeError
        # caught inside torch), and torch 2.11's Dynamo cannot trace it (NotImplemented).
        for x in extras:
            if x is not None:
                break
        else:
            return (a.requires_grad or b.requires_grad) and grad_enabled()
    tensors = [x for x in (a, b, *extras) if isinstance(x, tensor)]
    if not tensors:
        return False
    if compiling() or autocast():
        return True
    grad = grad_enabled()
    for x in tensors:
        if (grad and x.requires_grad) or (type(x) is not tensor and type(x) is not parameter):
            return True
    return False



def deterministic() -> bool:
    """Whether torch's deterministic algorithms are on (torch imported by the caller only): the
    engine then never runs a stand-in, whose sums may round otherwise than the chosen kernel's."""
    torch = sys.modules.get("torch")
    return torch is not None and bool(torch.are_deterministic_algorithms_enabled())
