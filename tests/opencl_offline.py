"""Compile rendered OpenCL sources for GPUs this machine does not have, with offline compilers.

* NVIDIA's OpenCL driver (inline PTX): clang's OpenCL front end for ``nvptx64-nvidia-nvcl`` (the
  triple of NVIDIA's OpenCL) turns the source into PTX for sm_80, which ptxas (from the CUDA
  toolkit nvcc brings) assembles for sm_80 or, retargeted, sm_90: every inline ``asm`` statement,
  its operand constraints and the shared-memory addresses it takes are checked. OpenCL's built-in
  functions stay external calls (no device library here), so ptxas compiles relocatable code.
* AMD (``__builtin_amdgcn_mfma_*`` / ``_wmma_*``): clang for ``amdgcn-amd-amdhsa`` and the gfx target.
* Intel (``cl_intel_subgroup_matrix_multiply_accumulate``): clang's ``spir64`` front end against the
  extension's prototypes (the calls' types, the sub-group attribute); ``ocloc``, Intel's offline
  compiler, where it is installed ($GEMM_ENGINE_OCLOC or on PATH) and new enough: Debian 12's
  intel-opencl-icd 22.43 (IGC 1.0.12504) does not declare the extension's functions yet.

Each function returns (ok, log); the tests skip when the compiler is missing. What passes here was
compiled only: nothing ran on that hardware.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

import pytest

from gemm_engine.codegen.ptx import SM90A_MARK

_CLANGS = ("clang-15", "clang-16", "clang-17", "clang-18", "clang-19", "clang")
#: ptxas PTX ISA versions of the sm_90 retarget (clang 15 writes 7.5 for sm_80; sm_90 needs 7.8).
_SM90_PTX = ".version 7.8"
#: sm_90a's (wgmma needs PTX ISA 8.0).
_SM90A_PTX = ".version 8.0"


def find_clang(target: str) -> str | None:
    """A clang that has the ``target`` back end (nvptx64 / amdgcn; "": any clang)."""
    for name in _CLANGS:
        path = shutil.which(name)
        if path is None:
            continue
        out = subprocess.run([path, "--print-targets"], capture_output=True, text=True).stdout
        if target in out:
            return path
    return None


def clang_or_skip(target: str) -> str:
    clang = find_clang(target)
    if clang is None:
        pytest.skip(f"no clang with the {target} back end (apt-get install clang): OpenCL sources for it "
                    f"cannot be compile-checked here")
    return clang


def ptxas_or_skip() -> str:
    ptxas = shutil.which("ptxas") or ("/usr/local/cuda/bin/ptxas" if os.path.exists("/usr/local/cuda/bin/ptxas") else None)
    if ptxas is None:
        pytest.skip("ptxas is not installed (the CUDA toolkit): PTX cannot be assembled here")
    return ptxas


def _run(cmd: list[str]) -> tuple[bool, str]:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return proc.returncode == 0, proc.stdout + proc.stderr


def compile_nvidia_opencl(source: str, arch: str = "sm_80") -> tuple[bool, str]:
    """Build ``source`` as NVIDIA's OpenCL would, offline: clang to PTX, ptxas for ``arch``."""
    clang, ptxas = clang_or_skip("nvptx64"), ptxas_or_skip()
    with tempfile.TemporaryDirectory() as tmp:
        cl, ptx = os.path.join(tmp, "kernel.cl"), os.path.join(tmp, "kernel.ptx")
        with open(cl, "w") as f:
            f.write(source)
        ok, log = _run([clang, "-cl-std=CL1.2", "-target", "nvptx64-nvidia-nvcl", "-Xclang", "-finclude-default-header",
                        "-Xclang", "-target-cpu", "-Xclang", "sm_80", "-O2", "-S", "-o", ptx, cl])
        if not ok:
            return False, log
        with open(ptx) as f:
            text = f.read()
        # OpenCL built-ins (get_local_id, barrier, vload_half) are declared but not defined here.
        text = re.sub(r"^\.func(\s[^{;]*?)\n;", r".extern .func\1\n;", text, flags=re.M | re.S)
        if arch.endswith("a"):   # what runtime/sass.py does before nvJitLink builds for sm_90a
            text = text.replace(SM90A_MARK, "")
        if arch != "sm_80":
            version = _SM90A_PTX if arch.endswith("a") else _SM90_PTX
            text = re.sub(r"^\.version \d+\.\d+", version, text, flags=re.M).replace(".target sm_80", f".target {arch}")
        with open(ptx, "w") as f:
            f.write(text)
        ok, more = _run([ptxas, "-c", f"-arch={arch}", "-v", ptx, "-o", os.path.join(tmp, "kernel.o")])
        return ok, log + more


def compile_amdgcn(source: str, mcpu: str) -> tuple[bool, str]:
    """Build ``source`` for the AMD GPU ``mcpu`` (gfx90a, gfx942, gfx1100) with clang, offline."""
    clang = clang_or_skip("amdgcn")
    with tempfile.TemporaryDirectory() as tmp:
        cl = os.path.join(tmp, "kernel.cl")
        with open(cl, "w") as f:
            f.write(source)
        ok, log = _run([clang, "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", f"-mcpu={mcpu}", "-nogpulib",
                        "-Xclang", "-finclude-default-header", "-O2", "-c", "-o", os.path.join(tmp, "kernel.o"), cl])
        return ok, log


#: The OpenCL C prototypes of cl_intel_subgroup_matrix_multiply_accumulate's float functions (the
#: extension's specification), for clang's spir64 front end, which does not declare them.
INTEL_DPAS_DECLARATIONS = "".join(
    f"{ret} __attribute__((overloadable)) intel_sub_group_{t}_{t}_matrix_mad_k16({a} a, int8 b, {ret} acc);\n"
    for t in ("f16", "bf16") for a, ret in (("int8", "float8"), ("short8", "float8")))


def compile_intel_spir(source: str) -> tuple[bool, str]:
    """Build ``source`` with clang's OpenCL front end for ``spir64`` against the extension's
    prototypes: the types of every DPAS call and the sub-group attribute are checked, nothing of
    Intel's compiler."""
    clang = clang_or_skip("")        # spir64 is a front-end target: every clang has it
    with tempfile.TemporaryDirectory() as tmp:
        cl, decl = os.path.join(tmp, "kernel.cl"), os.path.join(tmp, "dpas.h")
        with open(cl, "w") as f:
            f.write(source)
        with open(decl, "w") as f:
            f.write(INTEL_DPAS_DECLARATIONS)
        return _run([clang, "-cl-std=CL2.0", "-target", "spir64", "-Xclang", "-finclude-default-header",
                     "-include", decl, "-O2", "-c", "-emit-llvm", "-o", os.path.join(tmp, "kernel.bc"), cl])


def amdgcn_assembly(source: str, mcpu: str) -> str:
    """The amdgcn assembly of ``source`` (to see which instructions the builtins became)."""
    clang = clang_or_skip("amdgcn")
    with tempfile.TemporaryDirectory() as tmp:
        cl, asm = os.path.join(tmp, "kernel.cl"), os.path.join(tmp, "kernel.s")
        with open(cl, "w") as f:
            f.write(source)
        ok, log = _run([clang, "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", f"-mcpu={mcpu}", "-nogpulib",
                        "-Xclang", "-finclude-default-header", "-O2", "-S", "-o", asm, cl])
        if not ok:
            raise AssertionError(log)
        with open(asm) as f:
            return f.read()


def find_ocloc() -> str | None:
    return os.environ.get("GEMM_ENGINE_OCLOC") or shutil.which("ocloc")


def compile_intel(source: str, device: str) -> tuple[bool, str]:
    """Build ``source`` for the Intel GPU ``device`` (ocloc's name: dg2, pvc) with ocloc, offline."""
    ocloc = find_ocloc()
    if ocloc is None:
        pytest.skip("ocloc (Intel's offline OpenCL compiler) is not installed: set $GEMM_ENGINE_OCLOC")
    with tempfile.TemporaryDirectory() as tmp:
        cl = os.path.join(tmp, "kernel.cl")
        with open(cl, "w") as f:
            f.write(source)
        return _run([ocloc, "compile", "-file", cl, "-device", device, "-options", "-cl-std=CL3.0",
                     "-output_no_suffix", "-out_dir", tmp, "-q"])
