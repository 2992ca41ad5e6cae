"""Arrays from every library in (step 1 of a call), the caller's library out (the deliver step).

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
* any object with ``__dlpack__`` (CPU or the engine's CUDA device) or ``__cuda_array_interface__``;
* for ``b``, a `QuantizedWeight` (gemm_engine/quant): its arrays on the engine's device, uploaded
  once per runtime (`QuantizedWeight.device`), imported as a (K, N) operand of library "quantized";
  in a grouped call, a `QuantizedExperts` likewise, as an (E, K, N) operand.

The result comes back in the caller's library: torch in, torch out (on the inputs' device); numpy
in, numpy out; device arrays of the runtime stay there.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ..quant.experts import QuantizedExperts
from ..quant.weight import QuantizedWeight
from ..tensors import is_torch, torch_bits, torch_memory, torch_numpy_dtype, torch_stream

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


def _is_array_like(x) -> bool:
    """Whether ``x`` is an array object (not a list, tuple or scalar): what numpy accepts as ``out``."""
    return (isinstance(x, np.ndarray) or is_torch(x) or hasattr(x, "__dlpack_device__")
            or hasattr(x, "__cuda_array_interface__") or type(x).__module__.split(".")[0] in ("cupy", "pyopencl"))


@dataclass
class CallArrays:
    """Every array argument of one call, imported (`Imported`); ``c``, ``bias`` and ``mul`` given as Python
    numbers stay numbers (numpy's weak-scalar rule types them in the request step), scales given as
    real numbers too (per-tensor factors)."""

    a: Imported
    b: Imported
    out: Imported | None = None
    c: object = None
    bias: object = None
    scale_a: object = None
    scale_b: object = None
    #: A grouped call's offsets or counts (`Imported`), and its per-row scale (a routing weight).
    groups: object = None
    row_scale: object = None
    mul: object = None

    @property
    def host(self) -> bool:
        """Both operands live on the host: the result goes back to the host."""
        return self.a.host and self.b.host

    @property
    def quantized(self) -> bool:
        """``b`` is a quantized weight (its ``array`` a `DeviceWeight`)."""
        return self.b.library == "quantized"

    @property
    def like(self) -> Imported | None:
        """The operand whose library the result takes (torch in, torch out), or None."""
        return self.a if self.a.library == "torch" else self.b if self.b.library == "torch" else None

    @property
    def stream(self) -> int | None:
        """The CUDA stream the operands' library works on (torch's current stream), or None."""
        return self.a.stream or self.b.stream

    @property
    def device_arrays(self) -> tuple:
        """The caller's device arrays the kernels read in place (the runtime orders their queues
        after the launch)."""
        return tuple(x.array for x in (self.a, self.b, self.c, self.bias, self.scale_a, self.scale_b, self.groups,
                                       self.row_scale, self.mul) if isinstance(x, Imported) and not x.host)

    @property
    def subtype(self) -> type | None:
        """numpy's rule for ndarray subclasses (np.matrix in, np.matrix out): the operand's type of
        highest ``__array_priority__``, or None for plain arrays."""
        found = [x.original for x in (self.a, self.b) if isinstance(x.original, np.ndarray)
                 and type(x.original) is not np.ndarray]
        return type(max(found, key=lambda x: getattr(x, "__array_priority__", 0.0))) if found else None


def _number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_, np.ndarray))


#: Why a grouped call refuses a lone quantized weight, and a dense one quantized experts.
_GROUPED_QUANTIZED = ("grouped_matmul: b holds a QuantizedWeight; quantized experts go in as one QuantizedExperts "
                      "(gemm_engine.quantize of an (E, K, N) array, or QuantizedExperts([...])) with the contiguous "
                      "or masked layout")
_DENSE_EXPERTS = ("matmul: b is a QuantizedExperts (a mixture-of-experts layer's weights): pass it to "
                  "grouped_matmul with offsets or counts, or one expert (experts[e]) to quantized_matmul")


def import_call(runtime, a, b, *, out=None, c=None, bias=None, scale_a=None, scale_b=None, groups=None,
                row_scale=None, mul=None) -> CallArrays:
    """Step 1: every array argument as the engine computes with it (`import_array`); ``out`` must
    be an array (numpy's rule: a list or a scalar is refused; a 1-tuple holding one is unpacked).
    ``groups``: a grouped call's (label, offsets or counts); ``row_scale``: its per-row scale."""
    a_imported = import_array(a, "a", runtime)
    if isinstance(b, QuantizedWeight) and groups is not None:
        raise ValueError(_GROUPED_QUANTIZED)
    if isinstance(b, QuantizedExperts) and groups is None:
        raise TypeError(_DENSE_EXPERTS)
    if isinstance(b, (QuantizedWeight, QuantizedExperts)):
        # The engine's own device copy, which follows the activations' place as a host operand would;
        # its dtype is the activations' (numpy_rules.quantized_rhs_dtype).
        b_imported = Imported(b.device(runtime), a_imported.dtype, True, "quantized", b)
    else:
        b_imported = import_array(b, "b", runtime)
    arrays = CallArrays(a_imported, b_imported)
    if groups is not None:
        arrays.groups = import_array(groups[1], groups[0], runtime)
    if row_scale is not None:
        arrays.row_scale = import_array(row_scale, "row_scale", runtime)
    if out is not None:
        if isinstance(out, tuple) and len(out) == 1:
            out = out[0]
        if not _is_array_like(out):
            raise TypeError(f"matmul: out must be an array (numpy, CuPy, PyOpenCL, torch, DLPack) or None, "
                            f"got {type(out).__name__}")
        arrays.out = _checked_out(import_array(out, "out", runtime), arrays.host, runtime)
    if c is not None:
        arrays.c = c if type(c) in (int, float) else import_array(c, "c", runtime)
    if bias is not None:
        arrays.bias = bias if type(bias) in (int, float) else import_array(bias, "bias", runtime)
    if mul is not None:
        arrays.mul = mul if type(mul) in (int, float) else import_array(mul, "mul", runtime)
    for label, x in (("scale_a", scale_a), ("scale_b", scale_b)):
        if x is not None:
            setattr(arrays, label, float(x) if _number(x) else import_array(x, label, runtime))
    return arrays


@dataclass
class ListArrays:
    """A list-layout grouped call's arrays (grouped_matmul with lists): one (a, b) pair per group,
    imported, and ``out`` (a list of one array per group) or None."""

    a: list
    b: list
    out: list | None = None

    @property
    def host(self) -> bool:
        return all(x.host for x in self.a + self.b)

    @property
    def like(self) -> Imported | None:
        return next((x for x in self.a + self.b if x.library == "torch"), None)

    @property
    def stream(self) -> int | None:
        return next((x.stream for x in self.a + self.b if x.stream), None)

    @property
    def device_arrays(self) -> tuple:
        return tuple(x.array for x in self.a + self.b if not x.host)

    #: numpy's ndarray-subclass rule is matmul's: a list call returns plain arrays.
    subtype = None


def import_list(runtime, a, b, out=None) -> ListArrays:
    """Step 1 of a list-layout grouped call: each group's operands (and outs) imported."""
    if not (isinstance(a, (list, tuple)) and isinstance(b, (list, tuple))):
        raise TypeError(f"grouped_matmul: the list layout takes a and b both as lists of 2-D arrays, got "
                        f"{type(a).__name__} and {type(b).__name__}")
    if len(a) != len(b):
        raise ValueError(f"grouped_matmul: a lists {len(a)} groups, b {len(b)}")
    if any(isinstance(x, (QuantizedWeight, QuantizedExperts)) for x in b):
        raise ValueError(_GROUPED_QUANTIZED)
    arrays = ListArrays([import_array(x, f"a[{i}]", runtime) for i, x in enumerate(a)],
                        [import_array(x, f"b[{i}]", runtime) for i, x in enumerate(b)])
    if out is not None:
        if not isinstance(out, (list, tuple)) or len(out) != len(a):
            raise TypeError(f"grouped_matmul: out must be a list of one array per group ({len(a)}) with the "
                            f"list layout, got {type(out).__name__}")
        arrays.out = [_checked_out(import_array(x, f"out[{i}]", runtime), arrays.host, runtime)
                      for i, x in enumerate(out)]
    return arrays


def _checked_out(out: Imported, host: bool, runtime) -> Imported:
    """``out`` where the result can go: a host array for host operands, a device array (or a
    tensor) for device operands, writable."""
    if host and not out.host:
        raise TypeError(f"matmul: out is a device array ({type(out.original).__name__}) but the operands are "
                        f"host arrays: pass a host array (numpy, a CPU tensor)")
    if not host and out.host and out.library != "torch":
        raise TypeError(f"matmul: out must be a device array of the {runtime.backend} backend (or a tensor), "
                        f"got {type(out.original).__name__}")
    if out.host and not out.array.flags.writeable:   # else found only after the launch, or never (K = 0)
        raise ValueError("matmul: out is read-only")
    return out


def _import_torch(tensor, label: str, runtime) -> Imported:
    dtype = torch_numpy_dtype(tensor.dtype)
    t = tensor.detach()
    if t.device.type == "cpu":
        return Imported(torch_bits(t).numpy().view(dtype), dtype, True, "torch", tensor)
    if t.device.type == "cuda" and runtime.backend == "cuda":
        index = t.device.index if t.device.index is not None else 0
        if index != runtime.device_index:
            raise TypeError(f"matmul: {label} is on cuda:{index}, this engine runs on cuda:{runtime.device_index} "
                            f"({runtime.device.name})")
        import torch
        stream = torch_stream(torch, index)
        # A view made from the tensor's address (the work is ordered on torch's current stream, the
        # call's, so the DLPack exchange would order nothing either); DLPack where only it can say
        # (an empty tensor, a conjugate view), on torch's current stream: a consumer on another
        # stream would make torch record an event and that stream wait for it, which a CUDA graph
        # being captured on torch's stream refuses.
        memory = torch_memory(t)
        if memory is not None and memory[0]:
            arr = runtime.from_address(*memory, t)
        else:
            with runtime.on_stream(stream):
                arr = runtime.from_dlpack(torch_bits(t), label)
        return Imported(arr, dtype, False, "torch", tensor, stream)
    # Another device than the engine's: one copy through the host.
    host = torch_bits(t.cpu()).numpy().view(dtype)
    return Imported(host, dtype, True, "torch", tensor)
