"""WeightFormat: what a format accepts, where a row's code sits in a word, and the kernel parameters."""
from __future__ import annotations

import pytest

from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.problem import MatmulProblem
from gemm_engine.dtypes import BFLOAT16
from gemm_engine.quant.format import WeightFormat


@pytest.mark.parametrize("kwargs, words", [
    (dict(kind="int3"), "kind"),
    (dict(kind="int4", group_size=12), "multiple of the 8"),
    (dict(kind="int8", group_size=6), "multiple of the 4"),
    (dict(kind="int4", group_size=-1), "group_size"),
    (dict(kind="fp8_e4m3", zeros=True), "no zero points"),
    (dict(kind="int4", scale="f32"), "scale"),
    (dict(kind="int4", layout="marlin"), "layout"),
])
def test_refused_formats_say_why(kwargs, words):
    with pytest.raises(ValueError, match=words):
        WeightFormat(**kwargs)


def test_codes_per_word_and_implicit_zeros():
    assert (WeightFormat("int4").per_word, WeightFormat("int4").implicit_zero) == (8, 8)
    assert (WeightFormat("int8").per_word, WeightFormat("int8").implicit_zero) == (4, 128)
    assert WeightFormat("fp8_e4m3").per_word == 4


def test_k_packed_is_sequential_and_prepacked_splits_row_pairs():
    seq = WeightFormat("int4")
    assert [seq.shift(j) for j in range(8)] == [0, 4, 8, 12, 16, 20, 24, 28]
    pre = WeightFormat("int4", layout="prepacked")
    # rows 0, 2, 4, 6 in the low half, 1, 3, 5, 7 in the high half: a pair is 16 bits apart
    assert [pre.shift(j) for j in range(8)] == [0, 16, 4, 20, 8, 24, 12, 28]
    assert [WeightFormat("int8", layout="prepacked").shift(j) for j in range(4)] == [0, 16, 8, 24]


def test_groups_and_parameters():
    fmt = WeightFormat("int4", 128, zeros=True, scale="bf16_bits")
    assert fmt.groups(4096) == 32 and fmt.groups(4097) == 33 and WeightFormat("int4").groups(77) == 1
    names = [p.name for p in fmt.params()]
    assert names == ["qscale_base", "qscale_offset", "qscale_ld", "qzero_base", "qzero_offset", "qzero_ld"]
    assert [p.name for p in WeightFormat("int8").params()] == ["qscale_base", "qscale_offset", "qscale_ld"]


def test_the_format_is_part_of_the_problem_key():
    base = dict(batch=1, m=1, n=64, k=64, lhs=BFLOAT16, rhs=BFLOAT16, out=BFLOAT16)
    a = MatmulProblem(**base, weights=WeightFormat("int4", 32))
    b = MatmulProblem(**base, weights=WeightFormat("int4", 64))
    assert a != b and hash(a) != hash(b) and a == MatmulProblem(**base, weights=WeightFormat("int4", 32))
    assert MatmulProblem(**base) != a


def test_pair_bits_put_a_row_pair_in_the_two_halves():
    d = dialect_for(nominal_cuda_device())
    for layout in ("k_packed", "prepacked"):
        fmt = WeightFormat("int4", layout=layout)
        word = 0
        for j in range(8):
            word |= (j + 1) << fmt.shift(j)      # row j holds code j + 1
        for j in range(0, 8, 2):
            expr = fmt.pair_bits(str(word), j).replace("u", "")
            value = eval(expr)
            assert (value & 0xFFFF, value >> 16) == (j + 1, j + 2), (layout, j)
    assert "pack" not in WeightFormat("int4").pair_bits("w", 0) and d is not None
