"""OpenCL runtime through PyOpenCL: one context and in-order queue per engine, programs built by
PyOpenCL (which keeps its own on-disk binary cache), arrays are `pyopencl.array.Array`."""
from __future__ import annotations

import os

import numpy as np

from ..errors import BackendUnavailableError
from .device import DeviceInfo
from .runtime import Runtime, span_of
from .strided_copy import strided_copy_source

#: Environment variable choosing an OpenCL device: "PLATFORM_SUBSTRING" or "PLATFORM:DEVICE_INDEX".
DEVICE_ENV = "GEMM_ENGINE_OPENCL_DEVICE"


def _pyopencl():
    try:
        import pyopencl as cl
        import pyopencl.array as cla
    except ImportError as exc:
        raise BackendUnavailableError(
            "the OpenCL backend needs PyOpenCL (pip install 'gemm_engine[opencl]') and an OpenCL "
            "runtime (on Debian: apt-get install pocl-opencl-icd)") from exc
    return cl, cla


def _pick_device(cl, device):
    if device is not None and not isinstance(device, (str, int)):
        return device  # a pyopencl.Device
    try:
        platforms = cl.get_platforms()
    except Exception as exc:
        raise BackendUnavailableError(f"no OpenCL platform found: {exc}") from exc
    devices = [(p, d) for p in platforms for d in p.get_devices()]
    if not devices:
        raise BackendUnavailableError("no OpenCL device found (on Debian: apt-get install pocl-opencl-icd)")
    spec = device if device is not None else os.environ.get(DEVICE_ENV)
    if isinstance(spec, int):
        return devices[spec][1]
    if spec:
        name, _, index = str(spec).partition(":")
        chosen = [d for p, d in devices if name.lower() in (p.name + " " + d.name).lower()]
        if not chosen:
            raise ValueError(f"device: no OpenCL device matches {spec!r}; have "
                             f"{[p.name + ': ' + d.name for p, d in devices]}")
        return chosen[int(index or 0)]
    # Prefer a GPU; else the first device.
    gpus = [d for p, d in devices if d.type & cl.device_type.GPU]
    return (gpus or [d for _, d in devices])[0]


class OpenCLRuntime(Runtime):
    backend = "opencl"

    def __init__(self, device=None):
        super().__init__()
        cl, cla = self.cl, self.cla = _pyopencl()
        dev = _pick_device(cl, device)
        self.context = cl.Context([dev])
        self.queue = cl.CommandQueue(self.context)
        self.cl_device = dev
        plane = 32 if "nvidia" in dev.vendor.lower() else 1
        self.device = DeviceInfo(
            backend="opencl",
            name=f"{dev.platform.name}: {dev.name}",
            compute_units=int(dev.max_compute_units),
            max_shared_memory=int(dev.local_mem_size),
            max_threads_per_cube=int(dev.max_work_group_size),
            plane_size=plane,
            fp64=bool(dev.double_fp_config) or "cl_khr_fp64" in dev.extensions,
        )

    def _compile(self, source, name):
        program = self.cl.Program(self.context, source).build(options=["-cl-std=CL1.2"])
        return getattr(program, name)

    def launch(self, kernel, cubes, units, args, shared_bytes: int = 0):
        # shared_bytes: CUDA's dynamic shared memory; no OpenCL component asks for it.
        conv = tuple(np.int64(a) if isinstance(a, (int, np.integer)) else a for a in args)
        self.launch_converted(kernel, cubes, units, conv, shared_bytes)

    def launch_converted(self, kernel, cubes, units, args: tuple, shared_bytes: int = 0):
        """`launch` for arguments already converted (integers as np.int64): the per-call path."""
        kernel(self.queue, (cubes * units,), (units,), *args)

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
        x.fill(0)

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
            self.cl.enqueue_copy(self.queue, dst.base_data, src.base_data, dst_offset=dst.offset,
                                 src_offset=src.offset, byte_count=src.nbytes)
        else:
            self._strided_copy(dst, src)

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
        if x.offset % x.dtype.itemsize:
            raise ValueError("operand's offset is not a multiple of its item size")
        return x.base_data, x.offset // x.dtype.itemsize

    def element_address(self, x):
        return x.offset // x.dtype.itemsize

    def byte_span(self, x):
        lo, hi = span_of(x.offset, x.shape, x.strides, x.dtype.itemsize)
        return x.base_data.int_ptr, lo, hi
