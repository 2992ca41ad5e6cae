"""Kernel launches through the driver's ``cuLaunchKernel``, for the per-call path.

CuPy's ``Function.__call__`` converts every argument into a parameter object on each call: for the
engine's 14-20 arguments that took 7.6 us of the 15.3 us a repeated small ``matmul`` cost on the
H100 (bench/per_call_overhead.py). Here the parameters live in one reusable block of 8-byte slots
(the driver copies the values when the launch is made, so one block serves every launch of a
thread; each thread has its own, so that two threads never launch each other's values), refilled
with one slice assignment, and ``cuLaunchKernel`` gets the block's address array directly.

Argument types the engine passes: CuPy arrays (their first element's address), ``numpy.int64``
(the kernels' ``i64``), ``numpy.float32`` / ``numpy.float64`` (the epilogue's scalars), and
``bytes`` for a structure passed by value (a TMA tensor map: codegen/signature.py's ``by_value``),
which gets a 64-byte-aligned buffer of its own instead of a slot.
"""
from __future__ import annotations

import ctypes
import struct
import threading

import numpy as np


class ParamBlock:
    """``n`` 8-byte parameter slots and the array of their addresses that cuLaunchKernel reads
    (ctypes arrays: a slice assignment from a list of ints is the cheapest refill)."""

    def __init__(self, n: int):
        self.slots = (ctypes.c_int64 * n)()
        base = ctypes.addressof(self.slots)
        self.addresses = (ctypes.c_void_p * n)(*(base + 8 * i for i in range(n)))
        self.address = ctypes.addressof(self.addresses)

    def raw(self) -> bytes:
        return bytes(self.slots)


class ByValueBlock(ParamBlock):
    """A parameter block for arguments of which some are ``bytes`` (structures passed by value):
    those point into 64-byte-aligned buffers of their own (the driver copies each parameter's
    declared size from where its pointer points), the others into 8-byte slots as in `ParamBlock`.
    Kept per thread and refilled (`fill`): a TMA plan's tensor maps change with every call's
    addresses, and building the block anew cost about 20 us a call on the H100's host."""

    def __init__(self, args: tuple):
        super().__init__(len(args))
        self._buffers = []
        self.by_value = []           # (position, buffer address, size)
        for i, x in enumerate(args):
            if isinstance(x, (bytes, bytearray)):
                raw = ctypes.create_string_buffer(len(x) + 64)
                address = -(-ctypes.addressof(raw) // 64) * 64
                self._buffers.append(raw)
                self.addresses[i] = address
                self.by_value.append((i, address, len(x)))
        self.fill(args)

    def fill(self, args: tuple) -> None:
        """Copy the structures of ``args`` into their buffers (the slots are the caller's)."""
        for i, address, size in self.by_value:
            x = args[i]
            if len(x) != size:
                raise ValueError(f"kernel argument {i}: {len(x)} bytes, the block holds {size}")
            ctypes.memmove(address, x, size)


def _slot_value(x, ndarray) -> int:
    t = type(x)
    if t is np.int64 or t is int:
        return int(x)
    if isinstance(x, ndarray):
        return x.data.ptr
    if t is np.float32:           # the low 4 bytes of the slot: a float parameter reads only those
        return int(x.view(np.int32))
    if t is np.float64:
        return int(x.view(np.int64))
    if isinstance(x, np.integer):
        return int(x)
    if t is bytes:                # a by-value structure: its own buffer (ByValueBlock), no slot
        return 0
    raise TypeError(f"kernel argument of type {t.__name__}: expected a CuPy array, numpy.int64, "
                    f"numpy.float32, numpy.float64 or bytes (a structure passed by value)")


_F32, _F64 = struct.Struct("<f"), struct.Struct("<d")


def _f32_slot(x) -> int:
    """A float parameter's slot: its float32 bits in the low 4 bytes (what `_slot_value` writes for a
    numpy.float32), from a Python or numpy number. struct rounds as numpy.float32 does, but refuses
    a finite value past float32's range, which numpy makes infinite: that one goes through numpy."""
    try:
        return int.from_bytes(_F32.pack(x), "little")
    except OverflowError:
        return int(np.float32(x).view(np.int32))


def _f64_slot(x) -> int:
    return int.from_bytes(_F64.pack(x), "little", signed=True)


def _array_slot(x) -> int:
    return x if type(x) is int else x.data.ptr


def slot_encoder(prepared_value):
    """How a prepared launch writes a new value at the position whose first value (as the runtime
    converted it) is ``prepared_value``: float parameters take Python or numpy floats, index
    parameters ints, array parameters CuPy arrays or addresses (ints). Encoding by position, fixed
    when the launch is prepared, spares every call numpy's scalar conversions (about 1 us each on the
    H100's host, a fused call having four)."""
    t = type(prepared_value)
    if t is np.float32:
        return _f32_slot
    if t is np.float64:
        return _f64_slot
    if t is np.int64 or t is int or isinstance(prepared_value, np.integer):
        return int
    return _array_slot


_THREADS = threading.local()


def ensure_context(cp, device: int) -> None:
    """Make ``device``'s primary context current in the calling thread, once per thread. Driver API
    calls (cuLaunchKernel, cuModuleLoadData) use the thread's current context, and a thread whose
    first CUDA call is ours has none (CUDA_ERROR_INVALID_CONTEXT); cudaSetDevice makes the primary
    context current (CUDA 12 and later), cudaFree(0) initializes it."""
    ready = getattr(_THREADS, "devices", None)
    if ready is None:
        ready = _THREADS.devices = set()
    if device in ready:
        return
    current = cp.cuda.runtime.getDevice()
    cp.cuda.runtime.setDevice(device)
    cp.cuda.runtime.free(0)
    if current != device:
        cp.cuda.runtime.setDevice(current)
    ready.add(device)


#: The driver's errors for a cooperative grid that cannot be resident at once (by name: CuPy's
#: CUDADriverError says it); any other error of the launch is raised as the driver gave it.
_NOT_RESIDENT = ("COOPERATIVE_LAUNCH_TOO_LARGE", "CUDA_ERROR_NOT_SUPPORTED")


class DriverLauncher:
    """Launches compiled kernels (CuPy ``RawKernel`` or ``Function``) with cuLaunchKernel."""

    def __init__(self, cp):
        self.cp = cp
        self.launch_kernel = cp.cuda.driver.launchKernel
        self.launch_cooperative = getattr(cp.cuda.driver, "launchCooperativeKernel", None)
        self._ndarray = cp.ndarray
        self._local = threading.local()          # .blocks: {argument count: ParamBlock}
        # id(kernel) -> (kernel, CUfunction handle): the kernel is kept with its id, so the id cannot
        # be reused by another kernel while the entry exists.
        self._functions: dict[int, tuple] = {}

    @staticmethod
    def available(cp) -> bool:
        return hasattr(getattr(cp.cuda, "driver", None), "launchKernel")

    def function(self, kernel) -> int:
        entry = self._functions.get(id(kernel))
        if entry is None or entry[0] is not kernel:
            fn = getattr(kernel, "kernel", kernel)   # a RawKernel holds its Function in .kernel
            entry = self._functions[id(kernel)] = (kernel, int(fn.ptr))
        return entry[1]

    def launch(self, function: int, cubes: int, units: int, shared_bytes: int, stream: int, params: int,
               co_resident: bool = False) -> None:
        """cuLaunchKernel, or cuLaunchCooperativeKernel where the cubes must be resident at once
        (`Launch.co_resident`: the driver then fails a grid that cannot be, instead of starting
        cubes that wait for ones that never run)."""
        if not co_resident:
            self.launch_kernel(function, cubes, 1, 1, units, 1, 1, shared_bytes, stream, params, 0)
        elif self.launch_cooperative is None:
            raise RuntimeError("this CuPy has no cooperative launch (cupy.cuda.driver.launchCooperativeKernel), "
                               "which a kernel whose cubes wait for one another needs")
        else:
            try:
                self.launch_cooperative(function, cubes, 1, 1, units, 1, 1, shared_bytes, stream, params)
            except Exception as exc:  # noqa: BLE001 -- CuPy's CUDADriverError; only the residency ones reworded
                if not any(code in str(exc) for code in _NOT_RESIDENT):
                    raise
                raise RuntimeError(
                    f"a cooperative launch of {cubes} cubes failed ({exc}): this kernel's cubes wait for one "
                    f"another (a split tail: batch/split_tail.py) and this device or context cannot run them all "
                    f"at once (an MPS limit, a green context); choose a config without it, e.g. "
                    f"algorithm=SpecializedWgmmaAlgorithm(split_tail=0)") from exc

    def __call__(self, kernel, cubes: int, units: int, args: tuple, shared_bytes: int, co_resident: bool = False) -> None:
        if any(type(x) is bytes for x in args):
            key = tuple((i, len(x)) for i, x in enumerate(args) if type(x) is bytes) + (len(args),)
            blocks = getattr(self._local, "by_value", None)
            if blocks is None:
                blocks = self._local.by_value = {}
            block = blocks.get(key)
            if block is None:
                block = blocks[key] = ByValueBlock(args)
            else:
                block.fill(args)
            block.slots[:] = [_slot_value(x, self._ndarray) for x in args]
            self._go(self.function(kernel), cubes, units, shared_bytes, block.address, co_resident)
            return
        blocks = getattr(self._local, "blocks", None)
        if blocks is None:
            blocks = self._local.blocks = {}
        block = blocks.get(len(args))
        if block is None:
            block = blocks[len(args)] = ParamBlock(len(args))
        nd, i64 = self._ndarray, np.int64
        # The two common types inline (this runs on every call), the rest through _slot_value.
        block.slots[:] = [x.data.ptr if type(x) is nd else int(x) if type(x) is i64 else _slot_value(x, nd)
                          for x in args]
        self._go(self.function(kernel), cubes, units, shared_bytes, block.address, co_resident)

    def _go(self, function: int, cubes: int, units: int, shared_bytes: int, params: int, co_resident: bool):
        # The plain launch straight to the driver (this runs on every call); co-resident ones
        # through `launch`.
        stream = self.cp.cuda.get_current_stream().ptr
        if co_resident:
            self.launch(function, cubes, units, shared_bytes, stream, params, True)
        else:
            self.launch_kernel(function, cubes, 1, 1, units, 1, 1, shared_bytes, stream, params, 0)


class PreparedLaunch:
    """One kernel launch whose arguments are all fixed but those at the ``arrays`` positions (the
    three addresses, and a fused call's epilogue values): its own parameter block, filled once,
    gets only those per call (0.3 us instead of the 1.9 us of a full refill,
    bench/per_call_overhead.py). ``__call__`` returns False, launching nothing, when another device
    is current (the caller then takes the general path)."""

    def __init__(self, runtime, kernel, cubes: int, units: int, args: tuple, shared_bytes: int,
                 arrays: tuple[int, ...], co_resident: bool = False):
        launcher = runtime.driver_launch
        self.values = [_slot_value(x, runtime.cp.ndarray) for x in args]
        self.args = tuple(args)
        self._local = threading.local()          # .block: this thread's ParamBlock
        self.positions = arrays
        self.encoders = tuple(slot_encoder(args[p]) for p in arrays)
        self.function = launcher.function(kernel)
        self.cubes, self.units, self.shared = cubes, units, shared_bytes
        self.device = runtime.cuda_device.id
        self.cp = runtime.cp
        self._get_device = runtime.cp.cuda.runtime.getDevice
        # The plain launch bound directly (this runs on every call); co-resident cubes through the
        # launcher's cooperative launch.
        self._launch = launcher.launch_kernel
        self._cooperative = (lambda *a: launcher.launch(*a, True)) if co_resident else None
        #: ``(cache, derive)`` where the by-value parameters follow from the first three arrays'
        #: addresses (the call layer's tensor maps, call/launch.py `DirectLaunches`): ``cache`` maps
        #: an address triple to them, ``derive(triple)`` makes (and keeps) a missing one. Looked up
        #: here, not in a wrapper, where no ``structs`` are given: a wrapper's frame cost about 1 us a
        #: call on an H200's host (bench/SELECTION_NOTES.md, "One wave of 64 x 128 tiles").
        self.derived = None

    def __call__(self, *arrays, stream: int | None = None, structs=None) -> bool:
        """Launch with these values at the positions (CuPy arrays or addresses as ints where the
        parameter is an array, ints for indices, Python or numpy floats for float parameters:
        `slot_encoder`), on ``stream`` (a raw stream handle) or CuPy's current stream; ``structs``:
        new values of the by-value parameters, in order (``bytes``), where the plan derives them
        per call (else `derived`'s, where set)."""
        if self._get_device() != self.device:
            return False
        if structs is None and self.derived is not None:
            cache, derive = self.derived
            key = arrays[:3] if type(arrays[0]) is int and type(arrays[1]) is int and type(arrays[2]) is int \
                else tuple(x if type(x) is int else x.data.ptr for x in arrays[:3])
            structs = cache.get(key)
            if structs is None:
                structs = derive(key)
        cp = self.cp
        block = getattr(self._local, "block", None)
        if block is None:
            # This thread's first launch of it: the context first (a thread that has a block has it).
            ensure_context(cp, self.device)
            by_value = any(type(x) is bytes for x in self.args)
            block = self._local.block = ByValueBlock(self.args) if by_value else ParamBlock(len(self.values))
            block.slots[:] = self.values
        slots = block.slots
        # The same structures as this thread's last launch (a repeated call: the caller keeps one
        # list per address tuple) are in the block already.
        if structs is not None and structs is not self._local.__dict__.get("structs"):
            for (_, address, size), data in zip(block.by_value, structs):
                ctypes.memmove(address, data, size)
            self._local.structs = structs
        for position, encode, x in zip(self.positions, self.encoders, arrays):
            slots[position] = encode(x)
        stream = cp.cuda.get_current_stream().ptr if stream is None else stream
        if self._cooperative is None:
            self._launch(self.function, self.cubes, 1, 1, self.units, 1, 1, self.shared, stream, block.address, 0)
        else:
            self._cooperative(self.function, self.cubes, self.units, self.shared, stream, block.address)
        return True
