"""``gemm-engine info``: backends, devices, the tiles each device gets, kernel and tuning caches."""
from __future__ import annotations

import os
import platform

import numpy as np

from ..algorithms.base import REGISTRY
from ..engine import Engine
from ..explain import device_tiles
from ..runtime.nvrtc import cupy_cache_dir
from ..tuning import CACHE_ENV, TuningCache
from ..version import __version__


def info(args) -> int:
    """``gemm-engine info``: each backend's device, tiles and kernel cache; the tuning cache."""
    print(f"gemm_engine {__version__}  (python {platform.python_version()}, numpy {np.__version__})")
    for backend in ("cuda", "opencl"):
        print(f"\n{backend}:")
        try:
            engine = Engine(backend)
        except Exception as exc:   # noqa: BLE001 -- unavailable backends are reported, not raised
            print(f"  unavailable: {exc}")
            continue
        d = engine.device
        print(f"  device          {d.name}")
        print(f"  compute units   {d.compute_units}   plane (warp / sub-group) size {d.plane_size}")
        print(f"  shared memory   {d.max_shared_memory} bytes per cube, {d.max_threads_per_cube} units per cube")
        print(f"  tiles           {device_tiles(d)}")
        print(f"  fp64            {'yes' if d.fp64 else 'no'}")
        print(f"  kernel cache    {_binary_cache(engine)}")
    cache = TuningCache()
    cache.refresh()
    print(f"\ntuning cache      {cache.path}  ({cache.status}; ${CACHE_ENV} overrides the folder)")
    print(f"algorithms        {', '.join(sorted(REGISTRY))}")
    print(f"default backend   {os.environ.get('GEMM_ENGINE_BACKEND', 'auto')} ($GEMM_ENGINE_BACKEND)")
    print()
    return 0


def _binary_cache(engine) -> str:
    """Where compiled kernels of ``engine``'s backend are cached, and what overrides it."""
    if engine.backend == "cuda":
        folder = cupy_cache_dir(engine.runtime.cp)
        return f"{folder} (CuPy's; $CUPY_CACHE_DIR: the NVRTC cubins, gemm_engine_*.cubin)"
    name = engine.device.name
    if "Portable Computing Language" in name or "pthread" in name:
        base = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
        return f"{os.environ.get('POCL_CACHE_DIR', os.path.join(base, 'pocl'))} (PoCL's own; $POCL_CACHE_DIR)"
    import platformdirs
    return f"{platformdirs.user_cache_dir('pyopencl')} (PyOpenCL's binary cache)"
