"""tools/cli_types.py: each argparse type's accepted values and its one-line refusal."""
from __future__ import annotations

import argparse

import pytest

from gemm_engine.problem import Layout
from gemm_engine.tools.cli_types import arch, count, counts, layout_pair, nonnegative, shapes


def test_counts():
    assert count("7") == 7 and counts("1, 8,64") == (1, 8, 64) and nonnegative("0") == 0
    for bad in ("0", "-2", "x", "1.5"):
        with pytest.raises(argparse.ArgumentTypeError, match="expected a positive integer"):
            count(bad)
    with pytest.raises(argparse.ArgumentTypeError, match="expected an integer >= 0, got '-1'"):
        nonnegative("-1")
    with pytest.raises(argparse.ArgumentTypeError):
        counts("4,,8")


def test_layouts_and_arch():
    assert layout_pair("row, col") == (Layout.ROW, Layout.COL)
    for bad in ("row", "row,diag", "row,col,row"):
        with pytest.raises(argparse.ArgumentTypeError, match="expected two of row/col"):
            layout_pair(bad)
    assert arch("sm_90a") == "sm_90a" and arch("SM_80") == "SM_80"
    for bad in ("sm_9", "90x", "hopper"):
        with pytest.raises(argparse.ArgumentTypeError, match="expected e.g. sm_80"):
            arch(bad)


def test_shapes():
    assert shapes("64x32x16, 2x8x8x8") == [(1, 64, 32, 16), (2, 8, 8, 8)]
    for bad in ("64x32", "0x4x4", "4x4x4x4x4", "ax4x4"):
        with pytest.raises(argparse.ArgumentTypeError, match="expected MxNxK or BxMxNxK"):
            shapes(bad)
