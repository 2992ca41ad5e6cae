"""runtime/nvrtc.py without a GPU, against a stand-in NVRTC: binaries are compiled once and then
read from the cache folder, a torn file is compiled again (never loaded), `on_disk` answers without
compiling, the include folder is given only to sources that include headers (and other headers
there make another key), and a device newer than NVRTC knows gets PTX for the newest architecture it has."""
from __future__ import annotations

import os
import sys
import types

import pytest

from gemm_engine.runtime import nvrtc as nvrtc_runtime


@pytest.fixture
def fake(monkeypatch, tmp_path):
    calls = []

    class NVRTCError(Exception):
        pass

    nvrtc = types.SimpleNamespace(
        NVRTCError=NVRTCError,
        getVersion=lambda: (13, 0),
        getSupportedArchs=lambda: (80, 86, 89, 90),
        createProgram=lambda src, name, a, b: {"src": src},
        compileProgram=lambda prog, options: calls.append(tuple(options)) or (
            (_ for _ in ()).throw(NVRTCError("bad")) if "#error" in prog["src"] else None),
        getProgramLog=lambda prog: "error: this source says no",
        getCUBIN=lambda prog: b"CUBIN:" + prog["src"].encode(),
        getPTX=lambda prog: "PTX:" + prog["src"],
        destroyProgram=lambda prog: None)
    libs = types.ModuleType("cupy_backends.cuda.libs")
    libs.nvrtc = nvrtc
    monkeypatch.setitem(sys.modules, "cupy_backends", types.ModuleType("cupy_backends"))
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda", types.ModuleType("cupy_backends.cuda"))
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs", libs)
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(nvrtc_runtime, "_KEYS", type(nvrtc_runtime._KEYS)())
    cp = types.SimpleNamespace(cuda=types.SimpleNamespace(get_cuda_path=lambda: "/nonexistent"))
    return cp, calls, tmp_path


def test_compiled_once_then_read_from_the_folder_and_a_torn_file_compiled_again(fake):
    cp, calls, folder = fake
    assert not nvrtc_runtime.on_disk(cp, "kernel A", "sm_90") and not calls
    assert nvrtc_runtime.binary(cp, "kernel A", "sm_90") == b"CUBIN:kernel A"
    assert calls == [("--std=c++17", "--gpu-architecture=sm_90")]
    assert nvrtc_runtime.on_disk(cp, "kernel A", "sm_90") and not nvrtc_runtime.on_disk(cp, "kernel A", "sm_90a")
    assert nvrtc_runtime.binary(cp, "kernel A", "sm_90") == b"CUBIN:kernel A" and len(calls) == 1
    (path,) = [p for p in folder.iterdir() if p.name.startswith("gemm_engine_")]
    path.write_bytes(path.read_bytes()[:-3])
    assert nvrtc_runtime.binary(cp, "kernel A", "sm_90") == b"CUBIN:kernel A" and len(calls) == 2
    assert not [p for p in os.listdir(folder) if p.startswith(".")]      # no temporary file left


def test_headers_get_the_include_folder_and_new_devices_get_ptx(fake):
    cp, calls, _ = fake
    nvrtc_runtime.binary(cp, "#include <mma.h>\nkernel", "sm_90")
    assert calls[-1][:2] == ("--std=c++17", "--gpu-architecture=sm_90") and calls[-1][2].startswith("-I")
    assert nvrtc_runtime.binary(cp, "kernel B", "sm_120") == b"PTX:kernel B"
    assert calls[-1] == ("--std=c++17", "--gpu-architecture=compute_90")


def test_a_compile_error_carries_nvrtcs_log(fake):
    cp, _, folder = fake
    with pytest.raises(RuntimeError, match="(?s)could not compile the kernel for sm_90.*this source says no"):
        nvrtc_runtime.binary(cp, "#error\n", "sm_90")
    assert not list(folder.iterdir())


def test_other_headers_in_the_include_folder_make_another_binary(fake, monkeypatch, tmp_path):
    cp, calls, _ = fake
    include = tmp_path / "include"
    (include / "crt").mkdir(parents=True)
    (include / "crt" / "mma.h").write_text("// one toolkit")
    monkeypatch.setattr(nvrtc_runtime, "cuda_include_dir", lambda cp: str(include))
    nvrtc_runtime.headers_stamp.cache_clear()
    source = "#include <mma.h>\nkernel"
    nvrtc_runtime.binary(cp, source, "sm_90")
    assert nvrtc_runtime.on_disk(cp, source, "sm_90") and len(calls) == 1
    # The toolkit updated in place: a new process (fresh memos) must not load the old binary.
    (include / "crt" / "mma.h").write_text("// another toolkit's header")
    nvrtc_runtime.headers_stamp.cache_clear()
    monkeypatch.setattr(nvrtc_runtime, "_KEYS", type(nvrtc_runtime._KEYS)())
    assert not nvrtc_runtime.on_disk(cp, source, "sm_90")
    nvrtc_runtime.binary(cp, source, "sm_90")
    assert len(calls) == 2
    # A source without headers does not depend on them.
    nvrtc_runtime.binary(cp, "kernel C", "sm_90")
    (include / "crt" / "mma.h").write_text("// a third")
    nvrtc_runtime.headers_stamp.cache_clear()
    monkeypatch.setattr(nvrtc_runtime, "_KEYS", type(nvrtc_runtime._KEYS)())
    assert nvrtc_runtime.on_disk(cp, "kernel C", "sm_90")
