"""Stage events and the listeners that turn them into code.

The stage level, while it renders its (unrolled) sequence of tile executions, asks its listener
for code at each event and splices the answer in. Events are therefore resolved at render time:
a listener that returns "" for every event costs nothing, and one that returns a global load at
``TileMatmulCompleted(i, n)`` interleaves that load between the i-th and (i+1)-th tile execution.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StageEvent:
    """Base of all stage events."""


@dataclass(frozen=True)
class Begin(StageEvent):
    """Before the first tile of the stage is read."""


@dataclass(frozen=True)
class LhsLoaded(StageEvent):
    """The i-th of n lhs fragment loads (shared memory -> registers) has been issued."""
    i: int
    n: int


@dataclass(frozen=True)
class RhsLoaded(StageEvent):
    """The i-th of n rhs fragment loads has been issued."""
    i: int
    n: int


@dataclass(frozen=True)
class TileMatmulCompleted(StageEvent):
    """The i-th of n tile executions of this stage has been issued."""
    i: int
    n: int


@dataclass(frozen=True)
class Finish(StageEvent):
    """After the last tile execution of the stage."""


class StageEventListener:
    """Returns the code to splice in at an event. The base listener injects nothing."""

    def on_event(self, event: StageEvent) -> str:
        return ""


class RecordingListener(StageEventListener):
    """Records every event it is shown (for tests and debugging); injects nothing by default."""

    def __init__(self):
        self.events: list[StageEvent] = []

    def on_event(self, event: StageEvent) -> str:
        self.events.append(event)
        return ""
