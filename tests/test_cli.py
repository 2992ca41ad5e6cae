"""The command line (`gemm-engine` / ``python -m gemm_engine``), driven on OpenCL here."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gemm_engine import cli
from gemm_engine.tuning import CACHE_ENV

from conftest import get_engine

COMMANDS = ("info", "run", "explain", "source", "bench", "tune")


@pytest.fixture
def opencl(monkeypatch, tmp_path):
    get_engine("opencl")      # skips with the reason where OpenCL is unavailable
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))


def out_of(capsys, argv) -> tuple[int, str]:
    code = cli.main(argv)
    return code, capsys.readouterr().out


@pytest.mark.parametrize("command", (None,) + COMMANDS)
def test_every_command_has_help(capsys, command):
    with pytest.raises(SystemExit) as exc:
        cli.main(([command] if command else []) + ["--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert "usage: gemm-engine" in text
    if command is None:
        assert all(c in text for c in COMMANDS)


def test_module_entry_point_runs():
    proc = subprocess.run([sys.executable, "-m", "gemm_engine", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "tune" in proc.stdout


@pytest.mark.parametrize("extra", [[], ["--layouts", "col,row", "--batch", "3"], ["--dtype", "int8"],
                                   ["--dtype", "float16", "--layouts", "row,col"]])
def test_run_checks_and_times_one_matmul(opencl, capsys, extra):
    code, text = out_of(capsys, ["run", "--backend", "opencl", "--m", "33", "--n", "17", "--k", "65",
                                 "--repeat", "2"] + extra)
    assert code == 0, text
    assert "OK" in text and "from the heuristic" in text and "TFLOP/s" in text


def test_explain_and_source(opencl, capsys):
    code, text = out_of(capsys, ["explain", "--backend", "opencl", "--m", "1", "--n", "300", "--k", "64"])
    assert code == 0 and "chosen     skinny" in text and "refused" in text
    code, text = out_of(capsys, ["source", "--backend", "opencl", "--m", "64", "--n", "64", "--k", "64"])
    assert code == 0 and "__kernel" in text
    # CUDA without a GPU: a nominal device of the arch asked for.
    code, text = out_of(capsys, ["source", "--arch", "sm_90", "--dtype", "float16", "--m", "4096", "--n", "4096",
                                 "--k", "4096"])
    assert code == 0 and "wgmma" in text and "__global__" in text
    code, text = out_of(capsys, ["source", "--arch", "sm_80", "--dtype", "float16", "--algorithm", "simple_mma"])
    assert code == 0 and "mma.sync" in text
    with pytest.raises(SystemExit, match="--arch expects"):
        cli.main(["source", "--arch", "hopper"])
    with pytest.raises(SystemExit, match="--layouts expects"):
        cli.main(["explain", "--backend", "opencl", "--layouts", "row"])


def test_tune_list_run_and_clear(opencl, capsys, tmp_path):
    code, text = out_of(capsys, ["tune", "--backend", "opencl", "--shapes", "24x16x16,2x8x8x8", "--dtype", "float32",
                                 "--quiet", "--repeat", "1"])
    assert code == 0 and text.count("best ") == 2
    code, text = out_of(capsys, ["tune", "--backend", "opencl", "--list"])
    assert code == 0 and "2 entries" in text
    code, text = out_of(capsys, ["run", "--backend", "opencl", "--m", "24", "--n", "16", "--k", "16", "--repeat", "1"])
    assert code == 0 and "from the tuning cache" in text
    code, text = out_of(capsys, ["tune", "--clear"])
    assert code == 0 and not (tmp_path / "cache" / "tuning.json").exists()


def test_bench_writes_its_json(opencl, capsys, tmp_path):
    path = tmp_path / "r.json"
    code, text = out_of(capsys, ["bench", "--backend", "opencl", "--suite", "smoke", "--dtypes", "float32",
                                 "--names", "64^3", "--repeat", "1", "--warmup", "0", "--json", str(path)])
    assert code == 0, text
    data = json.loads(path.read_text())
    assert [r["name"] for r in data["rows"]] == ["64^3"] and data["rows"][0]["ok"]
    assert data["rows"][0]["baselines_ms"]["numpy"] > 0


def test_info_lists_backends_and_caches(opencl, capsys):
    code, text = out_of(capsys, ["info"])
    assert code == 0
    for word in ("opencl:", "cuda:", "tuning cache", "kernel cache", "algorithms"):
        assert word in text
