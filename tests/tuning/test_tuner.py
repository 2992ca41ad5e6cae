"""tuning/tuner.py: the Tuner on PoCL with its contenders narrowed (monkeypatched `candidates`): the
fastest correct one wins, a wrong one is never kept, a failing one is reported, and nothing to
time is a SetupError; Trial / TuneResult text and cache entries."""
from __future__ import annotations

import pytest

from gemm_engine.algorithms.base import REGISTRY
from gemm_engine.algorithms.simple import SimpleUnitAlgorithm
from gemm_engine.dtypes import FLOAT32
from gemm_engine.errors import SetupError
from gemm_engine.problem import MatmulProblem
from gemm_engine.tuning import tuner
from gemm_engine.tuning.tuner import TuneResult, Trial, Tuner, describe

PROBLEM = MatmulProblem(1, 48, 40, 24, FLOAT32, FLOAT32, FLOAT32)


class _Wrong(SimpleUnitAlgorithm):
    """Writes the product plus one: wrong, and made fast (its timing is forced the lowest)."""
    name = "wrong_test"

    def render(self, cfg, dialect):
        return super().render(cfg, dialect).replace("= acc[", "= 1.0f + acc[")


class _Failing(SimpleUnitAlgorithm):
    name = "failing_test"

    def launches(self, cfg, problem):
        raise RuntimeError("cannot launch")


def _tuner(opencl_engine, algs, monkeypatch, times=None):
    monkeypatch.setattr(tuner, "candidates", lambda problem, dialect, exhaustive=False: (algs, {"other": "no"}))
    if times is not None:
        monkeypatch.setattr(tuner, "device_time", lambda rt, run, repeat=10, warmup=2: (run(), times.pop(0))[1])
    e = opencl_engine
    return Tuner(e.planner, e.launcher, e.choose, repeat=1, warmup=0, progress=False)


def test_the_fastest_correct_candidate_wins(opencl_engine, monkeypatch):
    a, b = SimpleUnitAlgorithm().with_selection({"tile_m": 2}), SimpleUnitAlgorithm().with_selection({"tile_m": 4})
    assert a.selection != b.selection
    # rough then full time for each: b is faster.
    result = _tuner(opencl_engine, [a, b], monkeypatch, times=[3e-3, 3e-3, 1e-3, 1e-3]).run(PROBLEM)
    assert result.best.algorithm == "simple_unit" and result.best.selection == b.selection
    assert result.best.seconds == 1e-3 and len(result.trials) == 2 and result.refused == (("other", "no"),)
    entry = result.entry()
    assert (entry.algorithm, entry.selection, entry.seconds) == ("simple_unit", b.selection, 1e-3)


def test_a_wrong_candidate_is_never_kept(opencl_engine, monkeypatch):
    right, wrong = SimpleUnitAlgorithm(), _Wrong()
    result = _tuner(opencl_engine, [right, wrong], monkeypatch, times=[2e-3, 2e-3, 1e-4, 1e-4]).run(PROBLEM)
    assert result.best.algorithm == "simple_unit"
    [bad] = [t for t in result.trials if t.algorithm == "wrong_test"]
    assert "wrong result" in bad.note


def test_a_failing_candidate_is_reported_and_the_others_run(opencl_engine, monkeypatch):
    result = _tuner(opencl_engine, [_Failing(), SimpleUnitAlgorithm()], monkeypatch).run(PROBLEM)
    [failed] = [t for t in result.trials if t.algorithm == "failing_test"]
    assert failed.seconds is None and "cannot launch" in failed.note
    assert result.best.algorithm == "simple_unit"


def test_nothing_to_time_is_a_setup_error(opencl_engine, monkeypatch):
    monkeypatch.setattr(tuner, "candidates", lambda problem, dialect, exhaustive=False: ([], {"x": "refused"}))
    e = opencl_engine
    with pytest.raises(SetupError, match="no candidate sets up for this problem: x: refused"):
        Tuner(e.planner, e.launcher, e.choose, progress=False).run(PROBLEM)


def test_texts():
    sel = REGISTRY["simple_unit"].selection_class(tile_m=2)
    assert describe(sel) == "tile_m=2" and describe({"a": 1}) == "{'a': 1}"
    t = Trial("simple_unit", sel, 1.5e-3)
    assert "1.5000 ms" in str(t) and "tile_m=2" in str(t)
    assert str(Trial("x", sel, None, "refused: no")).endswith("(refused: no)")
    r = TuneResult("k", PROBLEM, t, (t, Trial("y", sel, None, "failed")), (("z", "why"),))
    text = str(r)
    assert text.startswith("tuned k\nbest: ") and "z" in text and "refused: why" in text
    assert text.index("simple_unit", 20) < text.index("  y")          # timed trials first
