"""32-bit flags written by a CUDA stream's front end (no kernel, no SM).

The peer strategy of the distributed GEMMs (distributed/peer.py) tells another GPU that a block has
landed in its memory with these: after the copy (or the GEMM) that wrote the block, the stream
writes a flag into the peer's memory (``cuStreamWriteValue32``, preceded by a system-wide memory
fence, so the writes before it in the stream are visible first). No SM is taken, so a persistent
GEMM holding every SM does not delay it. (Waiting is a kernel's, codegen/flag_wait.py: the front
end's own wait, ``cuStreamWaitValue32``, notices a write from another GPU only about a millisecond
late: measured on 2 H100s, bench/results/h100/distributed_2gpu.md.)

Counters wrap at 2^32; the waiting kernel compares cyclically. Through NVIDIA's cuda-bindings
package, as runtime/tensor_map.py's encoding.
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

