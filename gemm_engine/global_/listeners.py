"""Stage event listeners the global level hands to its stage matmul.

`DoubleBufferingListener` interleaves the loads of the next K slice with the current stage's tile
executions: it spreads the loader's task blocks over the ``TileMatmulCompleted(i, n)`` events, so
global-memory latency is overlapped with register FMAs instead of being paid in front of them.
"""
from __future__ import annotations

from ..stage.events import Finish, StageEvent, StageEventListener, TileMatmulCompleted


class DoubleBufferingListener(StageEventListener):
    """Splices ``tasks`` (self-contained code blocks) after the stage's tile executions.

    After the i-th of n tile executions the first ``ceil((i + 1) * T / n)`` of the T tasks have
    been emitted: the spread is even and front-loaded (rounding up), so the loads are issued as
    early as possible and the last tile executions have the most latency left to hide. Whatever a
    stage did not give room for (fewer events than expected, or none) is flushed at ``Finish``, so
    every task is emitted exactly once whatever the stage.
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
            return self._emit_until(-(-(event.i + 1) * len(self.tasks) // event.n))
        if isinstance(event, Finish):
            return self._emit_until(len(self.tasks))
        return ""
