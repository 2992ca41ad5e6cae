"""OpenCL runtime through PyOpenCL: one context and in-order queue per engine, programs built by
PyOpenCL (which keeps its own on-disk binary cache), arrays are `pyopencl.array.Array`. On NVIDIA's
driver the program's PTX is compiled again by nvJitLink where that runs right (runtime/sass.py)."""
from __future__ import annotations

import os
import tempfile
import warnings
from dataclasses import replace

import numpy as np

from ..errors import BackendUnavailableError
from ..version import extra_hint
from ..codegen.device import DeviceInfo
from .base import Runtime, span_of
from . import sass
from .opencl_probe import compute_capability, isa_and_plane, probe_device, vendor_of
from ..codegen.strided_copy import strided_copy_source

#: Environment variable choosing an OpenCL device: "PLATFORM_SUBSTRING" or "PLATFORM:DEVICE_INDEX".
DEVICE_ENV = "GEMM_ENGINE_OPENCL_DEVICE"


def _pyopencl():
    _cache_home_fixed()
    try:
        import pyopencl as cl
        import pyopencl.array as cla
    except ImportError as exc:
        raise BackendUnavailableError(
            f"the OpenCL backend needs PyOpenCL ({extra_hint('opencl', 'pyopencl')}) and an OpenCL "
            "runtime (on Debian and Ubuntu: apt-get install pocl-opencl-icd)") from exc
    return cl, cla


#: pyopencl's own variable choosing a context ("0", "0:1", ...), honoured when ours is not set.
PYOPENCL_ENV = "PYOPENCL_CTX"


def _unusable_cache_home() -> str | None:
    """The cache folder PoCL would write to, when it cannot be one (a file, say): PoCL then lists no
    device at all, which reads like a missing driver. None when it looks usable."""
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    parent = home
    while parent and not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if os.path.isdir(home) or (parent and os.path.isdir(parent) and os.access(parent, os.W_OK)):
        return None
    return home


def _devices(cl):
    try:
        platforms = cl.get_platforms()
    except Exception as exc:
        raise BackendUnavailableError(f"no OpenCL platform found: {exc}") from exc
    devices = [(p, d) for p in platforms for d in p.get_devices()]
    if not devices:
        hint = "(on Debian: apt-get install pocl-opencl-icd)"
        bad = _unusable_cache_home()
        if bad is not None:
            hint = (f"(the cache folder {bad!r} is not a usable folder: PoCL lists no device without its kernel "
                    f"cache; point $XDG_CACHE_HOME at a folder)")
        raise BackendUnavailableError(f"no OpenCL device found {hint}")
    return devices


def _cache_home_fixed() -> None:
    """PoCL (its kernel cache) and PyOpenCL (its binary cache) keep their caches under
    $XDG_CACHE_HOME, and PoCL lists no device at all when it cannot, which reads like a missing
    driver: where it is not a usable folder, this process gets a temporary one (before the first
    OpenCL call reads it), with a warning."""
    bad = _unusable_cache_home()
    if bad is None:
        return
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="gemm_engine_cache_")
    warnings.warn(f"gemm_engine: the cache folder {bad!r} ($XDG_CACHE_HOME) is not a usable folder, which leaves "
                  f"PoCL without devices; this process caches kernels in {os.environ['XDG_CACHE_HOME']} instead "
                  f"(point $XDG_CACHE_HOME at a folder)", RuntimeWarning, stacklevel=4)


def _listing(devices) -> str:
    return "; ".join(f"{i}: {p.name}: {d.name}" for i, (p, d) in enumerate(devices))


def _pick_device(cl, device):
    """The device ``device`` names: a pyopencl.Device, an index into every platform's devices, or a
    platform / device name substring with an optional ``:index`` among its matches (default:
    $GEMM_ENGINE_OPENCL_DEVICE, else the first GPU, else the first device). Errors list them."""
    if isinstance(device, cl.Device):
        return device
    if device is not None and (isinstance(device, bool) or not isinstance(device, (str, int))):
        raise TypeError(f"device: expected an OpenCL device index (int), a name substring (str, optionally "
                        f"':index') or a pyopencl.Device, got {type(device).__name__} {device!r}")
    devices = _devices(cl)
    spec = device if device is not None else os.environ.get(DEVICE_ENV)
    if isinstance(spec, int):
        if not 0 <= spec < len(devices):
            raise ValueError(f"device: OpenCL device index {spec} out of range; devices: {_listing(devices)}")
        return devices[spec][1]
    if spec:
        name, _, index = str(spec).partition(":")
        chosen = [d for p, d in devices if name.lower() in (p.name + " " + d.name).lower()]
        where = "device" if device is not None else f"${DEVICE_ENV}"
        if not chosen:
            raise ValueError(f"{where}: no OpenCL device matches {name!r}; devices: {_listing(devices)}")
        if index and (not index.isdigit() or int(index) >= len(chosen)):
            raise ValueError(f"{where}: {spec!r} asks for match {index!r}, but {name!r} matches "
                             f"{len(chosen)} device(s): {[d.name for d in chosen]}")
        return chosen[int(index or 0)]
    # Prefer a GPU; else the first device.
    gpus = [d for p, d in devices if d.type & cl.device_type.GPU]
    return (gpus or [d for _, d in devices])[0]


class OpenCLRuntime(Runtime):
    backend = "opencl"

    def __init__(self, device=None, context=None, queue=None):
        """On ``queue`` (its context and device) or in ``context`` (``device`` among its devices,
        default its first), else a context of its own on ``device`` (see `_pick_device`;
        $PYOPENCL_CTX is honoured when neither ``device`` nor $GEMM_ENGINE_OPENCL_DEVICE is set)."""
        super().__init__()
        cl, cla = self.cl, self.cla = _pyopencl()
        if queue is not None:
            if not isinstance(queue, cl.CommandQueue):
                raise TypeError(f"queue: expected a pyopencl.CommandQueue, got {type(queue).__name__}")
            context, dev = queue.context, queue.device
        elif context is not None:
            if not isinstance(context, cl.Context):
                raise TypeError(f"context: expected a pyopencl.Context, got {type(context).__name__}")
            dev = _pick_device(cl, device) if device is not None else context.devices[0]
            if dev not in context.devices:
                raise ValueError(f"device: {dev.name} is not a device of the given context "
                                 f"({[d.name for d in context.devices]})")
        elif device is None and not os.environ.get(DEVICE_ENV) and os.environ.get(PYOPENCL_ENV):
            try:
                context = cl.create_some_context(interactive=False)
            except Exception as exc:  # noqa: BLE001 -- PyOpenCL's RuntimeError names nothing
                raise ValueError(f"${PYOPENCL_ENV}={os.environ[PYOPENCL_ENV]!r} matches no OpenCL platform and "
                                 f"device ({exc}); devices: {_listing(_devices(cl))} (as PLATFORM:DEVICE indexes, "
                                 f"e.g. '0:0'; or unset it)") from None
            dev = context.devices[0]
        else:
            dev = _pick_device(cl, device)
        self.context = context or cl.Context([dev])
        self.queue = queue or cl.CommandQueue(self.context)
        self.cl_device = dev
        self.is_cpu = bool(dev.type & cl.device_type.CPU)
        self._last_event = None
        self._events = None          # the launches' events while `span_seconds` records them
        self.device = self._probed(cl, dev)

    @staticmethod
    def _probed(cl, dev) -> DeviceInfo:
        """The device's facts, with what the capability probe found its compiler offers (tensor-core
        instructions: `Dialect.supports`)."""
        vendor = vendor_of(cl, dev)
        isa, plane = isa_and_plane(dev, vendor)
        info = DeviceInfo(
            backend="opencl",
            name=f"{dev.platform.name}: {dev.name}",
            compute_units=int(dev.max_compute_units),
            max_shared_memory=int(dev.local_mem_size),
            max_threads_per_cube=int(dev.max_work_group_size),
            plane_size=plane,
            compute_capability=compute_capability(dev) if vendor == "nvidia" else None,
            fp64=bool(dev.double_fp_config) or "cl_khr_fp64" in dev.extensions,
            vendor=vendor,
            isa=isa,
            vector_width=int(dev.native_vector_width_float) if vendor == "cpu" else 0,
        )
        features, refusals = probe_device(cl, dev, info)
        if vendor == "nvidia":   # machine code by nvJitLink rather than the driver (runtime/sass.py)
            refused = dict(refusals)
            why = sass.check(cl, dev, info.compute_capability)
            if why is None:
                features |= {sass.FEATURE}
                why = sass.check_wgmma(cl, dev, info.compute_capability)
                if why is None:
                    features |= {sass.WGMMA}
                else:
                    refused[sass.WGMMA] = why
            else:
                refused[sass.FEATURE], refused[sass.WGMMA] = why, f"needs {sass.FEATURE} ({why})"
            refusals = tuple(sorted(refused.items()))
        return replace(info, features=features, refusals=refusals)

    def _build(self, source):
        built = self.cl.Program(self.context, source).build(options=["-cl-std=CL1.2"])
        if sass.FEATURE in self.device.features:
            return sass.program(self.cl, self.context, self.cl_device, built,
                                sass.target(self.device.compute_capability))
        return built

    def _load(self, program, name):
        return getattr(program, name)

    def launch(self, kernel, cubes, units, args, shared_bytes: int = 0, co_resident: bool = False):
        # shared_bytes: CUDA's dynamic shared memory; no OpenCL component asks for it.
        conv = tuple(np.int64(a) if isinstance(a, (int, np.integer)) else a for a in args)
        self.launch_converted(kernel, cubes, units, conv, shared_bytes, co_resident)

    def launch_converted(self, kernel, cubes, units, args: tuple, shared_bytes: int = 0, co_resident: bool = False):
        """`launch` for arguments already converted (integers as np.int64): the per-call path."""
        if co_resident:   # OpenCL 1.2 has no launch that keeps every work-group resident at once
            raise RuntimeError("a kernel whose cubes wait for one another needs a co-resident (cooperative) "
                               "launch, which OpenCL does not offer")
        self._last_event = kernel(self.queue, (cubes * units,), (units,), *args)
        if self._events is not None:
            self._events.append(self._last_event)

    @property
    def profiling(self) -> bool:
        """Whether the queue keeps profiling times (a queue made with PROFILING_ENABLE, passed as
        ``Engine(queue=...)``): the timing then reads the kernels' own times (`span_seconds`)."""
        return bool(self.queue.properties & self.cl.command_queue_properties.PROFILING_ENABLE)

    def span_seconds(self, fn, count: int) -> float:
        """Seconds from the start of the first kernel that ``count`` calls of ``fn`` launch to the end
        of the last, by the queue's profiling times (the device's clock, as CUDA events are)."""
        self._events = []
        try:
            for _ in range(count):
                fn()
            self.queue.finish()
            events = self._events
        finally:
            self._events = None
        if not events:
            raise RuntimeError("span_seconds: the calls launched no kernel")
        return (max(e.profile.end for e in events) - min(e.profile.start for e in events)) * 1e-9

    def order_after(self, **arrays) -> None:
        for label, x in arrays.items():
            if x is not None and self.is_native(x):
                self.check_native(x, label)

    def check_native(self, x, label: str) -> None:
        """An array of another context is refused; one on another queue is ordered before this
        runtime's next work: a marker on its queue (work pending there, whether or not it recorded an
        event on the array) and its events, which this runtime's queue waits for on the device."""
        if x.context != self.context:
            raise TypeError(f"matmul: {label} is a pyopencl array of another context than this engine's "
                            f"(pass Engine(context=...) or Engine(queue=...) to run in it)")
        if x.offset % x.dtype.itemsize:
            raise ValueError(f"matmul: {label} starts {x.offset} bytes into its buffer, not a multiple of its "
                             f"{x.dtype.itemsize}-byte elements: kernels address whole elements (copy it first)")
        if x.queue is not None and x.queue is not self.queue:
            waits = [self.cl.enqueue_marker(x.queue)] + list(x.events)
            self.cl.enqueue_barrier(self.queue, wait_for=waits)

    def record(self, array) -> None:
        """Work on ``array``'s own queue (a caller's ``out``) waits for the kernel that wrote it: its
        events (PyOpenCL's own operations wait for them) and a barrier on that queue (the caller's
        kernels too)."""
        if self._last_event is not None and isinstance(array, self.cla.Array) and array.queue is not None \
                and array.queue is not self.queue:
            array.add_event(self._last_event)
            self.cl.enqueue_barrier(array.queue, wait_for=[self._last_event])

    def after_launch(self, written, read=()) -> None:
        """The kernel wrote ``written`` and read ``read``: the queues of both wait for it (a caller
        that overwrites an input on its own queue must not do so under the kernel's reads)."""
        self.record(written)
        if self._last_event is None:
            return
        done = {id(getattr(written, "queue", None))}
        for x in read:
            queue = getattr(x, "queue", None)
            if isinstance(x, self.cla.Array) and queue is not None and queue is not self.queue and id(queue) not in done:
                done.add(id(queue))
                self.cl.enqueue_barrier(queue, wait_for=[self._last_event])

    def synchronize(self):
        self.queue.finish()

    def is_native(self, x):
        return isinstance(x, self.cla.Array)

    def to_device(self, host):
        return self.cla.to_device(self.queue, np.ascontiguousarray(host))

    def to_host(self, x):
        return x.get() if x.flags.forc else self.contiguous(x).get()

    def empty(self, shape, dtype):
        return self.cla.empty(self.queue, shape, dtype)

    def fill_zero(self, x):
        # Zero bits are zero in every dtype, and pyopencl's fill kernels map no float16 (a masked
        # grouped call's fresh float16 result raised there).
        words = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}.get(x.dtype.itemsize)
        (x.view(words) if words is not None and x.flags.c_contiguous else x).fill(0)

    def contiguous(self, x, dtype=None):
        dtype = np.dtype(dtype or x.dtype)
        if x.flags.c_contiguous:
            y = x.copy()
        else:
            y = self.empty(x.shape, x.dtype)
            self._strided_copy(y, x)
        return y if dtype == x.dtype else y.astype(dtype)

    def copy_into(self, dst, src):
        if src.dtype != dst.dtype:
            src = src.astype(dst.dtype)
        if dst.flags.c_contiguous and src.flags.c_contiguous:
            self._last_event = self.cl.enqueue_copy(self.queue, dst.base_data, src.base_data,
                                                    dst_offset=dst.offset, src_offset=src.offset,
                                                    byte_count=src.nbytes)
            self.record(dst)
        else:
            self._strided_copy(dst, src)
            self.record(dst)

    def _strided_copy(self, dst, src):
        """dst[...] = src for arrays of one dtype and shape with any strides (PyOpenCL has none)."""
        if dst.size == 0:
            return
        ndim = max(src.ndim, 1)
        fn = self.kernel(strided_copy_source(self.dialect, ndim, dst.dtype.itemsize), "strided_copy")
        shape = list(src.shape) or [1]
        args = [src.base_data, src.offset // src.dtype.itemsize, dst.base_data, dst.offset // dst.dtype.itemsize,
                dst.size]
        for dim in range(ndim):
            args += [shape[dim], (src.strides or (0,))[dim] // src.dtype.itemsize,
                     (dst.strides or (0,))[dim] // dst.dtype.itemsize]
        units = 64
        self.launch(fn, -(-dst.size // units), units, args)

    def ptr_arg(self, x):
        return x.base_data, x.offset // x.dtype.itemsize

    def element_address(self, x):
        return x.offset // x.dtype.itemsize

    def byte_span(self, x):
        """(the buffer, bytes) relative to the root buffer: a sub-buffer (``get_sub_region``) is its
        parent's bytes from its origin on, so overlap is judged on the memory, not the handle."""
        buffer, origin = x.base_data, 0
        parent = buffer.get_info(self.cl.mem_info.ASSOCIATED_MEMOBJECT)
        while parent is not None:
            origin += buffer.get_info(self.cl.mem_info.OFFSET)
            buffer, parent = parent, parent.get_info(self.cl.mem_info.ASSOCIATED_MEMOBJECT)
        lo, hi = span_of(origin + x.offset, x.shape, x.strides, x.dtype.itemsize)
        return buffer.int_ptr, lo, hi
