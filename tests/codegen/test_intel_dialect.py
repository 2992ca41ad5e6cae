"""codegen/intel_dialect.py (render only): Intel's OpenCL dialect requires the DPAS sub-group size in its
launch bounds, names the offline target in its build note, and spells the sub-group lane and DPAS."""
from __future__ import annotations

from dataclasses import replace

import pytest

from gemm_engine.codegen.device import nominal_opencl_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.codegen.intel_dialect import DPAS, IntelOpenCLDialect
from gemm_engine.codegen.opencl_dialect import OpenCLDialect


@pytest.mark.parametrize("target, size, device", [("xe-hpg", 8, "dg2"), ("xe-hpc", 16, "pvc")])
def test_sub_group_size_in_launch_bounds_and_note(target, size, device):
    d = dialect_for(nominal_opencl_device(target))
    assert isinstance(d, IntelOpenCLDialect)
    pre = d.preamble([])
    assert pre.startswith(OpenCLDialect(d.device).preamble([]))   # the base preamble, then the override
    tail = pre[pre.index("#undef LAUNCH_BOUNDS"):]
    assert f"intel_reqd_sub_group_size({size})" in tail and "reqd_work_group_size(n, 1, 1)" in tail
    note = d.compile_note("")
    assert f"sub-groups of {size}" in note and f"-device {device}" in note


def test_plane_lane_is_sub_group_local_id():
    assert IntelOpenCLDialect.plane_lane() == "(int)get_sub_group_local_id()"


@pytest.mark.parametrize("kind", sorted(DPAS))
def test_dpas_statement(kind):
    d = dialect_for(nominal_opencl_device("xe-hpc"))
    assert d.dpas(kind, "acc", "a", "b") == f"acc = {DPAS[kind][0]}(a, b, acc);"
    assert DPAS[kind][1] == 16


def test_no_dpas_feature_gets_plain_opencl():
    dev = replace(nominal_opencl_device("xe-hpc"), features=frozenset())
    assert type(dialect_for(dev)) is OpenCLDialect
