"""Stage event listeners the global level hands to its stage matmul.

`DoubleBufferingListener` interleaves the loads of the next K slice with the current stage's tile
executions: it spreads the loader's task blocks over the ``TileMatmulCompleted(i, n)`` events, so
global-memory latency is overlapped with register FMAs instead of being paid in front of them.
`OrderedListener` does the same and also places the ordered matmul's lhs register loads at ``Begin``.
"""
from __future__ import annotations

from ..stage.events import Begin, Finish, StageEvent, StageEventListener, TileMatmulCompleted


class DoubleBufferingListener(StageEventListener):
    """Splices ``tasks`` (self-contained code blocks) after the stage's tile executions.

    The T tasks are spread evenly over the ``n - 1`` gaps *between* tile executions: after the
    i-th execution the first ``ceil((i + 1) * T / (n - 1))`` have been emitted. A load placed after
    the last execution would have no compute of this stage left to hide behind, so it gets nothing
    unless n is 1; rounding up issues loads as early as possible. Whatever a stage did not give room
    for (fewer events than expected, or none) is flushed at ``Finish``, so every task is emitted
    exactly once whatever the stage.
    """

    def __init__(self, tasks: list[str]):
        self.tasks = list(tasks)
        self.emitted = 0

    def _emit_until(self, target: int) -> str:
        target = min(target, len(self.tasks))
        code = self.tasks[self.emitted:target]
        self.emitted = max(self.emitted, target)
        return "\n".join(code)

    def on_event(self, event: StageEvent) -> str:
        if isinstance(event, TileMatmulCompleted):
            gaps = max(event.n - 1, 1)
            return self._emit_until(-(-(event.i + 1) * len(self.tasks) // gaps))
        if isinstance(event, Finish):
            return self._emit_until(len(self.tasks))
        return ""


class OrderedListener(DoubleBufferingListener):
    """A `DoubleBufferingListener` that also answers ``Begin`` with ``begin``: code the stage must
    run before its first tile of the step (the ordered matmul's loads of lhs into registers)."""

    def __init__(self, tasks: list[str], begin: str = ""):
        super().__init__(tasks)
        self.begin = begin

    def on_event(self, event: StageEvent) -> str:
        if isinstance(event, Begin):
            return self.begin
        return super().on_event(event)
