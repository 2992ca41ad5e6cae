"""epilogue/grouped_terms.py: the shapes a grouped call's terms take per layout (every kind, the
ambiguous shapes, the refusals naming the argument) and the strides that read them."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.epilogue.grouped_terms import GroupShape, column_kind, grouped_scale, row_kind, term_strides

CONT = GroupShape("contiguous", 4, 100, 300, 1000)
MASK = GroupShape("masked", 4, 16, 300, 1000)
KLAY = GroupShape("k", 4, 100, 300, 1000)


def f32(*shape):
    return np.ones(shape, np.float32)


@pytest.mark.parametrize("g, dims, per_group", [
    (CONT, (100,), False), (CONT, (100, 1), False), (MASK, (16,), False), (MASK, (4, 16), True),
    (MASK, (4, 16, 1), True), (KLAY, (100,), False), (KLAY, (4, 100), True)])
def test_row_terms(g, dims, per_group):
    assert row_kind("row_scale", dims, g) is per_group


def test_row_terms_refused_name_the_argument():
    with pytest.raises(ValueError, match="row_scale has shape \\(4, 100\\); expected \\(M,\\) = \\(100,\\)$"):
        row_kind("row_scale", (4, 100), CONT)       # contiguous rows are the tokens', not per group
    with pytest.raises(ValueError, match="bias has shape \\(3, 16\\)"):
        row_kind("bias", (3, 16), MASK)


def test_column_terms():
    assert column_kind("bias", (300,), CONT) is False and column_kind("bias", (4, 300), CONT) is True
    assert column_kind("bias", (4, 1, 300), MASK) is True
    with pytest.raises(ValueError, match="bias has shape \\(5, 300\\)"):
        column_kind("bias", (5, 300), CONT)


@pytest.mark.parametrize("g, lhs, dims, kind, per_group", [
    (CONT, True, (100,), "row", False), (CONT, True, (100, 8), "block", False), (CONT, True, (4,), "group", True),
    (MASK, True, (4, 16), "row", True), (MASK, True, (4, 16, 8), "block", True),
    (CONT, False, (300,), "col", False), (CONT, False, (4, 300), "col", True), (CONT, False, (4, 1), "group", True),
    (CONT, False, (4, 8, 3), "block", True), (KLAY, True, (4, 100), "row", True), (KLAY, False, (4,), "group", True),
    (CONT, True, (1,), "tensor", False)])
def test_scale_kinds(g, lhs, dims, kind, per_group):
    scale = grouped_scale(f32(*dims), "scale_a" if lhs else "scale_b", g, lhs)
    assert (scale.kind, scale.per_group) == (kind, per_group)


def test_scales_refused():
    with pytest.raises(ValueError, match="scale_a has shape \\(100, 8\\).*per row \\(100,\\)$"):
        grouped_scale(f32(100, 8), "scale_a", KLAY, True)       # no block scales along a ragged K
    with pytest.raises(TypeError, match="scale_b must hold floating-point values"):
        grouped_scale(np.ones(4, np.int32), "scale_b", CONT, False)
    assert grouped_scale(2.0, "scale_b", CONT, False).number == 2.0


@pytest.mark.parametrize("dims, strides, per_group, expected", [
    ((300,), (1,), False, (1, 0)), ((4, 300), (300, 1), True, (1, 300)), ((4,), (1,), True, (0, 1)),
    ((4, 1), (1, 1), True, (0, 1)), ((100, 8), (8, 1), False, (8, 0)), ((4, 8, 3), (24, 3, 1), True, (3, 24)),
    ((4, 16, 8), (128, 8, 1), True, (8, 128)), ((1, 300), (300, 1), True, (1, 0)), ((300,), (2,), False, (2, 0)),
    ((4, 300), (1, 4), True, (4, 1))])
def test_strides(dims, strides, per_group, expected):
    assert term_strides(dims, strides, per_group) == expected


def test_a_block_scale_with_strided_blocks_must_be_copied():
    assert term_strides((100, 8), (1, 100), False) is None
