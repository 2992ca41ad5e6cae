"""runtime/sass.py and runtime/checked_files.py: the OpenCL driver's PTX compiled by nvJitLink (a
stand-in module here: no NVIDIA device in CI), kept on disk, and the route's refusals."""
from __future__ import annotations

import types

import numpy as np
import pytest

from gemm_engine.runtime import checked_files, sass


def test_checked_files_round_trip_and_a_torn_file_reads_as_missing(tmp_path):
    path = str(tmp_path / "sub" / "x.bin")
    assert checked_files.read_checked(path) is None
    checked_files.write_checked(path, b"payload", "x_")
    assert checked_files.read_checked(path) == b"payload"
    with open(path, "r+b") as f:
        f.seek(70)
        f.write(b"!")
    assert checked_files.read_checked(path) is None


@pytest.fixture
def fake(monkeypatch, tmp_path):
    """A stand-in nvJitLink: the cubin is b"SASS:" + arch + the PTX; it records its links."""
    log = []

    class Error(Exception):
        pass

    def create(n, options):
        assert n == len(options)
        return {"options": options, "data": b""}

    def add_data(h, kind, data, size, name):
        assert kind == "PTX" and size == len(data) and data.endswith(b"\0")
        if b"bad" in data:
            h["error"] = b"ptxas fatal: bad PTX"
            raise Error("link")
        h["data"] = data

    def size_of(h):
        return len(_cubin(h))

    def _cubin(h):
        return b"SASS:" + h["options"][0].encode() + h["data"]

    def into(h, buf):
        buf[:] = _cubin(h)
        log.append(h["options"])

    mod = types.SimpleNamespace(version=lambda: (13, 0), InputType=types.SimpleNamespace(PTX="PTX"),
                                nvJitLinkError=Error, create=create, add_data=add_data, complete=lambda h: None,
                                get_linked_cubin_size=size_of, get_linked_cubin=into, destroy=lambda h: None,
                                get_error_log_size=lambda h: len(h["error"]),
                                get_error_log=lambda h, buf: buf.__setitem__(slice(None), h["error"]))
    monkeypatch.setattr(sass, "_nvjitlink", lambda: mod)
    monkeypatch.setenv("GEMM_ENGINE_CACHE_DIR", str(tmp_path))
    return log


def test_ptx_compiled_once_then_read_from_the_cache_folder(fake, tmp_path):
    first = sass.compile_ptx(b".version 9.0\n.target sm_90\0\0", "sm_90")
    assert first == b"SASS:-arch=sm_90.version 9.0\n.target sm_90\0" and len(fake) == 1
    assert sass.compile_ptx(b".version 9.0\n.target sm_90", "sm_90") == first and len(fake) == 1
    assert list((tmp_path / "sass").iterdir())
    sass.compile_ptx(b".version 9.0\n.target sm_90", "sm_80")   # another target: another binary
    assert len(fake) == 2


def test_sm_90a_lines_are_unmarked_and_the_target_made_arch_specific(fake, monkeypatch):
    """The driver's assembler rejects wgmma on its sm_90 target: its lines arrive as marked
    comments (codegen/ptx.py `SM90A_MARK`); nvJitLink gets them unmarked, for sm_90a."""
    from gemm_engine.codegen.ptx import SM90A_MARK
    got = []
    real = sass._nvjitlink()
    add = real.add_data

    def spy(h, kind, data, size, name):
        got.append(data)
        return add(h, kind, data, size, name)
    monkeypatch.setattr(real, "add_data", spy)
    ptx = f".version 9.0\n.target sm_90, texmode_independent\n\t{SM90A_MARK}wgmma.fence.sync.aligned;\n".encode()
    sass.compile_ptx(ptx, "sm_90a")
    assert got[0] == b".version 9.0\n.target sm_90a, texmode_independent\n\twgmma.fence.sync.aligned;\n\0"
    sass.compile_ptx(ptx, "sm_80")     # a plain target: the PTX as the driver wrote it
    assert got[1] == ptx + b"\0"


def test_a_failed_compile_carries_nvjitlinks_log(fake):
    with pytest.raises(RuntimeError, match="bad PTX"):
        sass.compile_ptx(b"bad", "sm_90")


def test_the_route_is_refused_with_its_reason(monkeypatch):
    dev = types.SimpleNamespace(platform=types.SimpleNamespace(name="NVIDIA CUDA"), name="X", driver_version="1")
    monkeypatch.setenv(sass.ENV, "off")
    assert sass.check(None, dev, (9, 0)) == f"${sass.ENV}=off"
    monkeypatch.delenv(sass.ENV)
    assert "compute capability" in sass.check(None, dev, None)

    def missing():
        raise ImportError("No module named 'cuda'")
    monkeypatch.setattr(sass, "_nvjitlink", missing)
    monkeypatch.setattr(sass, "_checked", {})
    assert "nvJitLink unavailable" in sass.check(None, dev, (9, 0))
    assert sass.target((9, 0)) == "sm_90a" and sass.target((12, 1)) == "sm_121"


def test_a_device_that_runs_the_cubin_wrong_keeps_the_drivers_compile(fake, monkeypatch):
    """`check` runs a kernel through the route and compares its words (a stand-in OpenCL here whose
    cubin program writes zeros)."""
    class Program:
        def __init__(self, context, *args):
            self.binary = args[1][0] if len(args) == 2 else None

        def build(self, options=None):
            return self

        def get_info(self, what):
            return ["dev"] if what == "DEVICES" else [b".version 9.0\0"]

        def check(self, queue, *args):
            pass

    queue = types.SimpleNamespace(finish=lambda: None)
    cl = types.SimpleNamespace(Context=lambda devs: None, CommandQueue=lambda ctx: queue, Program=Program,
                               program_info=types.SimpleNamespace(DEVICES="DEVICES", BINARIES="BINARIES"),
                               Buffer=lambda *a, **k: None, mem_flags=types.SimpleNamespace(READ_WRITE=1, COPY_HOST_PTR=2),
                               enqueue_copy=lambda q, out, buf: None)
    monkeypatch.setattr(sass, "_checked", {})
    why = sass._run_check(cl, "dev", "sm_90")
    assert why == "a cubin of nvJitLink ran, but wrote wrong words"
    assert fake == [["-arch=sm_90", "-O3"]]


def test_pocl_gets_no_nvjitlink_route_and_profiled_queues_time_their_kernels(monkeypatch):
    cl = pytest.importorskip("pyopencl")
    import gemm_engine
    from gemm_engine.runtime.timing import device_time
    try:
        plain = gemm_engine.Engine(backend="opencl")
    except Exception as exc:   # noqa: BLE001 -- no OpenCL device here
        pytest.skip(f"no OpenCL device: {exc}")
    if plain.device.vendor == "nvidia":
        pytest.skip("an NVIDIA device: the route is checked on the GPU machine")
    assert sass.FEATURE not in plain.device.features
    assert sass.FEATURE not in dict(plain.device.refusals)
    rt = plain.runtime
    queue = cl.CommandQueue(rt.context, rt.cl_device, properties=cl.command_queue_properties.PROFILING_ENABLE)
    engine = gemm_engine.Engine(backend="opencl", queue=queue)
    assert engine.runtime.profiling and not rt.profiling
    a = np.random.default_rng(0).standard_normal((64, 48), dtype=np.float32)
    da = engine.runtime.to_device(a)
    seconds = device_time(engine.runtime, lambda: engine.matmul(da, da.T if hasattr(da, "T") else da), repeat=2,
                          min_window=0)
    assert 0 < seconds < 1
    with pytest.raises(RuntimeError, match="no kernel"):
        engine.runtime.span_seconds(lambda: None, 2)
