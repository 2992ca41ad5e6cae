"""Arrays from every library in, the caller's library out.

`import_array` turns whatever a caller passes for ``a``, ``b``, ``c``, ``bias`` or ``out`` into what
the engine computes with (`Imported`): a device array of its runtime (CuPy on CUDA, a
``pyopencl.array.Array`` on OpenCL), viewed without a copy where it already lives on the engine's
device, or a numpy array. Accepted:

* numpy arrays, and anything numpy takes (lists, Python and numpy scalars);
* the runtime's own arrays (CuPy / PyOpenCL);
* torch tensors: on the CPU as numpy views; on the engine's CUDA device zero-copy through DLPack
  (bfloat16 as its bits: DLPack consumers may lack it), the work then runs on torch's current
  stream, so that it is ordered after the producer of the inputs and before their next consumer
  with no synchronization;
* any object with ``__dlpack__`` (CPU or the engine's CUDA device) or ``__cuda_array_interface__``.

The result comes back in the caller's library: torch in, torch out (on the inputs' device); numpy
in, numpy out; device arrays of the runtime stay there.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dtypes import FP8_NAMES, bfloat16_dtype, ml_dtype

_DLPACK_CPU, _DLPACK_CUDA = 1, 2


@dataclass
class Imported:
    array: object            # a runtime device array, or a numpy array (host)
    dtype: np.dtype          # the logical dtype (bfloat16 even where `array` holds its bits as uint16)
    host: bool
    library: str             # "numpy", "cupy", "pyopencl", "torch", "dlpack"
    original: object = None  # the caller's object
    stream: int | None = None  # CUDA stream its library works on (torch's current stream), or None

    @property
    def shape(self):
        return self.array.shape


def is_torch(x) -> bool:
    t = type(x)
    return t.__name__ in ("Tensor", "Parameter") and t.__module__.split(".")[0] == "torch"


def _torch_bits(t):
    """A tensor whose elements DLPack and numpy consumers know: bfloat16 as its 16 bits, fp8 as
    its 8."""
    import torch
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16)
    if str(t.dtype).removeprefix("torch.") in FP8_NAMES:
        return t.view(torch.uint8)
    return t


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


def import_array(x, label: str, runtime) -> Imported:
    """``x`` as the engine computes with it (see the module docstring); TypeError naming ``label``
    for what cannot be (an array of another backend's device, an object dtype...)."""
    if runtime.is_native(x):
        runtime.check_native(x, label)
        return Imported(x, runtime.logical_dtype(x), False, runtime.backend, x)
    if isinstance(x, np.ndarray):
        return Imported(x, x.dtype, True, "numpy", x)
    module = type(x).__module__.split(".")[0]
    if module in ("cupy", "pyopencl"):
        raise TypeError(f"matmul: {label} is a {type(x).__module__} array but this engine runs on the "
                        f"{runtime.backend} backend ({runtime.device.name})")
    if is_torch(x):
        return _import_torch(x, label, runtime)
    dlpack = getattr(x, "__dlpack_device__", None)
    if dlpack is not None:
        kind = dlpack()[0]
        if kind == _DLPACK_CPU:
            return Imported(np.from_dlpack(x), np.from_dlpack(x).dtype, True, "dlpack", x)
        if kind == _DLPACK_CUDA and runtime.backend == "cuda":
            arr = runtime.from_dlpack(x, label)
            return Imported(arr, arr.dtype, False, "dlpack", x)
        raise TypeError(f"matmul: {label} lives on DLPack device {dlpack()}, which the {runtime.backend} "
                        f"backend ({runtime.device.name}) cannot read")
    if hasattr(x, "__cuda_array_interface__"):
        if runtime.backend != "cuda":
            raise TypeError(f"matmul: {label} is a CUDA array; this engine runs on the {runtime.backend} backend")
        arr = runtime.from_cuda_array_interface(x, label)
        return Imported(arr, arr.dtype, False, "cuda_array_interface", x)
    try:
        arr = np.asarray(x)
    except Exception as exc:  # noqa: BLE001 -- whatever numpy refuses
        raise TypeError(f"matmul: {label} must be an array (numpy, CuPy, PyOpenCL, torch, DLPack) or "
                        f"numbers; got {type(x).__name__}: {exc}") from None
    if arr.dtype == object:
        raise TypeError(f"matmul: {label} must be numbers or an array, got {type(x).__name__} of objects")
    return Imported(arr, arr.dtype, True, "numpy", x)


def torch_stream(torch, index: int) -> int:
    """The raw handle of torch's current CUDA stream on device ``index``. torch's C accessor (the
    one Triton launches with) where it exists: ``torch.cuda.current_stream`` builds a Stream object
    in Python, a few microseconds of a 64^3 call's budget."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(index)
    return torch.cuda.current_stream(index).cuda_stream


def _import_torch(tensor, label: str, runtime) -> Imported:
    dtype = torch_numpy_dtype(tensor.dtype)
    t = tensor.detach()
    if t.device.type == "cpu":
        return Imported(_torch_bits(t).numpy().view(dtype), dtype, True, "torch", tensor)
    if t.device.type == "cuda" and runtime.backend == "cuda":
        index = t.device.index if t.device.index is not None else 0
        if index != runtime.device_index:
            raise TypeError(f"matmul: {label} is on cuda:{index}, this engine runs on cuda:{runtime.device_index} "
                            f"({runtime.device.name})")
        import torch
        arr = runtime.from_dlpack(_torch_bits(t), label)
        return Imported(arr, dtype, False, "torch", tensor, torch_stream(torch, index))
    # Another device than the engine's: one copy through the host.
    host = _torch_bits(t.cpu()).numpy().view(dtype)
    return Imported(host, dtype, True, "torch", tensor)


def to_library(result, imported: Imported, runtime):
    """``result`` (a numpy array, or a runtime device array in ``imported.dtype``'s storage) as the
    library ``imported`` came from: a torch tensor on its device, else unchanged."""
    if imported is None or imported.library != "torch":
        return result
    import torch
    original = imported.original
    if isinstance(result, np.ndarray) or np.isscalar(result) or isinstance(result, np.generic):
        host = np.asarray(result)
        dtype = host.dtype
        bits = host.view(np.int16) if dtype == bfloat16_dtype() else host
        # reshape: ascontiguousarray makes a 0-d result 1-d (torch's vector @ vector is 0-d).
        tensor = torch.from_numpy(np.ascontiguousarray(bits).reshape(bits.shape))
        if dtype == bfloat16_dtype():
            tensor = tensor.view(torch.bfloat16)
        return tensor.to(original.device)
    raise TypeError("internal: a device result for a torch caller is allocated by torch (operands.py)")
