"""CUDA runtime through CuPy: `RawModule` compiles (NVRTC, with CuPy's on-disk cache), kernels run
on CuPy's current stream, and arrays are `cupy.ndarray`."""
from __future__ import annotations

import contextlib
from collections import OrderedDict
import hashlib
import os
import sys
import tempfile
import threading

import numpy as np

from ..errors import BackendUnavailableError, CaptureError
from ..version import extra_hint
from .cuda_launch import DriverLauncher, PreparedLaunch, ensure_context
from ..codegen.device import DeviceInfo
from ..codegen.dialect import cuda_target_arch
from .base import STREAMS_MAX, Runtime, span_of
from .tensor_map import ENCODER

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


def _cuda_include_dir(cp) -> str:
    """The toolkit's include folder. /usr/local/cuda first: CuPy's own CUDA path may point at the
    pip wheels' headers, whose <mma.h> lacks the crt/ headers it includes (seen on the H100 box)."""
    for root in ("/usr/local/cuda", os.environ.get("CUDA_PATH"), cp.cuda.get_cuda_path()):
        if root and os.path.exists(os.path.join(root, "include", "crt", "mma.h")):
            return os.path.join(root, "include")
    return os.path.join(cp.cuda.get_cuda_path() or "/usr/local/cuda", "include")


def cuda_available() -> bool:
    try:
        cupy = _cupy()
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def cupy_cache_dir(cp) -> str:
    """CuPy's kernel cache folder: its own answer where this CuPy version exposes one, else the
    documented rule ($CUPY_CACHE_DIR, default ~/.cupy/kernel_cache)."""
    for module in (getattr(cp.cuda, "compiler", None), getattr(cp, "_environment", None)):
        getter = getattr(module, "get_cache_dir", None)
        if getter is not None:
            return getter()
    return os.environ.get("CUPY_CACHE_DIR", os.path.expanduser("~/.cupy/kernel_cache"))


def arch_specific_cubin(cp, source: str, arch: str) -> bytes:
    """NVRTC's cubin of ``source`` for ``arch``, through a file in CuPy's kernel cache folder
    (``CUPY_CACHE_DIR``) keyed by the source, options and NVRTC version. Files are written to a
    temporary name and renamed (atomic), and carry a hash of their cubin: a torn or foreign file
    is recompiled, never loaded."""
    from cupy_backends.cuda.libs import nvrtc
    options = ("--std=c++17", f"--gpu-architecture={arch}")
    key = hashlib.sha256(repr((nvrtc.getVersion(), options, source)).encode()).hexdigest()
    folder = cupy_cache_dir(cp)
    path = os.path.join(folder, f"gemm_engine_{key}.cubin")
    try:
        with open(path, "rb") as f:
            data = f.read()
        digest, cubin = data[:64], data[64:]
        if digest == hashlib.sha256(cubin).hexdigest().encode():
            return cubin
    except OSError:
        pass
    prog = nvrtc.createProgram(source, "gemm_engine_kernel.cu", (), ())
    try:
        try:
            nvrtc.compileProgram(prog, options)
        except nvrtc.NVRTCError as exc:
            raise RuntimeError(f"NVRTC could not compile the kernel for {arch}:\n"
                               f"{nvrtc.getProgramLog(prog)}") from exc
        cubin = nvrtc.getCUBIN(prog)
    finally:
        nvrtc.destroyProgram(prog)
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".gemm_engine_")
        with os.fdopen(fd, "wb") as f:
            f.write(hashlib.sha256(cubin).hexdigest().encode() + cubin)
        os.replace(tmp, path)
    except OSError:
        pass      # a read-only cache folder costs a compile per process, not a failure
    return cubin


class CudaRuntime(Runtime):
    backend = "cuda"

    def __init__(self, device=None):
        super().__init__()
        # id(kernel) -> (kernel, dynamic shared bytes it may take): the kernel is kept with its id,
        # so the id cannot be reused by another kernel while the entry exists.
        self._dyn_smem: dict[int, tuple] = {}
        # Modules compiled outside RawModule (arch-specific): kept for the runtime's life, since a
        # plan (the planner keeps more than the kernel cache) may still launch their functions and
        # a Function does not keep its module alive everywhere. One per distinct sm_90a source.
        self._modules: list = []
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

    def _compile(self, source, name):
        ensure_context(self.cp, self.cuda_device.id)
        arch = cuda_target_arch(self.device, source)
        if arch != self.device.arch:
            return self._compile_arch_specific(source, name, arch)
        options = ["--std=c++17", f"--gpu-architecture={arch}"]
        if "#include <" in source:
            # NVRTC has no CUDA include path of its own: headers such as <mma.h> need it given.
            options.append(f"-I{_cuda_include_dir(self.cp)}")
        with self.cuda_device:
            module = self.cp.RawModule(code=source, options=tuple(options))
            return module.get_function(name)

    def _compile_arch_specific(self, source, name, arch):
        """Kernels that need an arch-specific target ("sm_90a": wgmma) are compiled to a cubin by
        NVRTC directly: CuPy's RawModule appends its own ``-arch=sm_XY`` after our options, which
        would drop the suffix, and its cache takes only plain numeric archs. The cubin is kept in
        CuPy's kernel cache folder (`arch_specific_cubin`) so a new process skips NVRTC (~1 s)."""
        with self.cuda_device:
            module = self.cp.cuda.function.Module()
            module.load(arch_specific_cubin(self.cp, source, arch))
            self._modules.append(module)
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
        """A block gets more than 48 KiB of dynamic shared memory only after an opt-in per kernel
        (cudaFuncSetAttribute). Kernels stay alive in the runtime's cache, so their id is a key."""
        if hasattr(kernel, "max_dynamic_shared_size_bytes"):     # cupy.RawKernel
            kernel.max_dynamic_shared_size_bytes = shared_bytes
        else:                                                    # cupy.cuda.function.Function
            driver = self.cp.cuda.driver
            attr = getattr(driver, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 8)
            driver.funcSetAttribute(kernel.ptr, attr, shared_bytes)
        self._dyn_smem[id(kernel)] = (kernel, shared_bytes)

    def _shared_limit(self, kernel) -> int:
        entry = self._dyn_smem.get(id(kernel))
        return entry[1] if entry is not None and entry[0] is kernel else 48 * 1024

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
