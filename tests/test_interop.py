"""Arrays of every library in, the caller's library out (gemm_engine/call/arrays.py): torch tensors
(CPU here; CUDA on a GPU, on torch's current stream), DLPack and CUDA-array-interface objects,
lists and Python scalars for any argument, and errors that name the argument."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import assert_close, random, reference, rel_error

torch = pytest.importorskip("torch", reason="torch is not installed here: its interop is tested where it is")


def test_torch_cpu_in_torch_out(engine, rng):
    a, b = random(rng, (3, 40, 30), "float32"), random(rng, (30, 20), "float32")
    result = engine.matmul(torch.from_numpy(a), torch.from_numpy(b))
    assert isinstance(result, torch.Tensor) and result.device.type == "cpu" and result.dtype == torch.float32
    assert_close(result.numpy(), a, b, "float32")


def test_torch_vector_dot_vector_is_0d_as_in_torch(engine):
    a, b = torch.arange(5, dtype=torch.float32), torch.ones(5, dtype=torch.float32)
    got, want = engine.matmul(a, b), torch.matmul(a, b)
    assert isinstance(got, torch.Tensor) and got.shape == want.shape == ()
    assert float(got) == float(want) == 10.0


def test_torch_cpu_bfloat16_and_out(engine, rng):
    a = torch.randn(33, 40, dtype=torch.bfloat16)
    b = torch.randn(40, 17, dtype=torch.bfloat16)
    result = engine.matmul(a, b)
    assert result.dtype == torch.bfloat16
    assert rel_error(result.float().numpy(), reference(a.float().numpy(), b.float().numpy())) < 1.5e-2
    out = torch.full((33, 17), float("nan"))
    got = engine.matmul(a, b, out=out, out_dtype=np.float32)
    assert got is out and torch.isfinite(out).all()
    assert rel_error(out.numpy(), reference(a.float().numpy(), b.float().numpy())) < 1e-2


def test_torch_bias_and_c(engine, rng):
    a, b = random(rng, (20, 30), "float32"), random(rng, (30, 10), "float32")
    bias, c = random(rng, (10,), "float32"), random(rng, (20, 10), "float32")
    got = engine.matmul(a, b, bias=torch.from_numpy(bias), c=torch.from_numpy(c), beta=0.5)
    assert isinstance(got, np.ndarray)          # numpy operands: numpy out, whatever the epilogue's
    ref = reference(a, b) + 0.5 * c + bias
    assert rel_error(got, ref) < 1e-5


def test_cuda_tensors_zero_copy_on_torchs_stream(engine, rng):
    if engine.backend != "cuda" or not torch.cuda.is_available():
        pytest.skip("needs the CUDA backend and torch with a GPU")
    dev = torch.device("cuda", engine.runtime.device_index)
    a = torch.randn(3, 70, 50, device=dev)
    b = torch.randn(50, 90, device=dev)
    stream = torch.cuda.Stream(dev)
    with torch.cuda.stream(stream):
        a2 = a * 2                              # produced on this stream; the engine must see it
        result = gemm_matmul(engine, a2, b)
        after = result + 1                      # consumed on it: no synchronization needed
    stream.synchronize()
    assert isinstance(result, torch.Tensor) and result.device == dev
    ref = reference((a * 2).cpu().numpy(), b.cpu().numpy())
    assert rel_error(after.cpu().numpy() - 1, ref) < 1e-5
    for dtype, tol in ((torch.bfloat16, 1.5e-2), (torch.float16, 2e-3)):
        x, y = torch.randn(64, 48, device=dev, dtype=dtype), torch.randn(48, 40, device=dev, dtype=dtype)
        r = engine.matmul(x, y)
        assert r.dtype == dtype and r.device == dev
        assert rel_error(r.float().cpu().numpy(), reference(x.float().cpu().numpy(), y.float().cpu().numpy())) < tol
    out = torch.empty(3, 70, 90, device=dev)
    assert engine.matmul(a, b, out=out) is out
    assert rel_error(out.cpu().numpy(), reference(a.cpu().numpy(), b.cpu().numpy())) < 1e-5
    # Repeated calls take the fast path and stay right.
    for _ in range(3):
        r = engine.matmul(a, b)
    assert rel_error(r.cpu().numpy(), reference(a.cpu().numpy(), b.cpu().numpy())) < 1e-5


def test_repeated_fused_calls_on_cuda_tensors_see_each_calls_values(engine):
    """The torch fast path of fused calls (a direct launch from the third call on) takes every
    call's alpha, beta, c and bias, and the scales' numbers."""
    if engine.backend != "cuda" or not torch.cuda.is_available():
        pytest.skip("needs the CUDA backend and torch with a GPU")
    dev = torch.device("cuda", engine.runtime.device_index)
    a, b = torch.randn(130, 70, device=dev), torch.randn(70, 90, device=dev)
    for i, (alpha, beta) in enumerate(((1.5, 0.5), (-2.0, 3.0), (0.25, -1.0), (3.0, 0.0), (1.0, 2.0))):
        c, bias = torch.randn(130, 90, device=dev), torch.randn(90, device=dev)
        got = engine.matmul(a, b, alpha=alpha, beta=beta, c=c, bias=bias, activation="relu", scale_a=0.5 + i)
        want = torch.relu(alpha * (0.5 + i) * (a.double() @ b.double()) + beta * c.double() + bias.double())
        assert rel_error(got.double().cpu().numpy(), want.cpu().numpy()) < 1e-5, (alpha, beta)


def test_cuda_tensor_views_read_where_they_lie(engine):
    """torch CUDA tensors reach the kernels as views made from their addresses (call/arrays.py):
    slices that start inside their storage, transposes, a batch broadcast by a zero stride, bfloat16
    and fp8 bits, a temporary whose only reference is the call's, and an empty tensor (DLPack)."""
    if engine.backend != "cuda" or not torch.cuda.is_available():
        pytest.skip("needs the CUDA backend and torch with a GPU")
    dev = torch.device("cuda", engine.runtime.device_index)
    big = torch.randn(3, 90, 80, device=dev)
    a = big[1, 7:77, 3:53]                              # offset into its storage, rows of 80
    b = torch.randn(60, 50, device=dev).t()[:, 5:45]    # column-major, offset
    want = a.double() @ b.double()
    assert rel_error(engine.matmul(a, b).double().cpu().numpy(), want.cpu().numpy()) < 1e-5
    batch = a.expand(4, 70, 50)                         # stride 0 along the batch
    got = engine.matmul(batch, b)
    assert got.shape == (4, 70, 40) and rel_error(got[3].double().cpu().numpy(), want.cpu().numpy()) < 1e-5
    x, y = (torch.randn(64, 48, device=dev) * 0.5).bfloat16()[8:], torch.randn(48, 40, device=dev).bfloat16()
    got = engine.matmul(x, y, bias=torch.randn(40, device=dev).bfloat16()[:40])
    assert got.dtype == torch.bfloat16 and got.shape == (56, 40)
    got = engine.matmul(torch.randn(33, 70, device=dev) + 1, torch.randn(70, 20, device=dev))   # temporaries
    assert got.shape == (33, 20) and torch.isfinite(got).all()
    if hasattr(torch, "float8_e4m3fn"):
        f8a = torch.randn(64, 128, device=dev).to(torch.float8_e4m3fn)
        f8b = torch.randn(40, 128, device=dev).to(torch.float8_e4m3fn).t()
        got = engine.matmul(f8a, f8b, out_dtype="float32")
        ref = f8a.double() @ f8b.double()
        # fp8 wgmma adds its products in fewer bits than float32's (measured 1.2e-4 here).
        assert rel_error(got.double().cpu().numpy(), ref.cpu().numpy()) < 1e-3
    empty = engine.matmul(torch.randn(5, 0, device=dev), torch.randn(0, 7, device=dev))
    assert empty.shape == (5, 7) and (empty == 0).all()


def gemm_matmul(engine, a, b):
    return engine.matmul(a, b)


class OnlyDlpack:
    """An array known only by its DLPack capsule (no numpy conversion, no array interface)."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_dlpack_only_objects(engine, rng):
    a, b = random(rng, (20, 30), "float32"), random(rng, (30, 10), "float32")
    assert_close(engine.matmul(OnlyDlpack(a), OnlyDlpack(b)), a, b, "float32")
