"""tools/benchsuite/triton_matmul.py: the Triton baseline's kernel against float64 on a CUDA GPU
(2-D, batched, transposed views, sizes off every block; float32 exact unless tf32). Skipped where
Triton or a CUDA device is missing (the module imports Triton at load)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the Triton baseline takes torch tensors")
pytest.importorskip("triton", reason="the Triton baseline needs Triton")
if not torch.cuda.is_available():
    pytest.skip("the Triton baseline runs on a CUDA device", allow_module_level=True)

from gemm_engine.tools.benchsuite.triton_matmul import matmul_call  # noqa: E402


@pytest.mark.parametrize("shape", [(1, 300, 70, 129), (3, 257, 65, 33), (1, 1, 512, 64)])
@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.float16, 2e-3)])
def test_against_float64(shape, dtype, tol):
    batch, m, n, k = shape
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(batch, m, k, device="cuda", generator=gen).to(dtype)
    b = torch.randn(batch, n, k, device="cuda", generator=gen).to(dtype).transpose(-1, -2)   # a strided view
    if batch == 1:
        a, b = a[0], b[0]
    got = matmul_call(a, b)()
    ref = a.double() @ b.double()
    assert got.dtype == dtype and got.shape == ref.shape
    assert ((got.double() - ref).norm() / ref.norm()).item() < tol


def test_tf32_is_a_choice():
    a = torch.randn(128, 128, device="cuda")
    exact, tf32 = matmul_call(a, a)(), matmul_call(a, a, tf32=True)()
    ref = a.double() @ a.double()
    assert ((exact.double() - ref).norm() / ref.norm()).item() < 1e-5
    assert ((tf32.double() - ref).norm() / ref.norm()).item() < 5e-3
