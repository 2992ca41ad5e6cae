"""32-bit flags written and waited on by a CUDA stream's front end (no kernel, no SM).

The peer strategy of the distributed GEMMs (distributed/peer.py) orders copy-engine transfers
against GEMMs on other GPUs with these: a stream writes a flag (``cuStreamWriteValue32``, preceded
by a system-wide memory fence, so the writes before it in the stream are visible first) into a
peer's memory, and the peer's stream waits (``cuStreamWaitValue32``) until its copy holds at least
a value. Neither occupies an SM, so a persistent GEMM that holds every SM does not delay them.

The comparison is the driver's cyclic one (``(int32)(*flag - value) >= 0``), so counters that wrap
past 2^32 keep working. Through NVIDIA's cuda-bindings package, as runtime/tensor_map.py's encoding.
"""
from __future__ import annotations

_driver = None


def _api():
    global _driver
    if _driver is None:
        try:
            from cuda.bindings import driver
        except ImportError as exc:   # pragma: no cover - depends on the machine
            raise RuntimeError("stream flags need NVIDIA's cuda-bindings package (pip install cuda-bindings)") from exc
        _driver = driver
    return _driver


def available() -> bool:
    """Whether the driver binding imports (the device's support is the driver's: CUDA 12+ has it)."""
    try:
        _api()
    except RuntimeError:
        return False
    return True


def _check(result, what: str) -> None:
    err = result[0] if isinstance(result, tuple) else result
    if int(err) != 0:
        raise RuntimeError(f"{what} failed: {err!r}")


def write(stream_handle: int, address: int, value: int) -> None:
    """Enqueue on ``stream_handle``: ``*(uint32*)address = value`` after the stream's earlier work."""
    d = _api()
    _check(d.cuStreamWriteValue32(d.CUstream(stream_handle), d.CUdeviceptr(address), value & 0xFFFFFFFF,
                                  d.CUstreamWriteValue_flags.CU_STREAM_WRITE_VALUE_DEFAULT), "cuStreamWriteValue32")


def wait_at_least(stream_handle: int, address: int, value: int) -> None:
    """Enqueue on ``stream_handle``: later work waits until ``*(uint32*)address`` reaches ``value``."""
    d = _api()
    _check(d.cuStreamWaitValue32(d.CUstream(stream_handle), d.CUdeviceptr(address), value & 0xFFFFFFFF,
                                 d.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ), "cuStreamWaitValue32")
