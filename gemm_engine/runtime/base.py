"""What the engine needs from a backend runtime: device facts, compiled kernels and arrays.

`CudaRuntime` (CuPy) and `OpenCLRuntime` (PyOpenCL) implement it. Compiled kernels are kept per
source text in memory; on disk the compilers' own binary caches keep them keyed by source, options
and device (CuPy's kernel cache, with the sm_90a cubins beside it, cuda.py; PoCL's and NVIDIA's
OpenCL caches), written atomically and checked when read, so processes may share them.
`compile_many` compiles kernels in parallel (warmup.py), and no kernel is compiled while the
current CUDA stream captures a graph (`check_compile`): the error says to warm up first.

A compile is two steps: `build` (the compiler's work: a binary, kept per source; thread-safe and
touching no stream, so a background worker may do it: runtime/background.py) and `_load` (the
binary's kernel, by the thread that launches it). `ready` says whether a kernel needs no build.
"""
from __future__ import annotations

import contextlib
import os
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from ..codegen.device import DeviceInfo
from ..errors import CaptureError
from ..dtypes import bits_dtype
from ..codegen.dialect import Dialect, dialect_for


#: Compiled kernels kept per runtime (least recently used first out; the compilers' own binary
#: caches on disk make a recompile cheap).
KERNELS_MAX = 256
#: Streams (queues) a runtime keeps something for: a process may make streams without end.
STREAMS_MAX = 64


class Runtime(ABC):
    backend = ""
    device: DeviceInfo
    #: True for a CPU device (PoCL and the like): the CLI's default sizes stay small there.
    is_cpu = False
    #: Whether `launch` can promise that all cubes of a grid run at once (``co_resident``): the
    #: planner refuses a kernel that needs it on a runtime that cannot.
    co_resident_launch = False
    #: Whether a built binary may be loaded while the current stream captures a graph (CUDA: drivers
    #: from 12.3 allow module loading during capture); else only compiled kernels run there.
    loads_during_capture = True

    def __init__(self):
        self._kernels: OrderedDict[str, object] = OrderedDict()
        self._kernels_lock = threading.Lock()
        self._binaries: OrderedDict[str, object] = OrderedDict()   # source -> its built binary
        self._building: dict[str, Future] = {}      # source -> the build under way (`build`)
        self._kept: OrderedDict = OrderedDict()     # (queue, dtype) -> `kept_scratch`'s buffer
        self._kept_lock = threading.Lock()

    @property
    def dialect(self) -> Dialect:
        d = getattr(self, "_dialect", None)
        if d is None:
            d = self._dialect = dialect_for(self.device)
        return d

    def limit_compute_units(self, units: int | None) -> None:
        """Let kernels set up from now on take at most ``units`` compute units (None: all); see
        `DeviceInfo.limited_to`."""
        self.device = self.device.limited_to(units)
        self._dialect = None

    def kernel(self, source: str, name: str):
        """The compiled kernel for ``source`` (compiled once per runtime while it stays cached)."""
        key = source + "\0" + name
        with self._kernels_lock:
            fn = self._kernels.get(key)
            if fn is not None:
                self._kernels.move_to_end(key)
                return fn
        if not (self.built(source) and self.loads_during_capture):
            self.check_compile(name)
        fn = self._compile(source, name)
        with self._kernels_lock:
            self._kernels[key] = fn
            if len(self._kernels) > KERNELS_MAX:
                self._forget(self._kernels.popitem(last=False)[1])
        return fn

    def compiled(self, source: str, name: str) -> bool:
        """Whether ``kernel(source, name)`` is in this runtime's memory already."""
        return (source + "\0" + name) in self._kernels

    def built(self, source: str) -> bool:
        """Whether ``source``'s binary is in this runtime's memory (only a load is left)."""
        return source in self._binaries

    def ready(self, source: str, name: str) -> bool:
        """Whether ``kernel(source, name)`` needs no compiler: compiled, built, or (`_on_disk`) in
        a binary cache on disk, which loads in milliseconds."""
        return self.compiled(source, name) or self.built(source) or self._on_disk(source)

    def _on_disk(self, source: str) -> bool:
        """Whether a binary cache on disk holds ``source``'s binary (unknown: False)."""
        return False

    def build(self, source: str):
        """``source``'s binary (`_build`), kept for `_compile`: any thread may call it. A source
        being built on another thread (a background worker, a parallel warmup) is built once: this
        call waits for that build's binary, or its error."""
        with self._kernels_lock:
            found = self._binaries.get(source)
            if found is not None:
                return found
            pending = self._building.get(source)
            if pending is None:
                pending = self._building[source] = Future()
                mine = True
            else:
                mine = False
        if not mine:
            return pending.result()
        try:
            found = self._build(source)
            with self._kernels_lock:
                self._binaries[source] = found
                if len(self._binaries) > KERNELS_MAX:
                    self._binaries.popitem(last=False)
            pending.set_result(found)
            return found
        except Exception as exc:
            pending.set_exception(exc)
            raise
        finally:
            with self._kernels_lock:
                self._building.pop(source, None)
            if not pending.done():      # interrupted (KeyboardInterrupt...): the waiters are not
                pending.set_exception(RuntimeError("the build of this kernel was interrupted on another thread"))

    def _compile(self, source: str, name: str):
        """Kernel ``name`` of ``source``: its binary built (or kept) and loaded."""
        return self._load(self.build(source), name)

    def compile_many(self, jobs, workers: int | None = None) -> int:
        """Compile every (source, name) of ``jobs`` not compiled yet, ``workers`` at a time (default:
        one per CPU; the compilers release the GIL). Returns how many were compiled. The first
        failure is raised once all are done."""
        todo = list(dict.fromkeys((s, n) for s, n in jobs if not self.compiled(s, n)))
        if not todo:
            return 0
        for _, name in todo[:1]:
            self.check_compile(name)
        workers = max(1, min(len(todo), workers or os.cpu_count() or 1))
        if workers == 1:
            for source, name in todo:
                self.kernel(source, name)
            return len(todo)
        with ThreadPoolExecutor(workers, thread_name_prefix="gemm_engine_compile") as pool:
            futures = [pool.submit(self._compile_in_thread, s, n) for s, n in todo]
        for f in futures:
            f.result()
        return len(todo)

    def _compile_in_thread(self, source: str, name: str):
        """`kernel` from a worker thread (CUDA: the device made current there first)."""
        return self.kernel(source, name)

    def capturing(self, stream=None) -> bool:
        """Whether the current stream (or ``stream``, a raw handle) is capturing a CUDA graph
        (never, without CUDA streams)."""
        return False

    def check_compile(self, name: str) -> None:
        """RuntimeError where compiling now would break a CUDA graph being captured."""
        if self.capturing():
            raise CaptureError(
                f"gemm_engine: kernel {name} is not compiled yet, and the current CUDA stream is capturing a CUDA "
                f"graph: compiling and loading a kernel during capture would invalidate the capture. Warm up "
                f"first: run the same call once before capturing, or gemm_engine.warmup(...) with its shapes "
                f"(or model)")

    def _forget(self, kernel) -> None:
        """Drop what the runtime keeps beside a kernel the cache evicted (nothing by default)."""

    @abstractmethod
    def _build(self, source: str):
        """The compiler's output for ``source`` (no stream, no launch: safe on any thread)."""

    @abstractmethod
    def _load(self, binary, name: str):
        """Kernel ``name`` of a built ``binary``, ready to launch from the calling thread."""

    @abstractmethod
    def launch(self, kernel, cubes: int, units: int, args: list, shared_bytes: int = 0,
               co_resident: bool = False) -> None:
        """Run ``kernel`` on ``cubes`` cubes of ``units`` units. ``args`` holds `DeviceArray`
        pointer arguments (as `ptr_arg` returns them) and Python ints (passed as 64-bit).
        ``shared_bytes``: dynamic shared memory per cube (CUDA; a config's ``dynamic_shared_bytes``).
        ``co_resident``: all cubes must run at once (`Launch.co_resident`); a runtime that cannot
        promise it raises before launching."""

    @abstractmethod
    def launch_converted(self, kernel, cubes: int, units: int, args: tuple, shared_bytes: int = 0,
                         co_resident: bool = False) -> None:
        """`launch` with every integer argument already an np.int64 (the cached per-call path)."""

    def on_stream(self, stream):
        """A context in which this runtime's work goes to ``stream`` (a library's stream handle:
        torch's current CUDA stream), or changes nothing (None, or a runtime without streams)."""
        return contextlib.nullcontext()

    def order_after(self, **arrays) -> None:
        """A repeated call's ordering against the queues its arrays carry (`check_native` for each
        native one, as the general path does): PyOpenCL arrays have queues of their own; CUDA work
        runs on the caller's stream, so nothing here."""

    def check_native(self, x, label: str) -> None:
        """Refuse (TypeError naming ``label``) a native array this runtime cannot read as it is, or
        wait for work on it that another queue has pending."""

    def record(self, array) -> None:
        """Note that the work just queued writes ``array`` (OpenCL: its event, for other queues)."""

    def after_launch(self, written, read=()) -> None:
        """Order the caller's queues after the work just queued: it wrote ``written`` and read the
        device arrays ``read`` (OpenCL arrays carry queues of their own; CUDA work runs on the
        caller's stream, so nothing here)."""
        self.record(written)

    def logical_dtype(self, x) -> np.dtype:
        """The dtype of a native device array's elements."""
        return x.dtype

    def from_dlpack(self, x, label: str):
        raise TypeError(f"matmul: {label} is a device array the {self.backend} backend cannot read")

    def from_cuda_array_interface(self, x, label: str):
        raise TypeError(f"matmul: {label} is a CUDA array; this engine runs on the {self.backend} backend")

    def prepare_launch(self, kernel, cubes: int, units: int, args: tuple, shared_bytes: int, arrays,
                       co_resident: bool = False):
        """A launch of ``kernel`` with ``args`` whose only changing arguments are the arrays at
        positions ``arrays`` (called with them), or None where the runtime has no such path."""
        return None

    @abstractmethod
    def synchronize(self) -> None:
        """Wait until all work queued by this runtime has finished (for host-side timing)."""

    # -- arrays ------------------------------------------------------------------------------
    @abstractmethod
    def is_native(self, x) -> bool: ...

    @abstractmethod
    def to_device(self, host: np.ndarray): ...

    @abstractmethod
    def to_host(self, x) -> np.ndarray: ...

    def upload(self, host: np.ndarray):
        """A host array on the device in its own dtype (bfloat16 and fp8 moved as their bits: device
        libraries may lack them; the kernels know the type)."""
        bits = bits_dtype(host.dtype)
        return self.to_device(host if bits is None else host.view(bits))

    def download(self, x, dtype) -> np.ndarray:
        """The values of ``x`` (a device array, or a host array already in ``dtype``) on the host,
        in their logical ``dtype`` (bits viewed back as bfloat16 / fp8)."""
        host = x if isinstance(x, np.ndarray) else self.to_host(x)
        return host.view(dtype) if host.dtype != dtype else host

    @abstractmethod
    def empty(self, shape, dtype): ...

    @abstractmethod
    def fill_zero(self, x) -> None: ...

    def scratch(self, count: int, dtype):
        """A fresh device buffer of ``count`` ``dtype`` elements for the kernels queued now (a
        plan's workspace), freed behind them."""
        return self.empty((count,), dtype)

    def kept_scratch(self, count: int, dtype, *, zeroed: int | None = None, stream=None):
        """A device buffer of at least ``count`` ``dtype`` elements, zero-filled when made and then
        kept for the work queued from here on (the current stream or queue): kernels that use it
        leave its first ``zeroed`` elements zero (None: all; the split tail's flags, batch/split_tail.py;
        the rest is scratch they write before they read). Work on one queue runs in order, so
        they never use it at once; a larger request replaces it (the old one is freed behind the
        work queued on it). A CUDA graph being captured gets a fresh one (`scratch`) whose first
        ``zeroed`` elements a captured fill zeroes (its replays may run beside later work of the
        stream that captured it): only those, so that each replayed call fills the flags, not the
        partial tiles (12.7 MB for 132 slots of 192 x 128: about 5 us a call on the H100).
        ``stream``: a raw stream handle where the caller has one (the prepared launches), else the
        current stream's."""
        if self.capturing(stream):
            with self.on_stream(stream):
                fresh = self.scratch(count, dtype)
                self.fill_zero(fresh if zeroed is None or zeroed >= count else fresh[:zeroed])
            return fresh
        key = (self.queue_key(stream), dtype)
        found = self._kept.get(key)       # the per-call path: a hit needs no lock
        if found is not None and found.size >= count:
            return found
        with self.on_stream(stream):
            return self._make_kept(count, np.dtype(dtype))

    def _make_kept(self, count: int, dtype: np.dtype):
        key = (self.queue_key(), dtype)
        with self._kept_lock:
            kept = self._kept
            found = kept.get(key)
            if found is not None and found.size >= count:
                kept.move_to_end(key)
                return found
            found = kept[key] = self.empty((count,), dtype)
            self.fill_zero(found)
            kept.move_to_end(key)
            if len(kept) > STREAMS_MAX:       # bounded, as the streams are: least recently used out
                kept.popitem(last=False)
            return found

    def queue_key(self, stream=None):
        """Identifies the queue (stream) that work queued now goes to (or ``stream``, a raw
        handle): the same key only for work that runs in order."""
        return None


    @abstractmethod
    def contiguous(self, x, dtype=None):
        """A C-contiguous copy of x (materializing broadcasts), cast to ``dtype`` if given."""

    @abstractmethod
    def copy_into(self, dst, src) -> None:
        """``dst[...] = src`` with numpy's same-kind cast; dst may be strided."""

    @abstractmethod
    def ptr_arg(self, x) -> tuple[object, int]:
        """(kernel argument for x's buffer, element offset of x's first element from it)."""

    @abstractmethod
    def element_address(self, x) -> int:
        """x's first element's address in elements (buffers assumed 256-byte aligned on OpenCL)."""

    @abstractmethod
    def byte_span(self, x) -> tuple[object, int, int]:
        """(buffer identity, first byte, one past last byte) that x's elements can touch."""

    def may_overlap(self, x, y) -> bool:
        bx, lo_x, hi_x = self.byte_span(x)
        by, lo_y, hi_y = self.byte_span(y)
        return bx == by and lo_x < hi_y and lo_y < hi_x


def span_of(base: int, shape, strides, itemsize: int) -> tuple[int, int]:
    """First and one-past-last byte an array with these strides can touch."""
    lo = hi = base
    for size, stride in zip(shape, strides):
        if size == 0:
            return base, base
        extent = (size - 1) * stride
        lo, hi = (lo + extent, hi) if extent < 0 else (lo, hi + extent)
    return lo, hi + itemsize
