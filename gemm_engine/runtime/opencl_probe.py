"""The OpenCL capability probe: what a device's compiler offers, found by building and running tiny
kernels (codegen/opencl_probe.py) once per device and process.

`probe_device` runs the vendor's probes in order, each in a context of its own (a kernel that
faults must not poison the engine's context, nor the next probe's), and returns the features that
built and wrote exactly what they should, plus the reason each other one was refused (the build
log's first error line, the run's error, or "ran, but wrote wrong words"). The answer is kept per
(platform, device, driver, probe version) for the life of the process; PyOpenCL's binary cache
makes the builds of a later process fast.

``$GEMM_ENGINE_OPENCL_PROBE=off`` skips the probe (no features: portable kernels only), for
comparing against them; a device of no vendor the probe knows gets no features.
"""
from __future__ import annotations

import os
import threading
from dataclasses import replace

import numpy as np

from ..codegen.opencl_probe import (AMD_PROBES, INTEL_PROBES, NVIDIA_PROBES, POISON, PROBE_UNITS, PROBE_VERSION,
                                    WORDS, Probe)

#: Set to "off" to skip the probe.
PROBE_ENV = "GEMM_ENGINE_OPENCL_PROBE"

_cache: dict = {}
_lock = threading.Lock()


def vendor_of(cl, dev) -> str:
    """"nvidia", "amd", "intel", "cpu" or "": whose compiler builds for ``dev``."""
    if dev.type & cl.device_type.CPU:
        return "cpu"
    vendor = f"{dev.vendor} {dev.platform.name}".lower()
    for word, name in (("nvidia", "nvidia"), ("advanced micro devices", "amd"), ("amd", "amd"), ("intel", "intel")):
        if word in vendor:
            return name
    return ""


def compute_capability(dev) -> tuple[int, int] | None:
    """NVIDIA's compute capability through cl_nv_device_attribute_query (None elsewhere)."""
    try:
        return int(dev.compute_capability_major_nv), int(dev.compute_capability_minor_nv)
    except Exception:   # noqa: BLE001 -- the query exists on NVIDIA's driver only
        return None


def probes_for(vendor: str) -> tuple[Probe, ...]:
    return {"nvidia": NVIDIA_PROBES, "amd": AMD_PROBES, "intel": INTEL_PROBES}.get(vendor, ())


def isa_and_plane(dev, vendor: str) -> tuple[str, int]:
    """(instruction set, plane width) of a GPU: AMD's gfx target and wavefront (64 on CDNA, 32 on
    RDNA unless the driver says otherwise), Intel's DPAS generation by its smallest sub-group (8:
    Xe-HPG, 16: Xe-HPC), NVIDIA's 32-wide warps; ("", 1) for anything else."""
    if vendor == "nvidia":
        return "", 32
    if vendor == "amd":
        isa = dev.name.split(":")[0] if dev.name.startswith("gfx") else ""
        try:
            wave = int(dev.wavefront_width_amd)
        except Exception:   # noqa: BLE001 -- cl_amd_device_attribute_query is AMD's own
            wave = 64 if isa.startswith("gfx9") else 32
        return isa, wave
    if vendor == "intel":
        try:
            sizes = [int(s) for s in dev.sub_group_sizes_intel]
        except Exception:   # noqa: BLE001 -- cl_intel_required_subgroup_size is Intel's own
            sizes = []
        smallest = min(sizes) if sizes else 1
        return {8: "xe-hpg", 16: "xe-hpc"}.get(smallest, ""), smallest
    return "", 1


def probe_device(cl, dev, device_info) -> tuple[frozenset, tuple[tuple[str, str], ...]]:
    """(features, refusals) of ``dev`` (``device_info``: what the runtime knows of it so far)."""
    if os.environ.get(PROBE_ENV, "").lower() in ("off", "0", "no"):
        return frozenset(), ()
    probes = probes_for(device_info.vendor)
    if not probes:
        return frozenset(), ()
    key = (dev.platform.name, dev.name, dev.driver_version, PROBE_VERSION)
    with _lock:
        if key not in _cache:
            _cache[key] = run_probes(lambda probe, source: _run_one(cl, dev, probe, source), probes, device_info)
        return _cache[key]


def run_probes(run, probes, device_info) -> tuple[frozenset, tuple[tuple[str, str], ...]]:
    """Walk ``probes`` in order: ``run(probe, source)`` returns the words the kernel wrote or
    raises (a build or launch error); a probe grants its features when the words are the expected
    ones. Returns (features, refusals); refusals name each refused feature once, with why."""
    features: set = set()
    refusals: dict = {}
    for probe in probes:
        if probe.unless and probe.unless in features:
            continue
        missing = sorted(probe.needs - features)
        if missing:
            for f in probe.grants - features:
                refusals.setdefault(f, f"needs {', '.join(missing)}")
            continue
        source = probe.render(replace(device_info, features=frozenset(features)))
        try:
            words = run(probe, source)
            why = None if np.array_equal(words, probe.expected()) else _wrong(words, probe.expected())
        except Exception as exc:   # noqa: BLE001 -- any build or run failure refuses the feature
            why = _first_line(exc)
        if why is None:
            features |= probe.grants
            for f in probe.grants:
                refusals.pop(f, None)
        elif not probe.finding:
            for f in probe.grants - features:
                refusals[f] = f"{probe.name}: {why}"
    return frozenset(features), tuple(sorted(refusals.items()))


def _wrong(words, expected) -> str:
    bad = np.flatnonzero(words != expected)
    i = int(bad[0])
    return (f"ran, but wrote wrong words ({len(bad)} of {len(expected)}; word {i}: {int(words[i]):#x}, "
            f"expected {int(expected[i]):#x})")


def _first_line(exc: Exception) -> str:
    """The telling line of a build or run error: the first compiler line that says "error" (not
    PyOpenCL's "clBuildProgram failed"), else the first line."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower() and "clbuildprogram failed" not in ln.lower()]
    line = (errors or lines or [type(exc).__name__])[0]
    return f"{type(exc).__name__}: {line[:300]}"


def _run_one(cl, dev, probe: Probe, source: str) -> np.ndarray:
    """Build ``source`` in a context of its own, run its one work-group, return the words."""
    context = cl.Context([dev])
    queue = cl.CommandQueue(context)
    program = cl.Program(context, source).build(options=["-cl-std=CL1.2"])
    mf = cl.mem_flags
    host_in = np.ascontiguousarray(probe.inputs(), dtype=np.uint32)
    out = np.full(PROBE_UNITS * WORDS, POISON, np.uint32)
    d_in = cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=host_in)
    d_out = cl.Buffer(context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=out)
    program.probe(queue, (PROBE_UNITS,), (PROBE_UNITS,), d_out, d_in)
    cl.enqueue_copy(queue, out, d_out)
    queue.finish()
    return out
