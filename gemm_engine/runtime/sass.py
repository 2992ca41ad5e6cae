"""Machine code for NVIDIA's OpenCL driver: the driver's PTX compiled by nvJitLink, loaded back as a
program binary.

Why: NVIDIA's OpenCL driver turns OpenCL C into PTX and that PTX into machine code (SASS) with a
compiler of its own, and for the tensor-core kernels the SASS it makes runs far slower than what the
CUDA toolchain makes of the *same* PTX. Measured on the H100 (bench/results/h100/opencl_tensor_cores.md,
"The driver's own PTX compiler"): pipelined_mma f16 4096^3 (swizzled rows, 3 slots) 638 us as the
driver builds it, 426 us from a cubin that ptxas 13.0 made of the driver's own PTX, loaded into the
same OpenCL context; the same PTX through the CUDA driver 332 us; both ways 2 work-groups a
multiprocessor and 211 registers. clCreateProgramWithBinary takes a cubin where it takes its own PTX.

So on an NVIDIA device where `check` passes, `OpenCLRuntime` builds each kernel as: clBuildProgram
(the driver's PTX; PyOpenCL caches it), nvJitLink (NVIDIA's PTX compiler library, through
``cuda-bindings``, the package the CUDA backend already uses for TMA maps; no CUDA context), then a
program of the cubin. `check` first runs one small kernel that way (work-group ids, local memory, a
barrier) and compares its words, so a driver that would not take the cubin, or run it right, keeps
its own compile. The cubins are kept on disk (runtime/checked_files.py) under the engine's cache
folder, keyed by the PTX, the target and nvJitLink's version. ``$GEMM_ENGINE_OPENCL_SASS=off``
keeps the driver's own compile (for comparing the two).
"""
from __future__ import annotations

import hashlib
import os
import re
import threading

import numpy as np

from ..codegen.device import SASS_BUILD
from ..codegen.ptx import SM90A_MARK
from .checked_files import read_checked, write_checked

#: Set to "off" to keep the OpenCL driver's own PTX compiler.
ENV = "GEMM_ENGINE_OPENCL_SASS"
#: The device feature this route grants (the selector reads it).
FEATURE = SASS_BUILD
PREFIX = "gemm_engine_sass_"

_checked: dict = {}
_lock = threading.Lock()


def _nvjitlink():
    from cuda.bindings import nvjitlink
    return nvjitlink


#: The feature the wgmma check grants (the warpgroup instructions of sm_90a: tile/wgmma.py).
WGMMA = "wgmma"


def target(compute_capability) -> str:
    """The machine nvJitLink builds for: the arch-specific sm_90a on compute capability 9.x (its
    PTX may then hold wgmma, which the driver's sm_90 target refuses), else sm_XX."""
    major, minor = compute_capability
    return f"sm_{major}{minor}" + ("a" if major == 9 else "")


def compile_ptx(ptx: bytes, arch: str) -> bytes:
    """``ptx`` (the driver's program binary) compiled for ``arch`` by nvJitLink, from the cache folder
    where a process compiled it before. RuntimeError with nvJitLink's log when it fails."""
    nvjitlink = _nvjitlink()
    ptx = ptx.rstrip(b"\0") + b"\0"
    if arch.endswith("a"):   # the driver wrote ".target sm_90": the arch-specific target takes wgmma
        ptx = ptx.replace(SM90A_MARK.encode(), b"")
        ptx = re.sub(rb"^(\.target\s+)sm_\d+\b", b"\\g<1>" + arch.encode(), ptx, count=1, flags=re.M)
    key = hashlib.sha256(repr((nvjitlink.version(), arch)).encode() + b"\0" + ptx).hexdigest()
    path = os.path.join(_folder(), f"{PREFIX}{key}.cubin")
    found = read_checked(path)
    if found is not None:
        return found
    handle = nvjitlink.create(2, [f"-arch={arch}", "-O3"])
    try:
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, ptx, len(ptx), "gemm_engine_kernel")
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as exc:
            log = _read(nvjitlink.get_error_log, handle, nvjitlink.get_error_log_size(handle))
            raise RuntimeError(f"nvJitLink could not compile the OpenCL driver's PTX for {arch}: "
                               f"{log.decode(errors='replace').strip()}") from exc
        made = _read(nvjitlink.get_linked_cubin, handle, nvjitlink.get_linked_cubin_size(handle))
    finally:
        nvjitlink.destroy(handle)
    write_checked(path, made, PREFIX)
    return made


def _read(getter, handle, size: int) -> bytes:
    """``size`` bytes an nvJitLink getter writes: into a bytearray, or (bindings that take an
    address) a ctypes buffer."""
    buf = bytearray(size)
    try:
        getter(handle, buf)
        return bytes(buf)
    except TypeError:
        import ctypes
        raw = ctypes.create_string_buffer(size)
        getter(handle, ctypes.addressof(raw))
        return raw.raw


def _folder() -> str:
    from ..tuning.cache import cache_dir
    return os.path.join(cache_dir(), "sass")


def program(cl, context, device, built, arch: str):
    """The program ``built`` (from source, by the driver) rebuilt from nvJitLink's cubin of its PTX."""
    devices = list(built.get_info(cl.program_info.DEVICES))
    ptx = built.get_info(cl.program_info.BINARIES)[devices.index(device)]
    return cl.Program(context, [device], [compile_ptx(ptx, arch)]).build()


#: The check's kernel: group and local ids (the driver passes a work offset in a register of its
#: own), local memory and a barrier, written where a wrong id shows.
_CHECK = """
__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void check(__global uint* out) {
    __local uint s[64];
    const uint u = get_local_id(0), g = get_group_id(0);
    s[u] = g * 1000u + u * 3u;
    barrier(CLK_LOCAL_MEM_FENCE);
    out[g * 64 + u] = s[63 - u] + 7u;
}
"""


#: The wgmma check's kernel: one warpgroup runs the fence, commit and wait of sm_90a (an empty
#: batch), then writes its words.
_CHECK_WGMMA = """
__kernel __attribute__((reqd_work_group_size(128, 1, 1)))
void check(__global uint* out) {
    const uint u = get_local_id(0), g = get_group_id(0);
    __asm__ volatile("%(m)swgmma.fence.sync.aligned;\\n\\t%(m)swgmma.commit_group.sync.aligned;\\n\\t"
                     "%(m)swgmma.wait_group.sync.aligned 0;" ::: "memory");
    out[g * 128 + u] = g * 1000u + u * 3u + 7u;
}
""" % {"m": SM90A_MARK}


def check(cl, dev, compute_capability) -> str | None:
    """None where this device runs nvJitLink's cubins right (once per device and process), else why not."""
    if os.environ.get(ENV, "").lower() in ("off", "0", "no"):
        return f"${ENV}=off"
    if compute_capability is None:
        return "the device reports no compute capability"
    return _once(cl, dev, target(compute_capability), _CHECK, 64, _check_words)


def check_wgmma(cl, dev, compute_capability) -> str | None:
    """None where the warpgroup instructions build (sm_90a) and run through the route (after
    `check` passed), else why not."""
    arch = target(compute_capability)
    if not arch.endswith("a") or compute_capability[0] != 9:
        return f"wgmma is sm_90a's; the device is {arch}"
    return _once(cl, dev, arch, _CHECK_WGMMA, 128, lambda g, u: g * 1000 + u * 3 + 7)


def _once(cl, dev, arch: str, source: str, units: int, want) -> str | None:
    key = (dev.platform.name, dev.name, dev.driver_version, source)
    with _lock:
        if key not in _checked:
            _checked[key] = _run_check(cl, dev, arch, source, units, want)
        return _checked[key]


def _check_words(g, u):
    """The words `_CHECK` writes: group g's unit u holds what unit 63 - u stored, plus 7."""
    return g * 1000 + (63 - u) * 3 + 7


def _run_check(cl, dev, arch: str, source: str = _CHECK, units: int = 64, want=_check_words) -> str | None:
    try:
        _nvjitlink().version()
    except Exception as exc:   # noqa: BLE001 -- no cuda-bindings, or no libnvJitLink beside it
        return f"nvJitLink unavailable ({type(exc).__name__}: {str(exc)[:200]}; pip install cuda-bindings " \
               f"nvidia-nvjitlink)"
    try:
        context = cl.Context([dev])
        queue = cl.CommandQueue(context)
        built = program(cl, context, dev, cl.Program(context, source).build(options=["-cl-std=CL1.2"]), arch)
        groups = 3
        out = np.zeros(groups * units, np.uint32)
        buf = cl.Buffer(context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=out)
        built.check(queue, (groups * units,), (units,), buf)
        cl.enqueue_copy(queue, out, buf)
        queue.finish()
    except Exception as exc:   # noqa: BLE001 -- any build or run failure keeps the driver's compile
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}"
    g, u = np.divmod(np.arange(groups * units, dtype=np.uint32), units)
    return None if np.array_equal(out, want(g, u)) else "a cubin of nvJitLink ran, but wrote wrong words"
