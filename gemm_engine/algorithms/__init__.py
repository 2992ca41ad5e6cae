"""The algorithm family. Importing this package registers every built-in algorithm by name."""
from .base import REGISTRY, Algorithm, KernelConfig, register, resolve
from .double_buffering import DoubleBufferingAlgorithm  # noqa: F401  (registers "double_buffering")
from .simple import SimpleAlgorithm, UnitSelection
from .accelerated import PlaneSelection, SimpleMmaAlgorithm

__all__ = ["Algorithm", "KernelConfig", "PlaneSelection", "REGISTRY", "SimpleAlgorithm", "SimpleMmaAlgorithm",
           "UnitSelection", "register", "resolve"]
