"""stage/events.py: events are values, the base listener injects nothing, a chained listener asks
each listener in order and joins their code, a recording listener keeps what it was shown."""
from __future__ import annotations

from gemm_engine.stage.events import (Begin, BeforeStore, ChainedListener, Finish, KernelStart, LhsLoaded,
                                      RecordingListener, StageEventListener, TileMatmulCompleted)


class _Say(StageEventListener):
    def __init__(self, word, only=None):
        self.word, self.only, self.asked = word, only, []

    def on_event(self, event):
        self.asked.append(event)
        return f"{self.word}({type(event).__name__});" if self.only is None or isinstance(event, self.only) else ""


def test_events_compare_by_value():
    assert TileMatmulCompleted(1, 4) == TileMatmulCompleted(1, 4) != TileMatmulCompleted(2, 4)
    assert LhsLoaded(0, 2) != TileMatmulCompleted(0, 2)          # another kind of event
    assert {Begin(), Begin(), Finish()} == {Begin(), Finish()}


def test_base_listener_injects_nothing():
    listener = StageEventListener()
    assert all(listener.on_event(e) == "" for e in (KernelStart(), Begin(), Finish(), BeforeStore()))


def test_chained_listener_asks_in_order_and_skips_empty_code():
    first, second, silent = _Say("a"), _Say("b", only=Finish), _Say("c", only=KernelStart)
    chained = ChainedListener(first, silent, second)
    assert chained.on_event(Finish()) == "a(Finish);\nb(Finish);"
    assert chained.on_event(Begin()) == "a(Begin);"
    assert chained.on_event(KernelStart()) == "a(KernelStart);\nc(KernelStart);"
    assert first.asked == second.asked == silent.asked == [Finish(), Begin(), KernelStart()]
    assert ChainedListener().on_event(Begin()) == ""


def test_recording_listener_records_in_order():
    rec = RecordingListener()
    shown = [KernelStart(), Begin(), TileMatmulCompleted(0, 2), TileMatmulCompleted(1, 2), Finish()]
    assert [rec.on_event(e) for e in shown] == [""] * 5
    assert rec.events == shown
