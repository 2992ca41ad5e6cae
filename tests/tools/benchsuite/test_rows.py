"""tools/benchsuite/rows.py: a row's label, key and flops, the suites' rows (unique keys, every kind in
smoke), and `rows_for`'s filters refusing unknown values by name."""
from __future__ import annotations

import pytest

from gemm_engine.tools.benchsuite.rows import DTYPES, GROUPS, SUITES, Row, rows_for


def test_row_properties():
    r = Row("64x512^3", "batched", 64, 512, 512, 512, "float32", precision="tf32")
    assert r.label == "tf32" and r.key == "64x512^3 tf32" and r.flops == 2.0 * 64 * 512 ** 3
    assert Row("a", "square", 1, 2, 3, 4, "float16").label == "float16"


@pytest.mark.parametrize("suite", list(SUITES))
def test_suite_keys_are_unique_and_known(suite):
    rows = SUITES[suite]
    assert rows and len({r.key for r in rows}) == len(rows)
    assert all(r.group in GROUPS and r.label in DTYPES for r in rows)


def test_smoke_has_every_kind_in_every_dtype():
    rows = SUITES["smoke"]
    for label in {r.label for r in SUITES["full"]}:
        if label == "tf32":
            continue
        mine = [r for r in rows if r.label == label]
        assert any(r.m == 1 for r in mine) and any(r.batch > 1 for r in mine) and any(r.fused for r in mine)


def test_filters():
    rows = rows_for("full", dtypes="float16,tf32", groups=["square"])
    assert rows and {r.label for r in rows} == {"float16", "tf32"} and {r.group for r in rows} == {"square"}
    name = SUITES["quick"][0].name
    assert all(r.name == name for r in rows_for("quick", names=name))
    with pytest.raises(ValueError, match="suite: expected one of"):
        rows_for("huge")
    with pytest.raises(ValueError, match="dtypes: unknown 'float8'"):
        rows_for("full", dtypes="float8")
    with pytest.raises(ValueError, match="groups: unknown"):
        rows_for("full", groups="tiny")
    with pytest.raises(ValueError, match="names in suite 'quick': unknown"):
        rows_for("quick", names="nope^3")
