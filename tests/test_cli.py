"""The command line (`gemm-engine` / ``python -m gemm_engine``), driven on OpenCL here."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gemm_engine.tools import cli
from gemm_engine.tuning import CACHE_ENV

from conftest import get_engine

COMMANDS = ("info", "run", "explain", "source", "bench", "tune", "warmup")


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

def usage_error(capsys, argv) -> str:
    """argparse's refusal: exit status 2 and one line naming the option."""
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("argv, words", [
    (["run", "--m", "0"], ("--m", "positive integer")),
    (["run", "--n", "-3"], ("--n", "positive integer")),
    (["run", "--k", "many"], ("--k", "'many'")),
    (["run", "--batch", "0"], ("--batch",)),
    (["run", "--repeat", "0"], ("--repeat",)),
    (["run", "--layouts", "row"], ("--layouts", "row/col")),
    (["source", "--arch", "hopper"], ("--arch", "sm_90")),
    (["tune", "--shapes", "64x0x64"], ("--shapes", "64x0x64")),
    (["tune", "--shapes", "64x64"], ("--shapes",)),
    (["bench", "--warmup", "-1"], ("--warmup", ">= 0")),
    (["bench", "--repeat", "0"], ("--repeat",)),
])
def test_bad_options_are_usage_errors(capsys, argv, words):
    line = usage_error(capsys, argv)
    assert "error: argument" in line and all(w in line for w in words), line


def one_line_error(capsys, argv) -> str:
    code = cli.main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    return err


def test_engine_errors_are_one_line_with_status_2(opencl, capsys, monkeypatch):
    base = ["--backend", "opencl", "--m", "16", "--n", "16", "--k", "16"]
    err = one_line_error(capsys, ["run", *base, "--algorithm", "no_such_algorithm"])
    assert "no_such_algorithm" in err and "registered" in err
    # A composition the device cannot run: refused, naming the component, before any launch.
    err = one_line_error(capsys, ["run", *base, "--algorithm", "pipelined_wgmma"])
    assert err.startswith("gemm-engine run: ") and "wgmma" in err.lower()
    err = one_line_error(capsys, ["explain", *base, "--import", "no_such_module_here"])
    assert "--import no_such_module_here" in err
    # The traceback behind the line, on request.
    monkeypatch.setenv("GEMM_ENGINE_TRACEBACK", "1")
    with pytest.raises(ValueError, match="no_such_algorithm"):
        cli.main(["run", *base, "--algorithm", "no_such_algorithm"])


def test_unavailable_backend_is_one_line(capsys):
    from gemm_engine.errors import BackendUnavailableError
    try:
        get_engine("cuda")
    except pytest.skip.Exception:
        err = one_line_error(capsys, ["run", "--backend", "cuda", "--m", "8", "--n", "8", "--k", "8"])
        assert "CUDA" in err or "cuda" in err
        return
    pytest.skip(f"CUDA is available here: no {BackendUnavailableError.__name__} to report")


def test_interrupt_exits_130(capsys, monkeypatch):
    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "explain", interrupted)
    assert cli.main(["explain"]) == 130
    assert "interrupted" in capsys.readouterr().err


def test_tune_sizes_default_to_the_device():
    from types import SimpleNamespace as NS
    args = NS(m=None, n=77, k=None)
    cpu = NS(runtime=NS(is_cpu=True))
    gpu = NS(runtime=NS(is_cpu=False))
    assert cli._tune_sizes(args, cpu) == (512, 77, 512)
    assert cli._tune_sizes(args, gpu) == (4096, 77, 4096)


def test_tuning_progress_shows_rate_and_time_left(opencl, capsys):
    from gemm_engine.tuning import ProgressBar
    import io
    stream = io.StringIO()
    bar = ProgressBar(file=stream, mininterval=0)
    for done in range(4):
        bar(done, 3, f"candidate {done}")
    text = stream.getvalue()
    assert "tuning" in text and "3/3" in text and ("candidate/s" in text or "s/candidate" in text), text
    assert bar.bar is None      # closed once done


def test_bench_refuses_unwritable_outputs_before_measuring(opencl, capsys, tmp_path, monkeypatch):
    err = one_line_error(capsys, ["bench", "--backend", "opencl", "--json", str(tmp_path / "no" / "r.json")])
    assert "--json" in err and "does not exist" in err
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    err = one_line_error(capsys, ["bench", "--backend", "opencl", "--plot", str(tmp_path / "p.png")])
    assert "matplotlib" in err


def test_bench_suite_defaults_to_the_device(opencl, capsys):
    """On a CPU device the default suite is smoke (quick's 4096^3 rows take minutes there)."""
    if not get_engine("opencl").runtime.is_cpu:
        pytest.skip("the OpenCL device is not a CPU: its default (quick) suite takes minutes")
    code = cli.main(["bench", "--backend", "opencl", "--dtypes", "float32", "--names", "64^3", "--repeat", "1",
                     "--warmup", "0"])
    text = capsys.readouterr().out
    assert code == 0 and "smoke suite" in text


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


def test_warmup_compiles_shapes_and_says_what_it_did(opencl, capsys):
    code, text = out_of(capsys, ["warmup", "--backend", "opencl", "--shapes", "33x17x9,2x20x12x8", "--dtypes",
                                 "float32", "--workers", "2"])
    assert code == 0, text
    assert "float32: warmed up 2 problems: 2 kernels" in text
    code = cli.main(["warmup", "--backend", "opencl", "--model", "llama3-8b", "--shapes", "8x8x8"])
    assert code == 2 and "one of them" in capsys.readouterr().err
