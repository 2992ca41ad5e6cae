"""call/prepare.py without a device: a list-layout call's operands read in place through offsets from
one base array (CUDA), on a runtime whose "device arrays" are numpy arrays at their real addresses:
the copies the kernel reads are held until the launch, and the alignment covers every group's
offset, leading dimension and extent along the contiguous axis."""
from __future__ import annotations

import numpy as np

from gemm_engine.call.arrays import Imported
from gemm_engine.call.prepare import _list_side
from gemm_engine.problem import Layout
from gemm_engine.runtime.base import span_of


class AddressRuntime:
    """What `_list_side` reads of a CUDA runtime, over numpy arrays (addresses are their own)."""

    backend = "cuda"

    @staticmethod
    def element_address(x) -> int:
        return x.__array_interface__["data"][0] // x.itemsize

    @staticmethod
    def byte_span(x):
        return ("host",) + span_of(x.__array_interface__["data"][0], x.shape, x.strides, x.itemsize)

    @staticmethod
    def contiguous(x, dtype=None):
        return np.array(x, dtype=dtype, order="C", copy=True)


def device(x) -> Imported:
    return Imported(x, x.dtype, False, "cupy", x)


def aligned(rows, cols, rng, ld=None):
    """A float32 (rows, cols) array whose rows start 16-byte aligned, ``ld`` elements apart."""
    ld = ld or cols
    raw = np.empty(rows * ld + 16, np.float32)
    start = (-raw.__array_interface__["data"][0] // 4) % 4
    full = raw[start:start + rows * ld].reshape(rows, ld)
    full[:] = rng.standard_normal((rows, ld))
    return full[:, :cols]


def test_a_copy_the_kernel_reads_is_held_at_its_offset(rng):
    rt = AddressRuntime()
    first = aligned(24, 16, rng)
    other = np.asfortranarray(rng.standard_normal((8, 24)).astype(np.float32))   # another layout: copied
    op, at = _list_side(rt, [device(first), device(other)], np.dtype(np.float32), [(24, 16), (8, 24)])
    assert op.array is first and op.view.layout is Layout.ROW and op.copied
    (copy,) = op.holds      # without it, the copy's memory goes back to the pool before the launch
    np.testing.assert_array_equal(copy, other)
    assert at == [(0, 16), (rt.element_address(copy) - rt.element_address(first), 24)]


def test_the_alignment_divides_every_groups_contiguous_extent(rng):
    rt = AddressRuntime()
    # rows 16 elements apart, 6 used: a 4-wide vector at column 4 would cross the group's end
    xs = [aligned(4, 6, rng, ld=16), aligned(5, 8, rng)]
    op, _ = _list_side(rt, [device(x) for x in xs], np.dtype(np.float32), [(4, 6), (5, 8)])
    assert op.align == 2 and not op.holds
    op, _ = _list_side(rt, [device(aligned(4, 8, rng, ld=16)), device(aligned(5, 8, rng))], np.dtype(np.float32),
                       [(4, 8), (5, 8)])
    assert op.align == 4
