"""CUDA runtime through CuPy: NVRTC builds (runtime/nvrtc.py, with its on-disk cache), CuPy loads
the modules, kernels run on CuPy's current stream, and arrays are `cupy.ndarray`."""
from __future__ import annotations

import contextlib
from collections import OrderedDict
import hashlib
import sys
import threading

import numpy as np

from ..errors import BackendUnavailableError, CaptureError
from ..version import extra_hint
from .cuda_launch import DriverLauncher, PreparedLaunch, ensure_context
from ..codegen.device import DeviceInfo
from ..codegen.dialect import cuda_target_arch
from .base import STREAMS_MAX, Runtime, span_of
from .tensor_map import ENCODER
from . import nvrtc

#: ``cudaStreamPerThread``'s handle.
_PER_THREAD_STREAM = 2


def _cupy():
    try:
        import cupy
    except ImportError as exc:
        raise BackendUnavailableError("the CUDA backend needs CuPy built for the CUDA driver's version ("
                                      f"{extra_hint('cuda13', 'cupy-cuda13x cuda-bindings')}; cuda12 for "
                                      "CUDA 12)") from exc
    return cupy


def cuda_available() -> bool:
    try:
        cupy = _cupy()
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


class CudaRuntime(Runtime):
    backend = "cuda"

    def __init__(self, device=None):
        super().__init__()
        # id(kernel) -> (kernel, dynamic shared bytes it may take): the kernel is kept with its id,
        # so the id cannot be reused by another kernel while the entry exists.
        self._dyn_smem: dict[int, tuple] = {}
        # Loaded modules by their binary's hash: kept for the runtime's life, since a plan (the
        # planner keeps more than the kernel cache) may still launch their functions and a Function
        # does not keep its module alive everywhere.
        self._modules: dict = {}
        self._modules_lock = threading.Lock()
        self._streams: OrderedDict = OrderedDict()   # a library's stream handle -> cupy ExternalStream
        cp = self.cp = _cupy()
        try:
            count = cp.cuda.runtime.getDeviceCount()
        except Exception as exc:
            raise BackendUnavailableError(f"CuPy sees no CUDA device: {exc}") from exc
        if device is not None and (isinstance(device, bool) or not isinstance(device, (int, np.integer))):
            raise TypeError(f"device: expected a CUDA device index (int), got {type(device).__name__} {device!r}")
        index = 0 if device is None else int(device)
        if not 0 <= index < count:
            names = [cp.cuda.runtime.getDeviceProperties(i)["name"] for i in range(count)]
            names = [n.decode() if isinstance(n, bytes) else str(n) for n in names]
            raise ValueError(f"device: CUDA device index {index} out of range; devices: "
                             + "; ".join(f"{i}: {n}" for i, n in enumerate(names)))
        self.cuda_device = cp.cuda.Device(index)
        # cuLaunchKernel with a reusable parameter block where CuPy exposes it (cuda_launch.py);
        # CuPy's Function call otherwise.
        self.driver_launch = DriverLauncher(cp) if DriverLauncher.available(cp) else None
        self.co_resident_launch = self.driver_launch is not None and self.driver_launch.launch_cooperative is not None
        try:      # module loading during stream capture: allowed from driver 12.3 (12030)
            self.loads_during_capture = int(cp.cuda.runtime.driverGetVersion()) >= 12030
        except Exception:  # noqa: BLE001 -- unknown: the capture gets the clear CaptureError instead
            self.loads_during_capture = False
        props = cp.cuda.runtime.getDeviceProperties(index)
        name = props["name"]
        self.device = DeviceInfo(
            backend="cuda",
            name=name.decode() if isinstance(name, bytes) else str(name),
            compute_units=int(props["multiProcessorCount"]),
            max_shared_memory=int(props.get("sharedMemPerBlockOptin", props["sharedMemPerBlock"])),
            max_threads_per_cube=int(props["maxThreadsPerBlock"]),
            plane_size=int(props["warpSize"]),
            compute_capability=(int(props["major"]), int(props["minor"])),
        )
        if self.device.compute_capability >= (9, 0):
            # The TMA kernels' tensor maps are encoded through cuda-bindings: imported now, with the
            # runtime, not inside a call (the H100's first call of a new shape spent 20 of its 34 ms
            # importing it: bench/results/h100/torch_op.md). Absent, the TMA call says so then.
            try:
                ENCODER.driver()
            except RuntimeError:
                pass

    def _build(self, source):
        return nvrtc.binary(self.cp, source, cuda_target_arch(self.device, source))

    def _on_disk(self, source):
        return nvrtc.on_disk(self.cp, source, cuda_target_arch(self.device, source))

    def _load(self, binary, name):
        ensure_context(self.cp, self.cuda_device.id)
        key = hashlib.sha256(binary).digest()
        with self.cuda_device, self._modules_lock:
            module = self._modules.get(key)
            if module is None:
                module = self._modules[key] = self.cp.cuda.function.Module()
                module.load(binary)
            return module.get_function(name)

    def capturing(self, stream=None) -> bool:
        runtime = self.cp.cuda.runtime
        is_capturing = getattr(runtime, "streamIsCapturing", None)
        if is_capturing is None:
            return False
        ptr = self.cp.cuda.get_current_stream().ptr if stream is None else stream
        if runtime.getDevice() == self.cuda_device.id:     # the per-call path: no device switch
            return is_capturing(ptr) != 0
        with self.cuda_device:
            return is_capturing(ptr) != 0

    def scratch(self, count, dtype):
        """`Runtime.scratch`; while the current stream captures a CUDA graph, from torch's caching
        allocator, which gives the memory to the graph's private pool for as long as the graph
        lives. CuPy's pool cannot: cudaMalloc is not permitted during capture (the capture is
        invalidated), and a block it found free would be handed out again behind the graph."""
        if not self.capturing():
            return self.empty((count,), dtype)
        torch = sys.modules.get("torch")
        if torch is None:
            raise CaptureError(
                "gemm_engine: this kernel plan needs scratch memory (a split-K workspace or the split tail's "
                "flags), and the current CUDA stream is capturing a graph without torch: CuPy's memory pool "
                "cannot give memory to a graph. Capture through torch.cuda.graph, or name an algorithm "
                "without a workspace")
        dtype = np.dtype(dtype)
        buffer = torch.empty(count * dtype.itemsize, dtype=torch.uint8, device=torch.device("cuda", self.cuda_device.id))
        return self.cp.from_dlpack(buffer).view(dtype)

    def _compile_in_thread(self, source: str, name: str):
        with self.cuda_device:           # a worker thread's current device is device 0
            return self.kernel(source, name)

    def _forget(self, kernel) -> None:
        # An evicted kernel's opt-in is forgotten; a plan that launches it again opts in again.
        self._dyn_smem.pop(id(kernel), None)

    def launch(self, kernel, cubes, units, args, shared_bytes: int = 0, co_resident: bool = False):
        conv = tuple(np.int64(a) if isinstance(a, (int, np.integer)) else a for a in args)
        self.launch_converted(kernel, cubes, units, conv, shared_bytes, co_resident)

    def launch_converted(self, kernel, cubes, units, args: tuple, shared_bytes: int = 0, co_resident: bool = False):
        """`launch` for arguments already converted (integers as np.int64): the per-call path.
        ``co_resident``: a cooperative launch (cuLaunchCooperativeKernel), which fails where the
        grid cannot be resident at once instead of letting cubes wait for ones that never start."""
        if self.cp.cuda.runtime.getDevice() != self.cuda_device.id:
            with self.cuda_device:  # entering the device context costs more than asking
                return self.launch_converted(kernel, cubes, units, args, shared_bytes, co_resident)
        ensure_context(self.cp, self.cuda_device.id)
        if shared_bytes > self._shared_limit(kernel):
            self._raise_shared_limit(kernel, shared_bytes)
        if self.driver_launch is not None:
            self.driver_launch(kernel, cubes, units, args, shared_bytes, co_resident)
        elif co_resident:
            raise RuntimeError("this CuPy has no driver launch (cupy.cuda.driver.launchKernel), and with it no "
                               "cooperative launch, which a kernel whose cubes wait for one another needs "
                               "(a split tail: choose split_tail=0)")
        else:
            kernel((cubes,), (units,), args, shared_mem=shared_bytes)

    def prepare_launch(self, kernel, cubes, units, args: tuple, shared_bytes: int, arrays, co_resident: bool = False):
        """A `PreparedLaunch` of ``kernel`` with ``args`` (only the arrays at positions ``arrays``
        change between its calls), or None where launches go through CuPy's Function call."""
        if self.driver_launch is None:
            return None
        if shared_bytes > self._shared_limit(kernel):
            with self.cuda_device:
                self._raise_shared_limit(kernel, shared_bytes)
        return PreparedLaunch(self, kernel, cubes, units, args, shared_bytes, arrays, co_resident)

    def _raise_shared_limit(self, kernel, shared_bytes):
        """A block gets more than 48 KiB of shared memory only after an opt-in per kernel
        (cudaFuncSetAttribute); without it the dynamic part is bounded by 48 KiB less the kernel's
        static part, so every kernel asking for dynamic bytes opts in once (48 KiB of dynamic shared
        memory beside 16 KiB of static failed to launch, CUDA_ERROR_INVALID_VALUE, on an H200).
        Kernels stay alive in the runtime's cache, so their id is a key."""
        if hasattr(kernel, "max_dynamic_shared_size_bytes"):     # cupy.RawKernel
            kernel.max_dynamic_shared_size_bytes = shared_bytes
        else:                                                    # cupy.cuda.function.Function
            driver = self.cp.cuda.driver
            attr = getattr(driver, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 8)
            driver.funcSetAttribute(kernel.ptr, attr, shared_bytes)
        self._dyn_smem[id(kernel)] = (kernel, shared_bytes)

    def _shared_limit(self, kernel) -> int:
        entry = self._dyn_smem.get(id(kernel))
        return entry[1] if entry is not None and entry[0] is kernel else 0

    def check_native(self, x, label):
        if x.device.id != self.cuda_device.id:
            raise TypeError(f"matmul: {label} is on CUDA device {x.device.id}, this engine runs on device "
                            f"{self.cuda_device.id} ({self.device.name})")

    @property
    def device_index(self) -> int:
        return self.cuda_device.id

    def on_stream(self, stream):
        if not stream:
            return contextlib.nullcontext()
        found = self._streams.get(stream)
        if found is None:
            found = self._streams[stream] = self.cp.cuda.ExternalStream(stream, self.cuda_device.id)
            if len(self._streams) > STREAMS_MAX:      # bounded: a process may make streams without end
                self._streams.popitem(last=False)
        return found

    def from_dlpack(self, x, label):
        """A CuPy view of a DLPack object on this runtime's device (no copy)."""
        with self.cuda_device:
            try:
                return self.cp.from_dlpack(x)
            except Exception as exc:  # noqa: BLE001 -- its device or dtype
                raise TypeError(f"matmul: {label} cannot be read through DLPack on {self.device.name}: {exc}") from exc

    def from_address(self, address: int, shape: tuple, strides: tuple, dtype: np.dtype, owner):
        """A CuPy view of the elements at ``address`` on this runtime's device (strides in bytes,
        none negative) that keeps ``owner`` (what owns the memory) alive: what a torch tensor's
        DLPack import makes, for a fraction of its host time (torch's ``__dlpack__`` looks up the
        device and streams in Python: about 70 us a tensor on the H100 hosts, three a grouped call)."""
        cp = self.cp
        span = span_of(0, shape, strides, dtype.itemsize)[1]
        memory = cp.cuda.UnownedMemory(address, span, owner, self.cuda_device.id)
        return cp.ndarray(shape, dtype, cp.cuda.MemoryPointer(memory, 0), strides=strides)

    def from_cuda_array_interface(self, x, label):
        with self.cuda_device:
            try:
                return self.cp.asarray(x)
            except Exception as exc:  # noqa: BLE001
                raise TypeError(f"matmul: {label} cannot be read through __cuda_array_interface__: {exc}") from exc

    def synchronize(self):
        with self.cuda_device:
            self.cp.cuda.get_current_stream().synchronize()

    def is_native(self, x):
        return isinstance(x, self.cp.ndarray)

    def to_device(self, host):
        with self.cuda_device:
            return self.cp.asarray(host)

    def to_host(self, x):
        return self.cp.asnumpy(x)

    def empty(self, shape, dtype):
        if self.cp.cuda.runtime.getDevice() == self.cuda_device.id:   # the per-call path: no context switch
            return self.cp.empty(shape, dtype=dtype)
        with self.cuda_device:
            return self.cp.empty(shape, dtype=dtype)

    def fill_zero(self, x):
        x.fill(0)

    def queue_key(self, stream=None):
        ptr = self.cp.cuda.get_current_stream().ptr if stream is None else stream
        # The per-thread default stream has one handle for a different stream in each thread.
        return (ptr, threading.get_ident()) if ptr == _PER_THREAD_STREAM else ptr

    def contiguous(self, x, dtype=None):
        with self.cuda_device:
            return self.cp.array(x, dtype=dtype, order="C", copy=True)

    def copy_into(self, dst, src):
        dst[...] = src

    def ptr_arg(self, x):
        # CuPy passes an ndarray argument as the pointer to its first element.
        return x, 0

    def element_address(self, x):
        return x.data.ptr // x.itemsize

    def byte_span(self, x):
        lo, hi = span_of(x.data.ptr, x.shape, x.strides, x.itemsize)
        return "cuda", lo, hi
