"""The on-disk source cache: a fresh engine reads what another rendered (no render), torn or foreign
files are rendered again, keys change with anything the source depends on, and configs with parts
from outside the package are never cached."""
from __future__ import annotations

import os

import numpy as np
import pytest

import gemm_engine
from gemm_engine.call import plan as plan_module
from gemm_engine.runtime.source_cache import SourceCache, source_key


def _renders(monkeypatch):
    calls = []
    real = plan_module.render
    monkeypatch.setattr(plan_module, "render", lambda *a: calls.append(a[0].name) or real(*a))
    return calls


def test_a_fresh_engine_reads_the_source_another_rendered(tmp_path, monkeypatch, rng):
    monkeypatch.setenv("GEMM_ENGINE_CACHE_DIR", str(tmp_path))
    calls = _renders(monkeypatch)
    a, b = rng.standard_normal((21, 13), np.float32), rng.standard_normal((13, 11), np.float32)
    first = gemm_engine.Engine("opencl").matmul(a, b, activation="relu")
    assert len(calls) == 1 and len(os.listdir(tmp_path / "sources")) == 1
    second = gemm_engine.Engine("opencl").matmul(a, b, activation="relu")
    assert len(calls) == 1 and np.array_equal(first, second)
    (path,) = (tmp_path / "sources").iterdir()
    path.write_bytes(path.read_bytes()[:-10])               # torn: its hash no longer matches
    gemm_engine.Engine("opencl").matmul(a, b, activation="relu")
    assert len(calls) == 2


def test_the_key_follows_the_config_and_refuses_foreign_parts(opencl_engine):
    problem = opencl_engine.problem_for(np.ones((9, 5), np.float32), np.ones((5, 7), np.float32), activation="relu")
    choice = opencl_engine.choose(problem)
    key = source_key(choice.algorithm, choice.config, opencl_engine.dialect)
    assert key is not None and len(key) == 64
    other = opencl_engine.choose(opencl_engine.problem_for(np.ones((9, 5), np.float32), np.ones((5, 7), np.float32),
                                                           activation="gelu"))
    assert source_key(other.algorithm, other.config, opencl_engine.dialect) != key

    class Mine(type(choice.algorithm)):
        name = "test_mine"
    mine = Mine()
    assert source_key(mine, mine.setup(problem, opencl_engine.dialect), opencl_engine.dialect) is None


def test_switched_off_and_read_only(tmp_path, monkeypatch):
    monkeypatch.setenv("GEMM_ENGINE_SOURCE_CACHE", "0")
    cache = SourceCache(str(tmp_path))
    cache.put("k" * 64, "source")
    assert cache.get("k" * 64) is None and not any(tmp_path.iterdir())
    monkeypatch.delenv("GEMM_ENGINE_SOURCE_CACHE")
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    SourceCache(str(blocked)).put("k" * 64, "source")        # no error: a render per process instead
    assert SourceCache(str(tmp_path)).get(None) is None
