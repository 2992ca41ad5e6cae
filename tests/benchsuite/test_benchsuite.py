"""The benchmark suite (gemm_engine/benchsuite): its rows, one smoke run on OpenCL (PoCL in CI) with
every row checked or skipped with a reason, the reports, and the command line."""
from __future__ import annotations

import argparse
import json
import sys
from types import SimpleNamespace

import pytest
from conftest import get_engine

from gemm_engine.tools.benchsuite import (SUITES, Row, add_arguments, markdown, plot, rows_for, run_from_args, run_suite,
                                    table, to_json)
from gemm_engine.tools.benchsuite.baselines import Baseline, NumpyMatmul, baselines_for
from gemm_engine.tools.benchsuite.runner import device_info, run_row
from gemm_engine.errors import SetupError


# -- rows ----------------------------------------------------------------------------------------
def test_full_suite_has_every_problem_in_every_dtype():
    full = SUITES["full"]
    assert len(full) == 16 * 4 and len({r.key for r in full}) == len(full)
    assert {r.label for r in full} == {"float32", "tf32", "float16", "bfloat16"}
    tf32 = [r for r in full if r.label == "tf32"]
    assert all(r.dtype == "float32" and r.precision == "tf32" for r in tf32)
    fused = [r for r in full if r.fused]
    assert {r.name for r in fused} == {"fused 8192x8192x64", "fused 4096^3"} and all(r.group == "fused" for r in fused)
    llm = next(r for r in full if r.name == "8192x4096x11008")
    assert (llm.batch, llm.m, llm.n, llm.k, llm.flops) == (1, 8192, 4096, 11008, 2.0 * 8192 * 4096 * 11008)
    assert next(r for r in full if r.name == "256x128^3").batch == 256


def test_rows_for_filters():
    assert {r.label for r in rows_for("quick")} == {"float32", "float16", "bfloat16"}
    bf16 = rows_for("full", dtypes="bf16,tf32")
    assert {r.label for r in bf16} == {"bfloat16", "tf32"} and len(bf16) == 32
    skinny = rows_for("full", dtypes=["float16"], groups="skinny")
    assert [r.name for r in skinny] == ["1x8192x8192", "16x8192x8192", "8192x8192x64"]
    assert [r.label for r in rows_for("smoke", names="1x64x64")] == ["float32", "tf32", "float16", "bfloat16"]
    for bad in ({"dtypes": "float8"}, {"groups": "sqare"}, {"names": "7^3"}):
        with pytest.raises(ValueError, match="unknown"):
            rows_for("smoke", **bad)
    with pytest.raises(ValueError, match="suite"):
        rows_for("huge")


def test_baselines_per_backend_say_why_they_cannot_run():
    cuda = SimpleNamespace(backend="cuda")
    assert [b.name for b in baselines_for(cuda)] == ["cupy", "torch", "triton"]
    tf32, fused = SUITES["full"][16], SUITES["full"][15]
    assert tf32.label == "tf32" and fused.fused
    cupy, torch, triton = baselines_for(cuda)
    assert not cupy.available(tf32)[0] and "tf32" in cupy.available(tf32)[1]
    for b in (torch, triton):   # neither is installed here; where they are, the reason is the row's
        ok, why = b.available(fused)
        assert ok or why
    assert [b.name for b in baselines_for(SimpleNamespace(backend="opencl"), "numpy")] == ["numpy"]
    with pytest.raises(ValueError, match="cupy"):
        baselines_for(SimpleNamespace(backend="opencl"), ["cupy"])


# -- a smoke run on OpenCL -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def smoke():
    engine = get_engine("opencl")
    return engine, run_suite(engine, rows_for("smoke"), repeat=1, warmup=0)


def test_smoke_rows_are_checked_or_skipped_with_a_reason(smoke):
    _, results = smoke
    assert [r.row for r in results] == SUITES["smoke"]
    for r in results:
        assert r.failure is None, (r.row.key, r.failure)
        if r.skipped:
            assert r.skipped.strip() and r.engine_s is None
        else:
            assert r.ok, (r.row.key, r.error)
            assert r.engine_s > 0 and r.algorithm and r.tflops > 0
    tf32 = [r for r in results if r.row.label == "tf32"]
    assert tf32 and all(r.skipped and "tf32" in r.skipped for r in tf32)
    assert any(r.algorithm == "skinny" for r in results if r.row.name == "1x64x64")


def test_numpy_baseline_is_timed_and_others_explained(smoke):
    _, results = smoke
    for r in (r for r in results if not r.skipped):
        assert r.baselines["numpy"] > 0 and r.native == "numpy" and r.ratio > 0
        for name, seconds in r.baselines.items():
            assert seconds is not None or r.baseline_notes[name], (r.row.key, name)


def test_reports(smoke, tmp_path):
    engine, results = smoke
    text = table(results)
    for r in results:
        assert r.row.name in text
    assert "skipped: tf32" in text and "numpy ms" in text
    data = to_json(results, device_info(engine), repeat=1, warmup=0, suite="smoke")
    again = json.loads(json.dumps(data, allow_nan=False))
    assert again["backend"] == "opencl" and again["device"] == engine.device.name and again["date"]
    assert again["gemm_engine"] and again["repeat"] == 1 and len(again["rows"]) == len(results)
    row = next(x for x in again["rows"] if x["name"] == "fused 64^3" and x["label"] == "float32")
    assert row["ok"] and row["fused"] and row["baselines_ms"]["numpy"] > 0
    md = markdown(results, "smoke on PoCL")
    assert md.startswith("# smoke on PoCL") and md.count("\n| ") == len(results) + 1


def test_plot_without_matplotlib_says_what_to_install(smoke, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)   # `import matplotlib` raises ImportError
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(RuntimeError, match="needs the matplotlib package"):
        plot(smoke[1], tmp_path / "x.png")


# -- refusals, baseline failures, tuning ---------------------------------------------------------
class _Broken(Baseline):
    name, backend = "broken", "opencl"

    def prepare(self, row, a, b, bias):
        raise MemoryError("out of device memory")


def test_refusal_and_baseline_failure_are_recorded(smoke, monkeypatch):
    engine, _ = smoke
    row = Row("64^3", "square", 1, 64, 64, 64, "float32")
    result = run_row(engine, row, [NumpyMatmul(engine.runtime), _Broken(engine.runtime)], repeat=1, warmup=0)
    assert result.ok and result.baselines["broken"] is None
    assert "MemoryError" in result.baseline_notes["broken"] and result.baselines["numpy"] > 0

    def refuse(*args, **kwargs):
        raise SetupError("tile", "no such tile here")
    monkeypatch.setattr(engine, "matmul", refuse)
    refused = run_row(engine, row, [], repeat=1, warmup=0)
    assert refused.skipped and "no such tile here" in refused.skipped and not refused.ok


def test_tuned_choice_is_timed_like_the_default(smoke, monkeypatch):
    engine, _ = smoke
    calls = []

    def tune(a, b, precision="default"):
        calls.append(precision)
        return SimpleNamespace(best=SimpleNamespace(algorithm="simple_unit", selection=None, seconds=1.0))
    monkeypatch.setattr(engine, "tune", tune, raising=False)
    row = Row("fused 64^3", "fused", 1, 64, 64, 64, "float32", fused=True)
    result = run_row(engine, row, [], repeat=1, warmup=0, tune=True)
    assert calls == ["default"] and result.tuned_algorithm == "simple_unit"
    assert 0 < result.tuned_s < 1.0 and result.tuned_speedup > 0 and result.tune_note is None
    assert "default/tuned" in table([result])


# -- the command line ----------------------------------------------------------------------------
def test_command_writes_files_and_reports_plot_problems(smoke, tmp_path, monkeypatch, capsys):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    out = tmp_path / "r.json"
    args = parser.parse_args(["--suite", "smoke", "--backend", "opencl", "--dtypes", "f32", "--names", "64^3",
                              "--repeat", "1", "--warmup", "0", "--json", str(out), "--md", str(tmp_path / "r.md")])
    assert run_from_args(args) == 0
    assert json.loads(out.read_text())["rows"][0]["ok"]
    assert (tmp_path / "r.md").read_text().startswith("# gemm_engine smoke suite")
    capsys.readouterr()
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    args = parser.parse_args(["--suite", "smoke", "--backend", "opencl", "--dtypes", "tf32",
                              "--plot", str(tmp_path / "p.png")])
    assert run_from_args(args) == 2   # refused before anything is measured
    captured = capsys.readouterr()
    assert "--plot needs the matplotlib package" in captured.err and "rows of the" not in captured.out
    assert run_from_args(parser.parse_args(["--suite", "smoke", "--groups", "nope"])) == 2
    assert "unknown 'nope'" in capsys.readouterr().err
