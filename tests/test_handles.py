"""handles.py: every engine a fresh handle, weakly held; handle 0 the default engine's factory."""
from __future__ import annotations

import gc

import pytest

import gemm_engine
from gemm_engine import handles


class _Thing:
    pass


def test_register_gives_increasing_distinct_handles_and_finds_them():
    a, b = _Thing(), _Thing()
    ha, hb = handles.register(a), handles.register(b)
    assert hb > ha > 0
    assert handles.engine_of(ha) is a and handles.engine_of(hb) is b


def test_engines_are_held_weakly():
    thing = _Thing()
    h = handles.register(thing)
    del thing
    gc.collect()
    with pytest.raises(KeyError):
        handles.engine_of(h)


def test_handle_zero_calls_the_default_factory(monkeypatch):
    marker = _Thing()
    monkeypatch.setattr(handles, "DEFAULT", [lambda: marker])
    assert handles.engine_of(0) is marker


def test_an_engine_registers_itself(opencl_engine):
    assert handles.engine_of(opencl_engine.handle) is opencl_engine
    assert handles.engine_of(0) is gemm_engine.default_engine()
