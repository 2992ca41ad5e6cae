"""Events and the listeners that turn them into code: one protocol for every level.

A stage, while it renders its (unrolled) sequence of tile executions, asks its listener for code
at each stage event and splices the answer in; a global level asks the same listener at the two
global events (`KernelStart`, at the top of its body; `BeforeStore`, before the writer stores the
accumulators). Events are resolved at render time: a listener that returns "" for every event
costs nothing, and one that returns a global load at ``TileMatmulCompleted(i, n)`` interleaves
that load between the i-th and (i+1)-th tile execution.

``TileMatmulCompleted(i, n)`` means the same in every stage: the i-th of the n tile matmuls (one
``TileMatmul.execute`` each: one register outer product, one ``mma.sync``, one ``wgmma``) that the
stage issues per call has been issued.

A global level has its own listener (double buffering spreads its loads through one) and an
algorithm may add the user's (`Algorithm.listener`): `ChainedListener` asks both, the global's
first, and splices their code in that order.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StageEvent:
    """Base of all events."""


@dataclass(frozen=True)
class KernelStart(StageEvent):
    """At the top of the global level's body, before anything of the cube's tile is computed."""


@dataclass(frozen=True)
class Begin(StageEvent):
    """Before the first tile of the stage is read."""


@dataclass(frozen=True)
class LhsLoaded(StageEvent):
    """The i-th of n lhs fragment loads (shared memory -> registers) has been issued. Where the
    stage carries fragments (`CARRIED_FRAGMENTS`), the first k tile's loads (i < loads per k tile)
    are those of the *next* ring slot, issued in this slot's last k tile after the handover; in a
    run's last step they fire without a load (there is no next slot)."""
    i: int
    n: int


@dataclass(frozen=True)
class RhsLoaded(StageEvent):
    """The i-th of n rhs fragment loads has been issued (as `LhsLoaded` where fragments are carried)."""
    i: int
    n: int


@dataclass(frozen=True)
class TileMatmulCompleted(StageEvent):
    """The i-th of the n tile matmuls the stage issues per call has been issued."""
    i: int
    n: int


@dataclass(frozen=True)
class Finish(StageEvent):
    """After the last tile execution of the stage."""


@dataclass(frozen=True)
class BeforeStore(StageEvent):
    """The accumulators are final; the writer stores them next."""


class StageEventListener:
    """Returns the code to splice in at an event. The base listener injects nothing."""

    def on_event(self, event: StageEvent) -> str:
        return ""


class ChainedListener(StageEventListener):
    """Several listeners as one: each is asked in order and their code spliced in that order."""

    def __init__(self, *listeners: StageEventListener):
        self.listeners = listeners

    def on_event(self, event: StageEvent) -> str:
        return "\n".join(code for code in (lst.on_event(event) for lst in self.listeners) if code)


class RecordingListener(StageEventListener):
    """Records every event it is shown (for tests and debugging); injects nothing by default."""

    def __init__(self):
        self.events: list[StageEvent] = []

    def on_event(self, event: StageEvent) -> str:
        self.events.append(event)
        return ""
