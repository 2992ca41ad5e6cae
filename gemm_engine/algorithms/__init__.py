"""The algorithm family. Importing this package registers every built-in algorithm by name."""
from .base import REGISTRY, Algorithm, KernelConfig, register, resolve
from .family import AlgorithmFamily
from .simple import SimpleUnitAlgorithm, UnitSelection
from .accelerated import PlaneSelection, SimpleMmaAlgorithm
from .double_buffering import DoubleBufferingMmaAlgorithm, DoubleBufferingUnitAlgorithm
from .wmma import SimpleWmmaAlgorithm, WmmaSelection  # noqa: F401  (registers "simple_wmma")
from .specialized import (SpecializedAlgorithm, SpecializedSelection,  # noqa: F401  (registers "specialized_unit")
                          SpecializedUnitAlgorithm)
from .ordered import OrderedAlgorithm, OrderedUnitAlgorithm  # noqa: F401  ("ordered_unit")
from .pipelined import PipelinedMmaAlgorithm, PipelinedSelection  # noqa: F401  (registers "pipelined_mma")
from .wgmma import PipelinedWgmmaAlgorithm, WgmmaSelection  # noqa: F401  (registers "pipelined_wgmma")
from .specialized_wgmma import SpecializedWgmmaAlgorithm, SpecializedWgmmaSelection  # noqa: F401
from .dmma import (DmmaSelection, PipelinedDmmaAlgorithm, PipelinedDmmaSelection,  # noqa: F401
                   SimpleDmmaAlgorithm)
from .matrix_cores import MatrixCoreSelection  # noqa: F401  (registers the AMD / Intel matrix-core algorithms)
from .direct import DirectSelection, DirectVectorAlgorithm  # noqa: F401  (registers "direct_vector")
from .skinny import SkinnyAlgorithm, SkinnySelection, SkinnySplitKAlgorithm  # noqa: F401
from .split_k import SplitKAlgorithm  # noqa: F401  (registers "split_k" and its members)
from .quantized_decode import QuantizedDecodeAlgorithm, QuantizedDecodeSplitKAlgorithm  # noqa: F401
from .quantized_wgmma import QuantizedWgmmaAlgorithm, QuantizedWgmmaSplitKAlgorithm  # noqa: F401
from .quantized import (QuantizedDoubleBufferingMmaAlgorithm, QuantizedSimpleMmaAlgorithm,  # noqa: F401
                        QuantizedSimpleUnitAlgorithm)
from .dequantized import (DequantizedPipelinedMmaAlgorithm, DequantizedPipelinedWgmmaAlgorithm,  # noqa: F401
                          DequantizedSimpleUnitAlgorithm, DequantizedSpecializedWgmmaAlgorithm)
from .quantized_specialized import QuantizedSpecializedWgmmaAlgorithm  # noqa: F401
from .families import (DoubleBufferingAlgorithm, OrderedFamily, SimpleAlgorithm,  # noqa: F401
                       SpecializedFamily)  # registers "simple", "double_buffering", "specialized", "ordered"
from .auto import AutoAlgorithm  # noqa: F401  (registers "auto")
from .grouped import GroupedFamily, grouped_variant  # noqa: F401  (registers "grouped" and its members)

__all__ = ["Algorithm", "AlgorithmFamily", "AutoAlgorithm", "GroupedFamily", "grouped_variant", "DoubleBufferingAlgorithm", "DoubleBufferingMmaAlgorithm",
           "DoubleBufferingUnitAlgorithm", "KernelConfig", "OrderedAlgorithm", "OrderedFamily",
           "OrderedUnitAlgorithm", "PlaneSelection", "REGISTRY", "SimpleAlgorithm", "SimpleMmaAlgorithm",
           "SimpleUnitAlgorithm", "SpecializedAlgorithm", "SpecializedFamily", "SpecializedUnitAlgorithm",
           "UnitSelection", "register", "resolve"]
