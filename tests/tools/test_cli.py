"""tools/cli.py: the command set, the problem the shared options describe, `source` printing exactly
what `gemm_engine.source` renders (its config line on stderr), and one-line error reports.
(Each command run end to end: tests/test_cli.py.)"""
from __future__ import annotations


from gemm_engine.dtypes import FLOAT16, INT8, INT32
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout
from gemm_engine.tools import cli
from gemm_engine.tools.source import source as render_source


def _commands():
    p = cli.parser()
    sub = next(a for a in p._actions if a.dest == "command")
    return set(sub.choices)


def test_the_command_set():
    assert _commands() == {"info", "run", "explain", "source", "bench", "tune", "warmup"}


def test_problem_options():
    args = cli.parser().parse_args(["source", "--m", "33", "--n", "17", "--k", "8", "--batch", "2", "--dtype",
                                    "float16", "--layouts", "col,row"])
    p = cli._problem(args)
    assert (p.batch, p.m, p.n, p.k) == (2, 33, 17, 8) and p.lhs == FLOAT16
    assert (p.lhs_layout, p.rhs_layout) == (Layout.COL, Layout.ROW) and cli._layouts_text(args) == "col,row"
    i8 = cli._problem(cli.parser().parse_args(["source", "--dtype", "int8"]))
    assert i8.lhs == INT8 and i8.out == INT32


def test_source_prints_what_gemm_engine_source_renders(capsys):
    argv = ["source", "--arch", "sm_80", "--algorithm", "simple_unit", "--m", "64", "--n", "48", "--k", "32"]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert out == render_source("simple_unit", m=64, n=48, k=32, arch="sm_80")
    assert err.startswith("// simple_unit: ")


def test_errors_are_one_line_with_status_2(capsys):
    assert cli.main(["source", "--arch", "sm_80", "--algorithm", "no_such_algorithm"]) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("gemm-engine source: ") and "no_such_algorithm" in err


def test_one_line():
    assert cli._one_line(ValueError("a\n   b")) == "a b"
    assert cli._one_line(ValueError()) == "ValueError"
    internal = cli._one_line(SetupError("x", "broke", internal=True))
    assert internal.startswith("x: broke (a component raised instead of refusing")
