"""The command line (`gemm-engine` / ``python -m gemm_engine``), driven on OpenCL here."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gemm_engine.engine import Engine
from gemm_engine.tools import cli
from gemm_engine.tuning import CACHE_ENV

from conftest import get_engine

COMMANDS = ("info", "run", "explain", "source", "bench", "tune", "warmup")


@pytest.fixture
def opencl(monkeypatch, tmp_path):
    engine = get_engine("opencl")      # skips with the reason where OpenCL is unavailable
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    return engine


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
        Engine("cuda")      # available or not here, whatever the tests' backends are
    except (BackendUnavailableError, ImportError):
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
    # One batched shape: each tuned shape compiles every candidate afresh (42 s on 2 cores for two).
    code, text = out_of(capsys, ["tune", "--backend", "opencl", "--shapes", "2x24x16x16", "--dtype", "float32",
                                 "--quiet", "--repeat", "1"])
    assert code == 0 and text.count("best ") == 1
    code, text = out_of(capsys, ["tune", "--backend", "opencl", "--list"])
    assert code == 0 and "1 entry in" in text
    code, text = out_of(capsys, ["run", "--backend", "opencl", "--batch", "2", "--m", "24", "--n", "16", "--k", "16",
                                 "--repeat", "1"])
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


# -- one reading of every option, one line for every mistake (issue 35) ----------------------------
@pytest.mark.parametrize("text, name", [("f16", "float16"), ("fp16", "float16"), ("half", "float16"),
                                        ("bf16", "bfloat16"), ("BF16", "bfloat16"), ("f32", "float32"),
                                        ("f64", "float64"), ("i8", "int8"), ("e4m3", "float8_e4m3fn"),
                                        ("e5m2", "float8_e5m2"), ("float8_e5m2", "float8_e5m2"), ("tf32", "tf32")])
def test_every_command_reads_dtype_names_the_same(text, name):
    from gemm_engine.tools.cli_types import dtype_name
    assert dtype_name(text) == name
    p = cli.parser()
    assert p.parse_args(["run", "--dtype", text]).dtype == name
    assert p.parse_args(["explain", "--dtype", text]).dtype == name
    assert p.parse_args(["source", "--dtype", text]).dtype == name
    assert p.parse_args(["tune", "--dtypes", f"{text},float32"]).dtypes == list(dict.fromkeys([name, "float32"]))
    assert p.parse_args(["bench", "--dtypes", text]).dtypes == [name]
    assert p.parse_args(["warmup", "--dtypes", text]).dtypes == [name]


@pytest.mark.parametrize("argv", [["run", "--dtype", "float128"], ["tune", "--dtypes", "f16,f17"],
                                  ["bench", "--dtypes", "quad"], ["run", "--m", "0"], ["run", "--no-such-option"],
                                  ["no-such-command"], ["source", "--backend", "metal"]])
def test_usage_errors_are_one_line_without_the_usage_block(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and "usage:" not in err, err
    assert err.startswith("gemm-engine") and "error:" in err and "--help" in err


def test_tune_suite_and_shapes_take_the_same_dtype_names(opencl):
    from gemm_engine.tools.benchsuite import rows_for
    args = cli.parser().parse_args(["tune", "--suite", "smoke", "--dtypes", "f16,bf16,tf32"])
    assert {r.label for r in rows_for(args.suite, args.dtypes)} == {"float16", "bfloat16", "tf32"}
    args = cli.parser().parse_args(["tune", "--shapes", "8x8x8", "--dtypes", "bf16,tf32"])
    problem = cli._problem(args, 8, 8, 8, 1, args.dtypes[1])
    assert problem.lhs.name == "float32" and problem.precision == "tf32"
    assert cli._problem(args, 8, 8, 8, 1, args.dtypes[0]).lhs.name == "bfloat16"


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_run_checks_fp8(opencl, capsys, dtype):
    code, text = out_of(capsys, ["run", "--backend", "opencl", "--m", "33", "--n", "17", "--k", "65",
                                 "--repeat", "1", "--dtype", dtype])
    assert code == 0 and "OK" in text and f"dtype={dtype}" in text, text


def test_run_says_when_tf32_is_not_used(opencl, capsys):
    if opencl.dialect.supports("tf32_mma"):
        pytest.skip(f"{opencl.device.name} runs tf32 on tensor cores through OpenCL: nothing to say")
    code, text = out_of(capsys, ["run", "--backend", "opencl", "--m", "33", "--n", "17", "--k", "65",
                                 "--repeat", "1", "--precision", "tf32"])
    assert code == 0 and "precision=tf32" in text
    assert "exact float32" in text and "tf32 tensor cores" in text, text
    code, text = out_of(capsys, ["run", "--backend", "opencl", "--m", "33", "--n", "17", "--k", "65",
                                 "--repeat", "1"])
    assert code == 0 and "note" not in text


def test_tune_draws_no_progress_bar_into_a_log(opencl, capsys):
    """stderr is not a terminal here (pytest captures it): no bar, though --quiet was not given."""
    code = cli.main(["tune", "--backend", "opencl", "--shapes", "8x8x8", "--repeat", "1"])
    captured = capsys.readouterr()
    assert code == 0 and "best " in captured.out
    assert "candidate" not in captured.err and "%|" not in captured.err and "\r" not in captured.err, captured.err
