"""Which runtime a backend name means: the one place that maps "auto" / "cuda" / "opencl" (and
$GEMM_ENGINE_BACKEND) to a `Runtime`."""
from __future__ import annotations


import os

from .cuda import CudaRuntime, cuda_available
from .opencl import OpenCLRuntime


#: Environment variable that sets the backend `Engine(backend="auto")` and `matmul` use.
BACKEND_ENV = "GEMM_ENGINE_BACKEND"


def make_runtime(backend: str, device, context=None, queue=None):
    """The runtime for ``backend`` ("auto", "cuda", "opencl") on ``device`` (see `Engine`); "auto"
    takes $GEMM_ENGINE_BACKEND, else CUDA where CuPy sees a GPU, else OpenCL. Backends are
    imported only when chosen: neither CuPy nor PyOpenCL is needed to use the other."""
    if backend not in ("auto", "cuda", "opencl"):
        raise ValueError(f"backend: expected 'auto', 'cuda' or 'opencl', got {backend!r}")
    if context is not None or queue is not None:
        if backend == "cuda":
            raise TypeError("context / queue: OpenCL objects; the CUDA backend takes device= (an index)")
        backend = "opencl"
    if backend == "auto":
        backend = os.environ.get(BACKEND_ENV, "auto")
        if backend not in ("auto", "cuda", "opencl"):
            raise ValueError(f"${BACKEND_ENV}: expected 'auto', 'cuda' or 'opencl', got {backend!r}")
    if backend == "auto":
        backend = "cuda" if cuda_available() else "opencl"
    if backend == "cuda":
        return CudaRuntime(device)
    return OpenCLRuntime(device, context, queue)
