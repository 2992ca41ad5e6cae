"""The tuning cache's key: what a tuned choice is valid for.

A choice is stored for a *class* of problems, not one shape: sizes are anchored (rounded up to the
next value of the form 2^j or 3 * 2^j, so 1000 and 1024 share a key and 11008 shares 12288's),
while everything that changes which kernels may run or how they read memory is kept exactly: the
backend, the device's name and architecture, element types, precision, each operand's layout and
vector alignment. Sizes up to 16 are kept exact: 1, 2 and 16 rows are different kernels' business
(skinny, thin tiles). The epilogue is not part of the key: it costs every candidate the same
(one pass over the accumulators at the store), so the plain product's winner serves fused calls.
"""
from __future__ import annotations

from ..problem import MatmulProblem

#: Sizes up to this are part of the key as they are.
EXACT_UP_TO = 16


def anchor(size: int) -> int:
    """The smallest 2^j or 3 * 2^j at least ``size`` (``size`` itself when at most EXACT_UP_TO)."""
    if size <= EXACT_UP_TO:
        return size
    power = 1 << (size - 1).bit_length()          # next power of two >= size
    three = 3 * power // 4                          # 3 * 2^(j-2): between power / 2 and power
    return three if three >= size else power


def problem_key(problem: MatmulProblem, device) -> str:
    """A stable text key (it is a JSON object key in the cache file)."""
    p = problem
    arch = device.arch or "-"
    types = ",".join(t.name for t in (p.lhs, p.rhs, p.out))
    layouts = f"{p.lhs_layout.value},{p.rhs_layout.value}"
    sizes = "x".join(str(anchor(v)) for v in (p.batch, p.m, p.n, p.k))
    return (f"{device.backend}|{device.name}|{arch}|{types}|{p.precision}|{layouts}"
            f"|align{p.lhs_align},{p.rhs_align}|{sizes}")
