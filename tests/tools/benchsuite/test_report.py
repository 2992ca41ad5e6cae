"""tools/benchsuite/report.py: the text table (aligned columns, skipped and failed rows with their
reason, notes once with their rows), markdown (pipes escaped), the one-line progress and JSON rows
(times in ms, non-finite errors as null), from results built here."""
from __future__ import annotations

import json
import math

from gemm_engine.tools.benchsuite.report import line, markdown, result_dict, table, to_json
from gemm_engine.tools.benchsuite.rows import Row
from gemm_engine.tools.benchsuite.runner import RowResult

A = Row("512^3", "square", 1, 512, 512, 512, "float32")
B = Row("fused 64x64x64", "fused", 1, 64, 64, 64, "float16", fused=True)
C = Row("1000^3", "unaligned", 1, 1000, 1000, 1000, "bfloat16")
RESULTS = [
    RowResult(A, engine_s=2e-3, algorithm="simple_unit", error=1e-6, ok=True, baselines={"numpy": 4e-3},
              baseline_notes={"clblast": "not installed"}),
    RowResult(B, engine_s=1e-4, algorithm="a|b", error=5e-2, ok=False, baselines={"numpy": None},
              baseline_notes={"clblast": "not installed"}),
    RowResult(C, skipped="bfloat16 needs ml_dtypes"),
]


def test_table():
    text = table(RESULTS)
    lines = text.splitlines()
    head = lines[0].split()
    assert head[:6] == ["row", "dtype", "algorithm", "ms", "TFLOP/s", "rel"] and "numpy" in lines[0]
    assert "2" in lines[1] and "simple_unit" in lines[1] and "2" in lines[1].split()[-2]   # ratio 4/2
    assert "FAIL" in lines[2] and lines[3].endswith("skipped: bfloat16 needs ml_dtypes")
    assert "clblast: not installed (2 rows: 512^3 float32, fused 64x64x64 float16)" in text
    assert lines[1].index("simple_unit") == lines[0].index("algorithm")              # aligned


def test_markdown_and_line():
    md = markdown(RESULTS, "Suite")
    assert md.startswith("# Suite\n\n| row |") and "a\\|b" in md
    assert all(row.count(" | ") >= 5 for row in md.splitlines() if row.startswith("| "))
    assert line(RESULTS[0]).startswith("512^3 float32: simple_unit 2 ms") and "numpy 4 ms" in line(RESULTS[0])
    assert line(RESULTS[2]) == "1000^3 bfloat16: skipped: bfloat16 needs ml_dtypes"


def test_json():
    d = result_dict(RowResult(A, engine_s=2e-3, error=math.inf, baselines={"numpy": 4e-3}))
    assert d["engine_ms"] == 2.0 and d["baselines_ms"] == {"numpy": 4.0} and d["rel_error"] is None
    assert d["ratio"] == 2.0 and d["flops"] == A.flops and d["native"] == "numpy"
    data = to_json(RESULTS, {"device": "pocl"}, repeat=3, warmup=1, suite="smoke")
    assert data["device"] == "pocl" and data["suite"] == "smoke" and len(data["rows"]) == 3
    json.dumps(data)                                   # plain JSON data
