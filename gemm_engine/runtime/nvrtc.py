"""NVRTC binaries of the CUDA kernels, kept on disk.

Every CUDA kernel is compiled here, by NVRTC directly, for its target (`cuda_target_arch`: "sm_90a"
where a source uses wgmma or setmaxnreg), and its binary is kept in a file in CuPy's kernel cache
folder (``CUPY_CACHE_DIR``) keyed by the source, the options, NVRTC's version and, for a source that
includes headers, what the include folder's headers are (`headers_stamp`). Why not CuPy's
RawModule: it appends its own plain ``-arch`` (dropping the "a"), a build here touches no CUDA
context (a worker thread builds while another may capture a graph: runtime/background.py), and
whether a binary is on disk can be asked without compiling (`on_disk`: the planner runs a stand-in
only where a compile is really ahead).

Files are kept as runtime/checked_files.py keeps them (a hash before the binary, atomic renames):
a torn or foreign file is compiled again, never loaded. A device newer than this NVRTC gets PTX for the newest architecture NVRTC
knows, which the driver compiles when it loads it (what CuPy does too).
"""
from __future__ import annotations

import functools
import hashlib
import os
import threading
from collections import OrderedDict

from .checked_files import read_checked, write_checked

#: The binaries' file names: ``gemm_engine_<key>.cubin`` (PTX included: the driver tells them apart).
PREFIX = "gemm_engine_"


def cuda_include_dir(cp) -> str:
    """The toolkit's include folder. /usr/local/cuda first: CuPy's own CUDA path may point at the
    pip wheels' headers, whose <mma.h> lacks the crt/ headers it includes (seen on the H100 box)."""
    for root in ("/usr/local/cuda", os.environ.get("CUDA_PATH"), cp.cuda.get_cuda_path()):
        if root and os.path.exists(os.path.join(root, "include", "crt", "mma.h")):
            return os.path.join(root, "include")
    return os.path.join(cp.cuda.get_cuda_path() or "/usr/local/cuda", "include")


def cupy_cache_dir(cp) -> str:
    """CuPy's kernel cache folder: its own answer where this CuPy version exposes one, else the
    documented rule ($CUPY_CACHE_DIR, default ~/.cupy/kernel_cache)."""
    for module in (getattr(cp.cuda, "compiler", None), getattr(cp, "_environment", None)):
        getter = getattr(module, "get_cache_dir", None)
        if getter is not None:
            return getter()
    return os.environ.get("CUPY_CACHE_DIR", os.path.expanduser("~/.cupy/kernel_cache"))


def _nvrtc():
    from cupy_backends.cuda.libs import nvrtc
    return nvrtc


def _target(nvrtc, arch: str) -> tuple[str, bool]:
    """(the --gpu-architecture value, whether NVRTC makes PTX rather than a cubin) for ``arch``."""
    supported = getattr(nvrtc, "getSupportedArchs", None)
    if supported is None:
        return arch, False
    known = sorted(int(a) for a in supported())
    number = int("".join(ch for ch in arch[3:] if ch.isdigit()))
    if number in known or not known:
        return arch, False
    return f"compute_{known[-1]}", True


def _options(cp, nvrtc, source: str, arch: str) -> tuple[tuple[str, ...], bool]:
    target, ptx = _target(nvrtc, arch)
    options = ("--std=c++17", f"--gpu-architecture={target}")
    if "#include <" in source:
        # NVRTC has no CUDA include path of its own: headers such as <mma.h> need it given.
        options += (f"-I{cuda_include_dir(cp)}",)
    return options, ptx


#: (arch, source) -> (options, PTX or not, cache key): a warm first call asks twice (`on_disk`,
#: then `binary`), and hashing a Hopper kernel's source is a millisecond.
_KEYS: OrderedDict = OrderedDict()
_KEYS_MAX = 256
_KEYS_LOCK = threading.Lock()


@functools.lru_cache(maxsize=8)
def headers_stamp(folder: str) -> str:
    """What the headers of the include folder ``folder`` are (each file's name, size and modification
    time, there and in its crt/): a key part, so that a binary built against other headers (a
    toolkit updated in place, CUDA_PATH pointing elsewhere) is not loaded. Once per folder and process."""
    digest = hashlib.sha256()
    for sub in ("", "crt"):
        try:
            entries = sorted(os.scandir(os.path.join(folder, sub)), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.is_file():
                st = entry.stat()
                digest.update(f"{sub}/{entry.name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _keyed(cp, nvrtc, source: str, arch: str) -> tuple[tuple[str, ...], bool, str]:
    found = _KEYS.get((arch, source))
    if found is None:
        options, ptx = _options(cp, nvrtc, source, arch)
        headers = tuple(headers_stamp(o[2:]) for o in options if o.startswith("-I"))
        digest = hashlib.sha256(repr((nvrtc.getVersion(), options, headers)).encode() + b"\0" + source.encode())
        found = (options, ptx, digest.hexdigest())
        with _KEYS_LOCK:
            _KEYS[(arch, source)] = found
            while len(_KEYS) > _KEYS_MAX:
                _KEYS.popitem(last=False)
    return found


def _path(cp, key: str) -> str:
    return os.path.join(cupy_cache_dir(cp), f"{PREFIX}{key}.cubin")


def on_disk(cp, source: str, arch: str) -> bool:
    """Whether ``source``'s binary for ``arch`` is in the cache folder (its hash unchecked)."""
    return os.path.exists(_path(cp, _keyed(cp, _nvrtc(), source, arch)[2]))


def binary(cp, source: str, arch: str) -> bytes:
    """``source`` compiled by NVRTC for ``arch`` (a cubin, or PTX where NVRTC does not know the
    architecture), from the cache folder where a process built it before."""
    nvrtc = _nvrtc()
    options, ptx, key = _keyed(cp, nvrtc, source, arch)
    path = _path(cp, key)
    found = read_checked(path)
    if found is not None:
        return found
    prog = nvrtc.createProgram(source, "gemm_engine_kernel.cu", (), ())
    try:
        try:
            nvrtc.compileProgram(prog, options)
        except nvrtc.NVRTCError as exc:
            raise RuntimeError(f"NVRTC could not compile the kernel for {arch}:\n"
                               f"{nvrtc.getProgramLog(prog)}") from exc
        made = nvrtc.getPTX(prog) if ptx else nvrtc.getCUBIN(prog)
    finally:
        nvrtc.destroyProgram(prog)
    if isinstance(made, str):
        made = made.encode()
    write_checked(path, made, PREFIX)
    return made
