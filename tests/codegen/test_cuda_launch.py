"""The driver-launch parameter block (runtime/cuda_launch.py) without a GPU: each argument lands
in its own 8-byte slot with the bytes the kernel's parameter type reads."""
from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest

from gemm_engine.runtime.cuda_launch import ParamBlock, _slot_value


class FakeArray:
    class data:
        ptr = 0x7F0000001000


def test_slots_hold_each_parameter_type_exactly():
    args = (np.int64(-3), np.float32(1.5), np.float64(-2.0), 7, np.int32(9))
    block = ParamBlock(len(args))
    block.slots[:] = [_slot_value(x, FakeArray) for x in args]
    raw = block.raw()
    assert struct.unpack("<q", raw[0:8])[0] == -3
    assert struct.unpack("<f", raw[8:12])[0] == 1.5          # a float parameter reads 4 bytes
    assert struct.unpack("<d", raw[16:24])[0] == -2.0
    assert struct.unpack("<q", raw[24:32])[0] == 7
    assert struct.unpack("<q", raw[32:40])[0] == 9
    assert _slot_value(FakeArray(), FakeArray) == FakeArray.data.ptr
    # The address array points at consecutive slots.
    addresses = (ctypes.c_void_p * len(args)).from_address(block.address)
    assert [addresses[i] - addresses[0] for i in range(len(args))] == [8 * i for i in range(len(args))]
    assert addresses[0] == ctypes.addressof(block.slots)


def test_unknown_argument_types_are_refused():
    with pytest.raises(TypeError, match="kernel argument of type str"):
        _slot_value("x", FakeArray)


class _FakeRuntime:
    """What PreparedLaunch reads of a CudaRuntime, with a recording cuLaunchKernel."""

    def __init__(self):
        self.launched, self.set_devices, self.slots_read = [], [], 4
        rt = self

        class cp:
            ndarray = FakeArray

            class cuda:
                class runtime:
                    @staticmethod
                    def getDevice():
                        return 0

                    @staticmethod
                    def setDevice(device):
                        rt.set_devices.append(device)

                    @staticmethod
                    def free(ptr):
                        pass

                @staticmethod
                def get_current_stream():
                    class S:
                        ptr = 0
                    return S

        class Launcher:
            def launch_kernel(self, fn, gx, gy, gz, bx, by, bz, shared, stream, address, extra):
                n = rt.slots_read
                addresses = (ctypes.c_void_p * n).from_address(address)
                rt.launched.append([ctypes.c_int64.from_address(addresses[i]).value for i in range(n)])

            @staticmethod
            def function(kernel):
                return 1

        self.cp, self.driver_launch = cp, Launcher()
        self.cuda_device = type("D", (), {"id": 0})()


def test_prepared_launch_changes_only_the_array_slots_per_thread():
    import threading

    from gemm_engine.runtime.cuda_launch import PreparedLaunch

    class Arr:
        def __init__(self, ptr):
            self.data = type("M", (), {"ptr": ptr})()

    rt = _FakeRuntime()
    launch = PreparedLaunch(rt, None, 2, 32, (FakeArray(), np.int64(5), FakeArray(), np.int64(-1)), 0, (0, 2))
    assert launch(Arr(100), Arr(200))
    thread = threading.Thread(target=lambda: launch(Arr(300), Arr(400)))
    thread.start()
    thread.join()
    assert launch(Arr(500), Arr(600))
    assert rt.launched == [[100, 5, 200, -1], [300, 5, 400, -1], [500, 5, 600, -1]]


def test_prepared_launch_takes_a_fused_calls_epilogue_values():
    """Positions past the three addresses take a fused call's converted values per call: float32
    alpha in the slot's low 4 bytes, float64 beta's 8 bytes, int64 offsets, int addresses."""
    from gemm_engine.runtime.cuda_launch import PreparedLaunch

    class Arr:
        def __init__(self, ptr):
            self.data = type("M", (), {"ptr": ptr})()

    rt = _FakeRuntime()
    rt.slots_read = 8
    args = (FakeArray(), FakeArray(), FakeArray(), np.float32(1), np.float64(0), np.int64(9), FakeArray(), np.int64(0))
    launch = PreparedLaunch(rt, None, 2, 32, args, 0, (0, 1, 2, 3, 4, 6, 7))
    assert launch(Arr(10), Arr(20), 30, np.float32(-2.5), np.float64(0.75), 4096, np.int64(3))
    slots = rt.launched[-1]
    assert slots[:3] == [10, 20, 30] and slots[5] == 9 and slots[6:] == [4096, 3]
    assert np.int64(slots[3]).astype(np.int32).view(np.float32) == np.float32(-2.5)
    assert np.int64(slots[4]).view(np.float64) == 0.75


def test_prepared_launch_encodes_python_numbers_by_position():
    """A fused call passes Python floats and ints (CallPlan.fused_values): each position encodes
    them as its parameter reads them, bit for bit what numpy's converted scalars gave, float32
    past its range made infinite as numpy makes it."""
    from gemm_engine.runtime.cuda_launch import PreparedLaunch, slot_encoder

    rt = _FakeRuntime()
    rt.slots_read = 5
    args = (FakeArray(), np.float32(1), np.float64(0), np.int64(9), FakeArray())
    launch = PreparedLaunch(rt, None, 2, 32, args, 0, (1, 2, 3, 4))
    for alpha, beta in ((-2.5, 0.75), (1 / 3, -1e-300), (1e300, float("inf")), (float("nan"), -0.0), (7, 3)):
        with np.errstate(over="ignore"):     # 1e300 as float32: infinite, as numpy warns
            assert launch(alpha, beta, 12, 4096)
            want32 = np.float32(alpha)
        slots = rt.launched[-1]
        got32 = np.int64(slots[1]).astype(np.uint32).view(np.float32)
        assert got32.tobytes() == want32.tobytes(), alpha
        assert np.int64(slots[2]).view(np.float64).tobytes() == np.float64(beta).tobytes(), beta
        assert slots[0] == FakeArray.data.ptr and slots[3:] == [12, 4096]
    # numpy scalars at the same positions encode the same.
    assert slot_encoder(np.float32(0))(np.float32(-2.5)) == slot_encoder(np.float32(0))(-2.5)
    assert slot_encoder(np.int64(0))(np.int64(-4)) == -4
    assert slot_encoder(FakeArray())(FakeArray()) == FakeArray.data.ptr


def test_by_value_arguments_get_aligned_buffers_of_their_own():
    """A structure passed by value (a 128-byte TMA tensor map) is copied into a 64-byte-aligned
    buffer its parameter address points at; the 8-byte arguments keep their slots."""
    from gemm_engine.runtime.cuda_launch import ByValueBlock
    blob = bytes(range(128))
    args = (np.int64(7), blob, np.int64(-3))
    block = ByValueBlock(args)
    block.slots[:] = [_slot_value(x, FakeArray) for x in args]
    addresses = [block.addresses[i] for i in range(3)]
    assert addresses[1] % 64 == 0
    assert ctypes.string_at(addresses[1], 128) == blob
    assert ctypes.c_int64.from_address(addresses[0]).value == 7
    assert ctypes.c_int64.from_address(addresses[2]).value == -3


def test_signature_packs_by_value_parameters():
    from gemm_engine.codegen.signature import BY_VALUE, KernelSignature, Param, index
    from gemm_engine.codegen.device import nominal_cuda_device
    from gemm_engine.codegen.dialect import dialect_for
    sig = KernelSignature((*index("M"), Param("lhs_map", BY_VALUE, size=128, align=64)))
    d = dialect_for(nominal_cuda_device())
    assert sig.render(d).splitlines()[-1].strip() == "const __grid_constant__ ge_bytes128_a64 lhs_map"
    assert "struct __align__(64) ge_bytes128_a64 { unsigned char bytes[128]; };" in d.helpers_for(sig.render(d))
    assert sig.pack({"M": 3, "lhs_map": bytes(128)}) == (np.int64(3), bytes(128))
    with pytest.raises(ValueError, match="lhs_map: expected 128 bytes"):
        sig.pack({"M": 3, "lhs_map": bytes(64)})


def _recording_cp(cooperative: bool = True):
    """A CuPy stand-in whose driver records which launch function a DriverLauncher calls."""
    calls = []

    class driver:
        @staticmethod
        def launchKernel(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
            calls.append(("plain", fn, gx, bx, shared, stream))

    if cooperative:
        driver.launchCooperativeKernel = staticmethod(
            lambda fn, gx, gy, gz, bx, by, bz, shared, stream, params: calls.append(
                ("cooperative", fn, gx, bx, shared, stream)))

    class cp:
        ndarray = FakeArray

        class cuda:
            pass

        @staticmethod
        def get_current_stream():
            return type("S", (), {"ptr": 77})
    cp.cuda.driver = driver
    cp.cuda.get_current_stream = cp.get_current_stream
    return cp, calls


def test_co_resident_launches_are_cooperative_and_others_are_not():
    """`Launch.co_resident` (the split tail's cubes wait for one another) takes
    cuLaunchCooperativeKernel, which fails a grid that cannot be resident at once instead of
    starting cubes that wait for ones that never run; every other launch stays cuLaunchKernel."""
    from gemm_engine.runtime.cuda_launch import DriverLauncher, PreparedLaunch
    cp, calls = _recording_cp()
    launcher = DriverLauncher(cp)
    kernel = type("K", (), {"ptr": 5})()
    launcher(kernel, 132, 384, (np.int64(1),), 1000, co_resident=True)
    launcher(kernel, 132, 384, (np.int64(1),), 1000)
    assert [c[0] for c in calls] == ["cooperative", "plain"] and calls[0][1:] == (5, 132, 384, 1000, 77)

    class Runtime:
        driver_launch, cuda_device = launcher, type("D", (), {"id": 0})()
    Runtime.cp = cp
    cp.cuda.runtime = type("R", (), {"getDevice": staticmethod(lambda: 0)})
    import gemm_engine.runtime.cuda_launch as cl
    ensure, cl.ensure_context = cl.ensure_context, lambda cp, device: None
    try:
        for co in (True, False):
            calls.clear()
            assert PreparedLaunch(Runtime, kernel, 132, 384, (FakeArray(), np.int64(2)), 0, (0,), co)(FakeArray(), stream=9)
            assert calls == [("cooperative" if co else "plain", 5, 132, 384, 0, 9)]
    finally:
        cl.ensure_context = ensure


def test_a_failed_cooperative_launch_says_why_and_what_to_choose():
    from gemm_engine.runtime.cuda_launch import DriverLauncher
    cp, _ = _recording_cp()

    def too_large(*args):
        raise ValueError("CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE")
    cp.cuda.driver.launchCooperativeKernel = staticmethod(too_large)
    with pytest.raises(RuntimeError, match=r"(?s)cooperative launch of 132 cubes failed.*TOO_LARGE.*split_tail=0"):
        DriverLauncher(cp)(type("K", (), {"ptr": 5})(), 132, 384, (np.int64(1),), 0, co_resident=True)


def test_other_errors_of_a_cooperative_launch_are_raised_as_the_driver_gave_them():
    from gemm_engine.runtime.cuda_launch import DriverLauncher
    cp, _ = _recording_cp()

    def illegal(*args):
        raise ValueError("CUDA_ERROR_ILLEGAL_ADDRESS: an earlier kernel's")
    cp.cuda.driver.launchCooperativeKernel = staticmethod(illegal)
    with pytest.raises(ValueError, match="ILLEGAL_ADDRESS"):
        DriverLauncher(cp)(type("K", (), {"ptr": 5})(), 132, 384, (np.int64(1),), 0, co_resident=True)


def test_co_resident_launch_without_a_cooperative_launch_is_refused():
    from gemm_engine.runtime.cuda_launch import DriverLauncher
    cp, calls = _recording_cp(cooperative=False)
    with pytest.raises(RuntimeError, match="no cooperative launch"):
        DriverLauncher(cp)(type("K", (), {"ptr": 5})(), 132, 384, (np.int64(1),), 0, co_resident=True)
    assert calls == []


def test_prepared_launch_derives_by_value_parameters_from_the_addresses():
    """A TMA plan's one launch looks its maps up by the first three addresses (`derived`: the call
    layer's cache and derivation), ints and runtime arrays alike, deriving each triple once; and
    writes them into its by-value buffers."""
    import ctypes

    from gemm_engine.runtime.cuda_launch import PreparedLaunch

    class Arr:
        def __init__(self, ptr):
            self.data = type("M", (), {"ptr": ptr})()

    rt = _FakeRuntime()
    rt.slots_read = 4
    launch = PreparedLaunch(rt, None, 2, 32, (FakeArray(), FakeArray(), FakeArray(), bytes(128)), 0, (0, 1, 2))
    cache, derived = {}, []

    def derive(key):
        derived.append(key)
        structs = cache[key] = [bytes([len(derived)]) * 128]
        return structs
    launch.derived = (cache, derive)
    assert launch(100, 200, 300) and launch(100, 200, 300) and launch(Arr(100), Arr(200), Arr(300))
    assert launch(100, 200, 400)
    assert derived == [(100, 200, 300), (100, 200, 400)]
    assert [s[:3] for s in rt.launched] == [[100, 200, 300]] * 3 + [[100, 200, 400]]
    (_, address, size), = launch._local.block.by_value
    assert ctypes.string_at(address, size) == bytes([2]) * 128
    assert launch(100, 200, 300, structs=[bytes([7]) * 128]) and derived == [(100, 200, 300), (100, 200, 400)]
    assert ctypes.string_at(address, size) == bytes([7]) * 128      # given structs win
