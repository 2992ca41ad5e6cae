"""What the host knows about a target device: the facts that setup decisions depend on.

A `DeviceInfo` is plain data so that setup (and therefore rendering) can run with no device at
all: CI renders every CUDA config for a nominal sm_80 / sm_90 device and compiles it with nvcc, and
every OpenCL config for nominal OpenCL devices of each vendor (`nominal_opencl_device`).

On OpenCL a device also names its ``vendor`` (which decides the dialect: NVIDIA's driver takes
inline PTX, AMD's clang takes the amdgcn builtins, Intel's compiler its sub-group matrix functions),
its ``isa`` (AMD's gfx target, Intel's DPAS sub-group width) and its ``features``: what the
runtime's capability probe (runtime/opencl_probe.py) compiled and ran there. A feature absent is a
feature refused; ``refusals`` says why (what the explanation quotes).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class DeviceInfo:
    backend: str                        # "cuda" or "opencl"
    name: str
    compute_units: int                  # SMs / compute units
    max_shared_memory: int              # bytes of shared (local) memory one cube may use
    max_threads_per_cube: int           # threads per block / work-items per work-group
    plane_size: int                     # warp / sub-group width the kernels may assume
    compute_capability: tuple[int, int] | None = None   # CUDA, and NVIDIA's OpenCL driver
    fp64: bool = True
    #: ``compute_units`` is a cap below the device's own count (`Engine(max_compute_units=...)`):
    #: grids that can keep to it do (persistent launches), so that other kernels keep the rest.
    limited: bool = False
    #: OpenCL: "nvidia", "amd", "intel", "cpu" (PoCL and other CPU drivers) or "" (any other).
    vendor: str = ""
    #: OpenCL: the instruction set the vendor's compiler targets ("gfx90a", "gfx1100"; "xe-hpg" /
    #: "xe-hpc" for Intel's 8- / 16-wide DPAS), "" when it does not matter.
    isa: str = ""
    #: OpenCL: capabilities the probe found (`Dialect.supports` answers from them).
    features: frozenset = frozenset()
    #: OpenCL: feature -> why the probe refused it (a build log's first line, a wrong result).
    refusals: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    #: float32 components of the device's native vector (a CPU's SIMD width: 16 with AVX-512, 8
    #: with AVX2; 0 where unknown or irrelevant): the CPU path's register tiles follow it.
    vector_width: int = 0

    @property
    def arch(self) -> str | None:
        """CUDA target name, e.g. "sm_90", or None without a compute capability."""
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
    def refusal(self, feature: str) -> str | None:
        """Why the probe refused ``feature`` (None: it was not refused, or never asked)."""
        return dict(self.refusals).get(feature)


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


#: What the probe finds on NVIDIA's OpenCL driver of an sm_80 / sm_90 GPU when every PTX
#: instruction it tries builds and runs (see runtime/opencl_probe.py): the nominal devices assume it.
PTX_FEATURES = frozenset({"inline_ptx", "mma_sync", "bf16_mma", "tf32_mma", "s8_mma", "f64_mma",
                          "ldmatrix", "cp_async", "pack_half2"})
#: The f64 mma.sync shapes m16n8k{4,8,16} (sm_90 only).
PTX_SM90_FEATURES = frozenset({"f64_mma_m16"})
#: Not a probe of the dialect but of the build: the OpenCL runtime compiles each kernel's PTX to
#: machine code by nvJitLink (runtime/sass.py), which the selector weighs (selector/mma.py).
SASS_BUILD = "sass_build"

#: Nominal OpenCL targets: name -> (vendor, isa, compute units, local memory, plane, cc, features).
_OPENCL_TARGETS = {
    "gpu": ("", "", 32, 48 * 1024, 32, None, frozenset()),
    "cpu": ("cpu", "", 2, 1024 * 1024, 1, None, frozenset()),
    "sm_80": ("nvidia", "", 108, 48 * 1024, 32, (8, 0), PTX_FEATURES),
    "sm_90": ("nvidia", "", 132, 48 * 1024, 32, (9, 0), PTX_FEATURES | PTX_SM90_FEATURES),
    "gfx90a": ("amd", "gfx90a", 104, 64 * 1024, 64, None, frozenset({"mfma", "mfma_f64"})),
    "gfx942": ("amd", "gfx942", 304, 64 * 1024, 64, None, frozenset({"mfma", "mfma_f64"})),
    "gfx1100": ("amd", "gfx1100", 48, 64 * 1024, 32, None, frozenset({"wmma_gfx11"})),
    "xe-hpg": ("intel", "xe-hpg", 512, 64 * 1024, 8, None, frozenset({"intel_dpas"})),
    "xe-hpc": ("intel", "xe-hpc", 448, 128 * 1024, 16, None, frozenset({"intel_dpas"})),
}
OPENCL_TARGETS = tuple(_OPENCL_TARGETS)


def nominal_opencl_device(target: str = "gpu") -> DeviceInfo:
    """A stand-in OpenCL device for rendering without one: "gpu" (no vendor: portable kernels only),
    "cpu" (PoCL-like: AVX-512), "sm_80" / "sm_90" (NVIDIA's driver, the probe having passed every PTX
    feature), "gfx90a" / "gfx942" (AMD CDNA, MFMA), "gfx1100" (AMD RDNA3, WMMA), "xe-hpg" / "xe-hpc"
    (Intel, 8- / 16-wide DPAS)."""
    if target not in _OPENCL_TARGETS:
        raise ValueError(f"target: expected one of {OPENCL_TARGETS}, got {target!r}")
    vendor, isa, units, local, plane, cc, features = _OPENCL_TARGETS[target]
    return DeviceInfo(backend="opencl", name=f"nominal OpenCL {target}", compute_units=units,
                      max_shared_memory=local, max_threads_per_cube=1024 if plane > 1 else 4096,
                      plane_size=plane, compute_capability=cc, vendor=vendor, isa=isa, features=features,
                      vector_width=16 if vendor == "cpu" else 0)
