"""The tuner and its cache (OpenCL here; the same code runs on CUDA): keys, robustness of the
cache file, that tuned choices are used by later engines and calls, and that a wrong kernel is
never kept."""
from __future__ import annotations

import json
import os
from dataclasses import replace

import numpy as np
import pytest

import gemm_engine
from gemm_engine.algorithms.simple import SimpleUnitAlgorithm, UnitSelection
from gemm_engine.algorithms.skinny import SkinnySelection
from gemm_engine.dtypes import FLOAT16, FLOAT32
from gemm_engine.epilogue.activations import ACTIVATIONS
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.tuning import CACHE_ENV, Entry, TuningCache, anchor, cache_dir, problem_key
from gemm_engine.tuning import tuner as tuner_mod
from gemm_engine.tuning.cache import FORMAT

from conftest import get_engine
from helpers import assert_close, heuristic_unit

#: A tiling the heuristic never picks on PoCL (it takes 4 x 8 on 32 x 64 for big problems, a
#: fitted one for small): a cached choice is recognizable by it.
MARKED = UnitSelection(tile_m=2, tile_n=2, stage_m=16, stage_n=16, stage_k=8, vector_width=1)


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def fresh_engine():
    get_engine("opencl")          # skips with the reason where OpenCL is unavailable
    return gemm_engine.Engine("opencl")


def problem(m=40, n=24, k=32, **kw):
    return MatmulProblem(1, m, n, k, FLOAT32, FLOAT32, FLOAT32, **kw)


# -- keys -------------------------------------------------------------------------------------
def test_anchor_rounds_up_to_two_or_three_times_a_power_of_two():
    assert [anchor(x) for x in (1, 2, 16, 17, 24, 25, 1000, 1024, 4093, 11008, 12289)] == \
        [1, 2, 16, 24, 24, 32, 1024, 1024, 4096, 12288, 16384]


def test_key_pools_sizes_but_keeps_what_changes_the_kernel():
    dev = gemm_engine.codegen.device.nominal_cuda_device()
    base = problem(1000, 1000, 1000)
    assert problem_key(base, dev) == problem_key(problem(1024, 1024, 1024), dev)
    others = [problem(1000, 1000, 1000, lhs_layout=Layout.COL), problem(1000, 1000, 1000, lhs_align=4),
              problem(1000, 1000, 1000, precision="tf32"), problem(1, 1000, 1000),
              MatmulProblem(1, 1000, 1000, 1000, FLOAT16, FLOAT16, FLOAT16),
              replace(base, batch=2)]
    keys = {problem_key(p, dev) for p in others}
    assert problem_key(base, dev) not in keys and len(keys) == len(others)
    assert problem_key(base, dev) != problem_key(base, gemm_engine.codegen.device.nominal_cuda_device(8, 0))
    # The epilogue is not part of the key (the plain product's winner serves fused calls).
    fused = replace(base, epilogue=Epilogue(activation=ACTIVATIONS["relu"]()))
    assert problem_key(fused, dev) == problem_key(base, dev)


# -- the cache file -----------------------------------------------------------------------------
def test_cache_location_follows_the_environment(cache_env):
    assert cache_dir() == str(cache_env)
    assert TuningCache().path == os.path.join(str(cache_env), "tuning.json")


def test_cache_round_trip_is_atomic_and_merges(cache_env):
    one, two = TuningCache(), TuningCache()
    one.put("a", Entry("simple_unit", MARKED, 1e-3, 3))
    two.put("b", Entry("skinny", SkinnySelection(unroll=2), 2e-3))   # wrote after one: keeps "a"
    fresh = TuningCache()
    assert fresh.keys() == ["a", "b"]
    assert fresh.get("a") == Entry("simple_unit", MARKED, 1e-3, 3)
    assert fresh.get("b").selection == SkinnySelection(unroll=2)
    assert fresh.get("missing") is None
    assert sorted(os.listdir(cache_env)) == ["tuning.json", "tuning.json.lock"]   # no temporary file left behind
    one.refresh()                                       # sees two's write (the file changed)
    assert one.keys() == ["a", "b"]


@pytest.mark.parametrize("content, status", [
    ("{not json", "unreadable"),
    (json.dumps([1, 2]), "not a"),
    (json.dumps({"format": "other/9", "entries": {}}), "not a"),
    (json.dumps({"format": FORMAT, "version": "0.0.0-old", "entries": {"a": {}}}), "written by gemm_engine"),
])
def test_bad_cache_files_are_ignored_and_rebuilt(cache_env, content, status):
    os.makedirs(cache_env)
    (cache_env / "tuning.json").write_text(content)
    cache = TuningCache()
    assert cache.get("a") is None
    assert status in cache.status and "ignored" in cache.status
    cache.put("k", Entry("simple_unit", MARKED, 1e-3))
    data = json.loads((cache_env / "tuning.json").read_text())
    assert data["format"] == FORMAT and data["version"] == gemm_engine.__version__
    assert list(data["entries"]) == ["k"]


def test_stale_entries_are_skipped_not_raised(cache_env):
    cache = TuningCache()
    cache.put("good", Entry("simple_unit", MARKED, 1e-3))
    data = json.loads((cache_env / "tuning.json").read_text())
    data["entries"]["gone"] = {"algorithm": "no_longer_registered", "seconds": 1.0,
                               "selection": {"fields": {}}}
    data["entries"]["renamed"] = {"algorithm": "simple_unit", "seconds": 1.0,
                                  "selection": {"class": "gemm_engine.algorithms.simple.UnitSelection",
                                                "fields": {"no_such_field": 1}}}
    data["entries"]["junk"] = {"algorithm": "simple_unit"}
    (cache_env / "tuning.json").write_text(json.dumps(data))
    fresh = TuningCache()
    assert fresh.get("good") is not None
    assert fresh.get("gone") is None and fresh.get("renamed") is None and fresh.get("junk") is None


# -- the engine and the cache ---------------------------------------------------------------------
def store(engine, prob, alg_name, selection):
    engine.tuning_cache.put(problem_key(prob, engine.device), Entry(alg_name, selection, 1e-3))


def test_default_calls_use_the_cached_choice_and_auto_skips_it(cache_env, rng):
    a = rng.standard_normal((40, 32)).astype(np.float32)
    b = rng.standard_normal((32, 24)).astype(np.float32)
    writer = fresh_engine()
    store(writer, writer.problem_for(a, b), "simple_unit", MARKED)
    engine = fresh_engine()                      # another engine (as another process) reads it
    assert_close(engine.matmul(a, b), a, b, "float32")
    assert engine.last_choice[0].selection == MARKED
    assert engine.explain(a, b).source == "tuning cache"
    # Same class, other member: 36 x 20 x 28 anchors to the same sizes, with the same alignment.
    a2, b2 = a[:36, :28].copy(), b[:28, :20].copy()
    assert_close(engine.matmul(a2, b2), a2, b2, "float32")
    assert engine.last_choice[0].selection == MARKED
    engine.matmul(a, b, algorithm="auto")
    assert engine.last_choice[0].selection != MARKED
    off = gemm_engine.Engine("opencl", use_tuning_cache=False)
    off.matmul(a, b)
    assert off.last_choice[0].selection != MARKED


def test_a_cached_choice_that_does_not_set_up_falls_back_to_the_heuristic(cache_env, rng):
    a = rng.standard_normal((40, 32)).astype(np.float32)
    b = rng.standard_normal((32, 24)).astype(np.float32)
    engine = fresh_engine()
    # A skinny selection stored for a non-skinny class (as a hand-edited or odd cache could hold).
    store(engine, engine.problem_for(a, b), "skinny", SkinnySelection(unroll=2))
    assert_close(engine.matmul(a, b), a, b, "float32")
    assert engine.last_choice[0].name == heuristic_unit(engine)
    report = engine.explain(a, b)
    assert report.source == "heuristic" and "does not set up" in str(report)


def test_tune_stores_the_fastest_correct_choice_and_later_calls_use_it(cache_env, rng):
    a = rng.standard_normal((40, 32)).astype(np.float32)
    b = rng.standard_normal((32, 24)).astype(np.float32)
    engine = fresh_engine()
    seen = []
    result = engine.tune(a, b, repeat=1, warmup=0, progress=lambda d, t, label: seen.append((d, t)))
    assert not result.from_cache and seen[-1][0] == seen[-1][1] == len(result.trials)
    timed = [t for t in result.trials if t.seconds is not None and not t.note]
    assert result.best.seconds == min(t.seconds for t in timed)
    assert "refused" in str(result) and result.best.algorithm in str(result)
    assert engine.tuning_cache.get(result.key).selection == result.best.selection
    # A new engine (a new process would read the same file) uses it by default.
    other = fresh_engine()
    assert_close(other.matmul(a, b), a, b, "float32")
    assert (other.last_choice[0].name, other.last_choice[0].selection) == (result.best.algorithm,
                                                                           result.best.selection)
    again = other.tune(a, b, progress=lambda *args: pytest.fail("a cached problem is not re-timed"))
    assert again.from_cache and again.best.selection == result.best.selection


def test_matmul_tune_true_tunes_once_then_uses_the_cache(cache_env, rng, monkeypatch):
    a = rng.standard_normal((17, 9)).astype(np.float32)
    b = rng.standard_normal((9, 5)).astype(np.float32)
    engine = fresh_engine()
    runs = []
    real = tuner_mod.Tuner.run
    monkeypatch.setattr(tuner_mod.Tuner, "run", lambda self, p: runs.append(p) or real(self, p))
    monkeypatch.setattr(tuner_mod.Tuner, "__init__", _quick_init(tuner_mod.Tuner.__init__))
    assert_close(engine.matmul(a, b, tune=True), a, b, "float32")
    assert_close(engine.matmul(a, b, tune=True), a, b, "float32")
    assert len(runs) == 1
    assert engine.tuning_cache.get(problem_key(runs[0], engine.device)) is not None


def _quick_init(init):
    def quick(self, planner, launcher, choose, repeat=10, warmup=2, progress=None, exhaustive=False, seed=0):
        init(self, planner, launcher, choose, repeat=1, warmup=0, progress=False, exhaustive=exhaustive, seed=seed)
    return quick


class _Relu(SimpleUnitAlgorithm):
    """A wrong kernel: it applies relu the caller did not ask for."""

    name = "broken_relu_for_test"

    def setup(self, problem, dialect):
        return super().setup(replace(problem, epilogue=Epilogue(activation=ACTIVATIONS["relu"]())), dialect)


def test_a_wrong_candidate_is_never_kept(cache_env, rng, monkeypatch):
    engine = fresh_engine()
    prob = problem(24, 16, 16)
    good = SimpleUnitAlgorithm(MARKED)
    monkeypatch.setattr(tuner_mod, "candidates", lambda p, d, exhaustive=False: ([_Relu(MARKED), good], {}))
    result = engine.tune(prob, repeat=1, warmup=0, progress=False)
    assert result.best.algorithm == "simple_unit"
    broken = [t for t in result.trials if t.algorithm == _Relu.name]
    assert len(broken) == 1 and broken[0].note.startswith("wrong result")


def test_tune_reports_problems_it_cannot_tune(cache_env):
    engine = fresh_engine()
    with pytest.raises(ValueError, match="no problem to explain or tune"):
        engine.tune(np.ones((0, 3), np.float32), np.ones((3, 2), np.float32))


def test_another_process_uses_the_cached_choice(cache_env, rng):
    import subprocess
    import sys
    a = rng.standard_normal((40, 32)).astype(np.float32)
    b = rng.standard_normal((32, 24)).astype(np.float32)
    writer = fresh_engine()
    store(writer, writer.problem_for(a, b), "simple_unit", MARKED)
    code = ("import numpy as np, gemm_engine\n"
            "e = gemm_engine.Engine('opencl')\n"
            "a = np.ones((40, 32), np.float32); b = np.ones((32, 24), np.float32)\n"
            "assert (e.matmul(a, b) == 32).all()\n"
            "print(repr(e.last_choice[0].selection))\n")
    env = dict(os.environ, **{CACHE_ENV: str(cache_env)})
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == repr(MARKED)


# -- a cache that cannot hurt ---------------------------------------------------------------------------
def test_two_processes_writing_at_once_keep_every_entry(cache_env):
    import subprocess
    import sys
    code = ("import sys; from gemm_engine.tuning import TuningCache, Entry; "
            "from gemm_engine.algorithms.simple import UnitSelection; c = TuningCache(); "
            "[c.put(f'{sys.argv[1]}-{i}', Entry('simple_unit', UnitSelection(), 1e-3)) for i in range(60)]")
    procs = [subprocess.Popen([sys.executable, "-c", code, tag]) for tag in ("p", "q")]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    keys = TuningCache().keys()
    assert len(keys) == 120, len(keys)


@pytest.mark.parametrize("name, entries", [
    ("nested", None),
    ("other algorithm's fields", {"k": {"algorithm": "skinny", "seconds": 1.0,
                                        "selection": {"fields": {"tile_m": 4}}}}),
    ("wrong type", {"k": {"algorithm": "simple_unit", "seconds": 1.0,
                          "selection": {"fields": {"tile_m": "four"}}}}),
    ("a module to import", {"k": {"algorithm": "simple_unit", "seconds": 1.0,
                                  "selection": {"class": "this.Zen", "fields": {}}}}),
    ("junk", {"k": [1, 2], "j": {"algorithm": 5, "seconds": "x", "selection": 3}}),
])
def test_a_hostile_cache_never_breaks_a_call(cache_env, opencl_engine, rng, name, entries):
    import sys
    cache_env.mkdir(parents=True, exist_ok=True)
    path = cache_env / "tuning.json"
    if entries is None:
        path.write_text("[" * 100000 + "]" * 100000)
    else:
        path.write_text(json.dumps({"format": FORMAT, "version": gemm_engine.__version__, "entries": entries}))
    engine = fresh_engine()
    a, b = rng.standard_normal((20, 10)).astype(np.float32), rng.standard_normal((10, 5)).astype(np.float32)
    assert_close(engine.matmul(a, b), a, b, "float32")
    assert "this" not in sys.modules                           # nothing was imported because the file said so
    cache = TuningCache()
    assert all(cache.get(k) is None for k in ("k", "j")) or cache.get("k").algorithm == "simple_unit"
    assert "skipped" in cache.status or "ignored" in cache.status or name == "a module to import"


def test_tuning_with_an_unwritable_cache_folder_warns_once_and_returns_the_product(tmp_path, monkeypatch, rng):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("GEMM_ENGINE_CACHE_DIR", str(blocker / "cache"))   # cannot be created, even by root
    engine = gemm_engine.Engine("opencl")
    a, b = rng.standard_normal((20, 10)).astype(np.float32), rng.standard_normal((10, 5)).astype(np.float32)
    with pytest.warns(RuntimeWarning, match="cannot be written") as caught:
        assert_close(engine.matmul(a, b, tune=True), a, b, "float32")
        c2 = rng.standard_normal((10, 7)).astype(np.float32)
        assert_close(engine.matmul(a, c2, tune=True), a, c2, "float32")     # another class: no second warning
    assert len([w for w in caught if "cannot be written" in str(w.message)]) == 1
    assert len(engine.tuning_cache.keys()) == 2                             # kept in memory
