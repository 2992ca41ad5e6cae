"""Errors raised by gemm_engine.

`SetupError` is raised on the host, before any source is rendered or any kernel launched, when a
component cannot be configured for a problem on a device (too much shared memory, a dtype the
dialect lacks, a tile that does not divide the stage...). Its message says which component refused
and why, so selection can fall back and a caller can read the reason.
"""


class GemmEngineError(Exception):
    """Base class of the engine's own errors: catch it to tell the engine's refusals (`SetupError`,
    `BackendUnavailableError`) from errors of the caller's arguments (ValueError, TypeError)."""


class SetupError(GemmEngineError, ValueError):
    """A component refused a (problem, selection, dialect) combination; `reason` says why.

    ``internal`` is True when the refusal reports an exception a component raised instead of
    refusing (a bug of that component, user-made or not): the engine still never launches it."""

    def __init__(self, component: str, reason: str, internal: bool = False):
        self.component = component
        self.reason = reason
        self.internal = internal
        super().__init__(f"{component}: {reason}")


class BackendUnavailableError(GemmEngineError, RuntimeError):
    """The requested backend (CUDA through CuPy, OpenCL through PyOpenCL) cannot be used here."""


class CaptureError(GemmEngineError, RuntimeError):
    """A kernel would be compiled while the current CUDA stream captures a graph (loading it would
    invalidate the capture): the call must run once, or be warmed up, before capturing; or a plan's
    scratch memory would come from an allocator that cannot give memory to a graph."""
