"""call/doc.py: one text documents Engine.matmul and gemm_engine.matmul (and grouped_matmul),
with its place filled in, and it names every parameter the functions take."""
from __future__ import annotations

import inspect

import pytest

import gemm_engine
from gemm_engine.call.doc import GROUPED_DOC, MATMUL_DOC, grouped_doc, matmul_doc
from gemm_engine.engine import Engine


def test_decorators_fill_in_where():
    @matmul_doc("somewhere special")
    def f():
        pass

    @grouped_doc("elsewhere")
    def g():
        pass
    assert f.__doc__ == MATMUL_DOC.format(where="somewhere special") and "somewhere special" in f.__doc__
    assert g.__doc__.startswith("One GEMM per group in one launch, elsewhere.")
    assert "{where}" not in f.__doc__ and "{where}" not in g.__doc__


@pytest.mark.parametrize("fn, text", [(Engine.matmul, MATMUL_DOC), (gemm_engine.matmul, MATMUL_DOC),
                                      (Engine.grouped_matmul, GROUPED_DOC), (gemm_engine.grouped_matmul, GROUPED_DOC)])
def test_the_functions_carry_the_text_and_it_names_each_parameter(fn, text):
    head = text.split("{where}")[0]
    assert fn.__doc__.startswith(head)
    for name in inspect.signature(fn).parameters:
        if name in ("self", "kwargs"):
            continue
        assert name in fn.__doc__, f"{fn.__qualname__}: parameter {name!r} is not documented"
