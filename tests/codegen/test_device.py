"""codegen/device.py: DeviceInfo's arch name and the nominal CUDA devices rendering runs against."""
from __future__ import annotations

import dataclasses

import pytest

from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device


def test_arch_names_the_compute_capability():
    dev = DeviceInfo("cuda", "x", 1, 1024, 64, 32, compute_capability=(8, 6))
    assert dev.arch == "sm_86"
    assert DeviceInfo("opencl", "pocl", 2, 65536, 1024, 32).arch is None


@pytest.mark.parametrize("major, minor, units, smem", [(9, 0, 132, 232448), (8, 0, 108, 166912)])
def test_nominal_devices_are_h100_and_a100_like(major, minor, units, smem):
    dev = nominal_cuda_device(major, minor)
    assert dev.backend == "cuda" and dev.compute_capability == (major, minor)
    assert dev.arch == f"sm_{major}{minor}" and dev.arch in dev.name
    assert dev.compute_units == units and dev.max_shared_memory == smem
    assert dev.plane_size == 32 and dev.max_threads_per_cube == 1024 and dev.fp64


def test_nominal_default_is_sm_90_and_unknown_archs_get_48_kib():
    assert nominal_cuda_device() == nominal_cuda_device(9, 0)
    other = nominal_cuda_device(8, 6)
    assert other.max_shared_memory == 49152 and other.compute_units == 108


def test_device_info_is_frozen_and_hashable():
    dev = nominal_cuda_device()
    with pytest.raises(dataclasses.FrozenInstanceError):
        dev.compute_units = 1
    assert {dev: 1}[nominal_cuda_device()] == 1
