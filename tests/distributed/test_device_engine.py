"""What a distributed program asks of a per-device engine: results written into a slice of a
preallocated output (rows or columns, the rest untouched), on torch's current stream, with no
allocation per call (CUDA: torch's allocator sees none after the first call)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import gemm_engine  # noqa: E402


def test_out_is_a_slice_of_a_preallocated_output(opencl_engine):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(13, 7, generator=g), torch.randn(7, 5, generator=g)
    want = a.double() @ b.double()
    rows = torch.full((40, 5), float("nan"))
    opencl_engine.matmul(a, b, out=rows[20:33])
    assert torch.allclose(rows[20:33].double(), want, atol=1e-5)
    assert rows[:20].isnan().all() and rows[33:].isnan().all()
    cols = torch.full((13, 12), float("nan"))
    opencl_engine.matmul(a, b, out=cols[:, 4:9])
    assert torch.allclose(cols[:, 4:9].double(), want, atol=1e-5)
    assert cols[:, :4].isnan().all() and cols[:, 9:].isnan().all()


def _cuda_engine(index=0):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU and torch with CUDA")
    try:
        return gemm_engine.Engine("cuda", device=index)
    except (gemm_engine.BackendUnavailableError, ImportError) as exc:
        pytest.skip(f"CUDA backend unavailable: {exc}")


def test_cuda_out_slices_allocate_nothing_per_call_and_follow_the_current_stream():
    engine = _cuda_engine()
    a = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(4096, 256, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        engine.matmul(a, b, out=out[:1024])        # first call: plan, compile, any scratch
        torch.cuda.synchronize()
        before = torch.cuda.memory_stats()["allocation.all.allocated"]
        for i in range(4):
            engine.matmul(a, b, out=out[i * 1024:(i + 1) * 1024])
        assert torch.cuda.memory_stats()["allocation.all.allocated"] == before
        side.synchronize()           # the side stream's work only: the engine ran on it
    want = (a.float() @ b.float()).to(torch.bfloat16).float()
    for i in range(4):
        assert torch.allclose(out[i * 1024:(i + 1) * 1024].float(), want, rtol=2e-2, atol=2e-2)


def test_a_capped_cuda_engine_computes_the_product():
    engine = _cuda_engine()
    units = torch.cuda.get_device_properties(0).multi_processor_count
    capped = gemm_engine.Engine("cuda", device=0, max_compute_units=units - 16)
    assert capped.device.compute_units == units - 16
    a = torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(1024, 2048, device="cuda", dtype=torch.bfloat16)
    want = a.float() @ b.float()
    for e in (engine, capped):
        got = e.matmul(a, b).float()
        assert float((got - want).norm() / want.norm()) < 1e-2
