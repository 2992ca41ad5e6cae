"""codegen/strided_copy.py: the strided-copy kernel, run on PoCL against numpy's own copies of
non-contiguous views (offsets, negative-free strides, every item size it takes)."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.codegen.opencl_dialect import OpenCLDialect
from gemm_engine.codegen.strided_copy import strided_copy_source
from helpers import cl_run

_WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _run(engine, src_view: np.ndarray, base: np.ndarray, dst_shape):
    """Copy ``src_view`` (a view into ``base``) into a fresh contiguous array of ``dst_shape`` with
    the kernel, by element strides and offsets as the runtime passes them."""
    item = base.itemsize
    d = dialect_for(engine.device)
    source = strided_copy_source(d, src_view.ndim, item)
    size = src_view.size
    offset = (src_view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // item
    dst = np.zeros(dst_shape, base.dtype)
    dims = []
    for n, s, t in zip(src_view.shape, src_view.strides, dst.strides):
        dims += [np.int64(n), np.int64(s // item), np.int64(t // item)]
    units = 64
    cubes = -(-size // units)
    return cl_run(engine, source, "strided_copy",
                  [base, np.int64(offset), dst, np.int64(0), np.int64(size), *dims],
                  cubes * units, local=units, out=2)


@pytest.mark.parametrize("itemsize", [1, 2, 4, 8])
def test_copies_a_transposed_sliced_view(opencl_engine, itemsize, rng):
    base = rng.integers(0, 2 ** (8 * min(itemsize, 4)) - 1, size=(7, 9, 11), dtype=np.uint64).astype(_WORDS[itemsize])
    view = base[1:6, ::2, 3:].transpose(2, 0, 1)
    out = _run(opencl_engine, view, base, view.shape)
    np.testing.assert_array_equal(out, np.ascontiguousarray(view))


def test_one_dimensional_and_size_not_a_multiple_of_64(opencl_engine, rng):
    base = rng.integers(0, 1 << 30, size=301, dtype=np.uint32)
    view = base[5::3]
    out = _run(opencl_engine, view, base, view.shape)
    np.testing.assert_array_equal(out, view)


def test_opencl_8_byte_words_avoid_long_long():
    d = OpenCLDialect(DeviceInfo("opencl", "x", 1, 65536, 256, 32))
    assert "long long" not in strided_copy_source(d, 2, 8)
    cuda = dialect_for(nominal_cuda_device())
    assert "unsigned long long* src" in strided_copy_source(cuda, 2, 8)
    # One (n, s, t) triple per dimension.
    assert strided_copy_source(cuda, 3, 4).count("i64 n") == 3
