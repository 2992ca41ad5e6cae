"""errors.py: the engine's error hierarchy and what a SetupError carries."""
from __future__ import annotations

import pytest

from gemm_engine.errors import BackendUnavailableError, CaptureError, GemmEngineError, SetupError


def test_setup_error_names_component_and_reason():
    err = SetupError("stage 'plane'", "tile_m=3 must divide 64")
    assert str(err) == "stage 'plane': tile_m=3 must divide 64"
    assert err.component == "stage 'plane'" and err.reason == "tile_m=3 must divide 64"
    assert err.internal is False
    assert SetupError("x", "y", internal=True).internal is True


def test_hierarchy_lets_callers_tell_refusals_from_argument_errors():
    # A SetupError is a ValueError (a bad combination of arguments) and one of the engine's own.
    assert issubclass(SetupError, ValueError) and issubclass(SetupError, GemmEngineError)
    assert issubclass(BackendUnavailableError, RuntimeError) and issubclass(BackendUnavailableError, GemmEngineError)
    assert issubclass(CaptureError, RuntimeError) and issubclass(CaptureError, GemmEngineError)
    assert not issubclass(GemmEngineError, ValueError)
    with pytest.raises(GemmEngineError):
        raise CaptureError("capturing")
    with pytest.raises(ValueError):
        raise SetupError("a", "b")
