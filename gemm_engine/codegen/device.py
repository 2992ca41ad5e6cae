"""What the host knows about a target device: the facts that setup decisions depend on.

A `DeviceInfo` is plain data so that setup (and therefore rendering) can run with no device at
all: CI renders every CUDA config for a nominal sm_80 / sm_90 device and compiles it with nvcc.
"""
from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class DeviceInfo:
    backend: str                        # "cuda" or "opencl"
    name: str
    compute_units: int                  # SMs / compute units
    max_shared_memory: int              # bytes of shared (local) memory one cube may use
    max_threads_per_cube: int           # threads per block / work-items per work-group
    plane_size: int                     # warp / sub-group width the kernels may assume
    compute_capability: tuple[int, int] | None = None   # CUDA only
    fp64: bool = True
    #: ``compute_units`` is a cap below the device's own count (`Engine(max_compute_units=...)`):
    #: grids that can keep to it do (persistent launches), so that other kernels keep the rest.
    limited: bool = False

    @property
    def arch(self) -> str | None:
        """CUDA target name, e.g. "sm_90", or None on OpenCL."""
        if self.compute_capability is None:
            return None
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    def limited_to(self, units: int | None) -> "DeviceInfo":
        """This device with at most ``units`` compute units for a kernel (None: all of them)."""
        if units is None:
            return self
        if isinstance(units, bool) or not isinstance(units, int) or units < 1:
            raise ValueError(f"max_compute_units: expected a positive int (or None), got {units!r}")
        if units >= self.compute_units:
            return self
        # Named apart: tuning entries (keyed by the name) of a capped engine are not the device's.
        return replace(self, name=f"{self.name} [{units} compute units]", compute_units=units, limited=True)


def nominal_cuda_device(major: int = 9, minor: int = 0) -> DeviceInfo:
    """A stand-in CUDA device for rendering without a GPU (H100-like for 9.0, A100-like for 8.0)."""
    smem = {(9, 0): 232448, (8, 0): 166912}.get((major, minor), 49152)
    return DeviceInfo(
        backend="cuda",
        name=f"nominal sm_{major}{minor}",
        compute_units=132 if major >= 9 else 108,
        max_shared_memory=smem,
        max_threads_per_cube=1024,
        plane_size=32,
        compute_capability=(major, minor),
    )
