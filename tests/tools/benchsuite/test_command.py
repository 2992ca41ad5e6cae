"""tools/benchsuite/command.py: the suite's options, the output problems found before measuring
(missing folders, matplotlib), filter errors as status 2, and one smoke row on PoCL written as the
JSON and markdown files asked for."""
from __future__ import annotations

import argparse
import importlib.util
import json

import pytest

from gemm_engine.tools.benchsuite.command import _output_problem, add_arguments, run_from_args


def _args(*argv):
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(list(argv))


def test_options_and_defaults():
    args = _args("--suite", "smoke", "--dtypes", "f32", "--repeat", "2")
    assert (args.suite, args.dtypes, args.repeat, args.warmup, args.backend) == ("smoke", ["float32"], 2, 3, "auto")
    with pytest.raises(SystemExit):
        _args("--repeat", "0")


def test_output_problems_before_measuring(tmp_path):
    assert _output_problem(_args("--json", str(tmp_path / "out.json"))) is None
    missing = _output_problem(_args("--md", str(tmp_path / "nope" / "x.md")))
    assert missing.startswith("--md ") and "does not exist" in missing
    if importlib.util.find_spec("matplotlib") is None:
        assert "matplotlib" in _output_problem(_args("--plot", str(tmp_path / "p.png")))


def test_unknown_dtypes_are_status_2(capsys):
    # The one dtype-name parser (tools/cli_types.py) refuses them while the arguments are read.
    with pytest.raises(SystemExit) as info:
        _args("--backend", "opencl", "--suite", "smoke", "--dtypes", "float8")
    assert info.value.code == 2 and "unknown dtype 'float8'" in capsys.readouterr().err


def test_one_row_writes_its_files(capsys, tmp_path, opencl_engine):
    js, md = tmp_path / "r.json", tmp_path / "r.md"
    status = run_from_args(_args("--backend", "opencl", "--suite", "smoke", "--dtypes", "float32", "--groups",
                                 "fused", "--repeat", "1", "--warmup", "0", "--baselines", "numpy",
                                 "--json", str(js), "--md", str(md)))
    assert status == 0
    data = json.loads(js.read_text())
    assert data["suite"] == "smoke" and data["rows"] and all(r["ok"] for r in data["rows"])
    assert md.read_text().startswith("# gemm_engine smoke suite on ")
    assert "row" in capsys.readouterr().out
