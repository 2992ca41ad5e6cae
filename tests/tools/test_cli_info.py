"""tools/cli_info.py: ``gemm-engine info`` names each backend's device (or why it is unavailable),
its kernel cache, the tuning cache and every registered algorithm."""
from __future__ import annotations

import argparse

from gemm_engine.algorithms.base import REGISTRY
from gemm_engine.tools.cli_info import info


def test_info_reports_devices_caches_and_algorithms(capsys, opencl_engine):
    assert info(argparse.Namespace()) == 0
    out = capsys.readouterr().out
    assert "\nopencl:\n" in out and f"device          {opencl_engine.device.name}" in out
    assert "kernel cache" in out and "tuning cache" in out
    assert "\ncuda:\n" in out                         # a device or why it cannot run here
    listed = out.split("algorithms        ", 1)[1].splitlines()[0].split(", ")
    assert set(listed) == set(REGISTRY)
