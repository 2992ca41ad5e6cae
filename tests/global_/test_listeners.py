"""global_/listeners.py: the double-buffering listener spreads the next slice's tasks over the gaps
between tile executions (as early as rounding allows, none after the last, every task exactly once
whatever the stage reports), and the ordered listener answers Begin with its register loads."""
from __future__ import annotations

import pytest

from gemm_engine.global_.listeners import DoubleBufferingListener, OrderedListener
from gemm_engine.stage.events import Begin, BeforeStore, Finish, KernelStart, TileMatmulCompleted


def _run(listener, n, events=None):
    """The code after each event of a stage that issues ``n`` tile executions, then Finish."""
    events = events if events is not None else [TileMatmulCompleted(i, n) for i in range(n)]
    return [listener.on_event(e) for e in events + [Finish()]]


@pytest.mark.parametrize("tasks, n", [(4, 5), (8, 5), (3, 9), (1, 2), (7, 3), (5, 1), (0, 4)])
def test_every_task_once_in_order_and_none_after_the_last_execution(tasks, n):
    names = [f"t{i};" for i in range(tasks)]
    out = _run(DoubleBufferingListener(names), n)
    emitted = [line for code in out for line in code.split("\n") if line]
    assert emitted == names
    if n > 1:
        assert out[n - 1] == "" and out[-1] == ""          # after the last execution: nothing left
    # As early as possible: after execution i, ceil((i + 1) * T / (n - 1)) tasks.
    done = 0
    for i in range(n):
        done += len([x for x in out[i].split("\n") if x])
        assert done == min(tasks, -(-(i + 1) * tasks // max(n - 1, 1)))


def test_fewer_events_than_expected_are_flushed_at_finish():
    names = [f"t{i};" for i in range(6)]
    listener = DoubleBufferingListener(names)
    first = listener.on_event(TileMatmulCompleted(0, 4))
    assert first == "t0;\nt1;"
    assert listener.on_event(Finish()) == "\n".join(names[2:])
    assert listener.on_event(Finish()) == ""


def test_other_events_inject_nothing():
    listener = DoubleBufferingListener(["x;"])
    assert [listener.on_event(e) for e in (Begin(), KernelStart(), BeforeStore())] == ["", "", ""]


def test_ordered_listener_loads_at_begin():
    listener = OrderedListener(["t0;", "t1;"], begin="load_lhs();")
    assert listener.on_event(Begin()) == "load_lhs();"
    assert _run(listener, 3) == ["t0;", "t1;", "", ""]
    assert OrderedListener(["a;"]).on_event(Begin()) == ""
