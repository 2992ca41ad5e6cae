"""gemm_engine: a multi-level, composable GEMM engine (Tile, Stage, Global, Batch) that renders
CUDA or OpenCL kernels from one description.

    >>> import numpy as np, gemm_engine
    >>> c = gemm_engine.matmul(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))
"""
from . import algorithms, components
from .algorithms import Algorithm, register
from .batch.base import register_dispatch
from .api import default_engine, grouped_matmul, matmul, quantized_matmul
from .compile_ahead import LinearShape, warmup
from .engine import Engine
from .tools.source import source
from .errors import BackendUnavailableError, CaptureError, GemmEngineError, SetupError
from .epilogue.activations import ACTIVATIONS, Activation, register_activation
from .problem import Layout, MatmulProblem
from .quant import QuantizedExperts, QuantizedWeight, WeightFormat, from_awq, from_gptq, quantize

__all__ = ["ACTIVATIONS", "Activation", "Algorithm", "BackendUnavailableError", "CaptureError", "Engine",
           "GemmEngineError", "Layout", "LinearShape", "MatmulProblem", "QuantizedExperts", "QuantizedWeight", "SetupError", "WeightFormat",
           "algorithms", "components", "default_engine", "from_awq", "from_gptq", "grouped_matmul", "matmul",
           "quantize", "quantized_matmul", "register", "register_activation", "register_dispatch", "source", "warmup"]
from .version import __version__  # noqa: E402
