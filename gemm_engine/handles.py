"""Engines by handle: the number a registered torch op names its engine by (gemm_engine/torch/ops.py).

Every `Engine` takes the next handle when it is made; 0 names the default engine, made on first use
through the factory api.py registers here (so that the torch layer, which the engine reaches by
name only, needs nothing above this module to find an engine).
"""
from __future__ import annotations

import itertools
import weakref

#: Every engine by its handle (weak: an engine no one holds goes away).
ENGINES: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()
_counter = itertools.count(1)
#: The default engine's factory (api.py's `default_engine`).
DEFAULT: list = []


def register(engine) -> int:
    """A new engine's handle."""
    handle = next(_counter)
    ENGINES[handle] = engine
    return handle


def engine_of(handle: int):
    """The engine of ``handle`` (0: the default engine)."""
    return DEFAULT[0]() if handle == 0 else ENGINES[handle]
