"""The tuning cache's file: what is not a small regular file is ignored, never waited on."""
from __future__ import annotations

import os
import threading

import pytest

from gemm_engine.tuning import cache as cache_module
from gemm_engine.tuning.cache import TuningCache


def _in_time(fn, seconds: float = 5.0):
    """fn() run in a thread; AssertionError if it has not returned within ``seconds`` (a hang)."""
    done = []
    worker = threading.Thread(target=lambda: done.append(fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert done, f"still blocked after {seconds} s"
    return done[0]


@pytest.mark.parametrize("link", [False, True], ids=["fifo", "link to a fifo"])
def test_a_named_pipe_is_ignored_without_blocking(tmp_path, link):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    path = tmp_path / "tuning.json"
    if link:
        path.symlink_to(fifo)
    else:
        os.replace(fifo, path)
    cache = TuningCache(str(path))
    assert _in_time(lambda: cache.keys()) == []
    assert "not a regular file" in cache.status


def test_a_file_past_the_size_cap_is_not_parsed(tmp_path, monkeypatch):
    path = tmp_path / "tuning.json"
    path.write_text("[" + "0," * 2000 + "0]")
    monkeypatch.setattr(cache_module, "MAX_BYTES", 1000)
    cache = TuningCache(str(path))
    assert cache.keys() == [] and "more than the 1000" in cache.status
