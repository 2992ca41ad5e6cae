"""Shared by the tests of the dequantizing pass (tests/batch/test_dequantize_first.py,
test_dequantize_transposed.py): the weights, the cases that exercise every code, group, layout and
ragged edge, and a run that skips only the compositions not meant for this backend."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.errors import SetupError

NAMES = ("dequantized_simple_unit", "dequantized_pipelined_mma", "dequantized_pipelined_wgmma",
         "dequantized_specialized_wgmma")


def weight(rng, k, n):
    """Rows scaled differently (so a wrong group's scale shows)."""
    return rng.standard_normal((k, n)) * rng.uniform(0.05, 20.0, size=(k, 1))


def run_or_skip(engine, x, q, name, **kw):
    try:
        return engine.quantized_matmul(x, q, algorithm=name, **kw)
    except SetupError as exc:
        cc = engine.device.compute_capability or (0, 0)
        meant = name == "dequantized_simple_unit" or (
            engine.backend == "cuda" and x.dtype != np.float32 and
            cc >= ((9, 0) if "wgmma" in name else (8, 0)))
        if meant:
            raise
        pytest.skip(f"{name} does not run here: {exc.reason}")


#: (format, symmetric, group, K, N, layout, dtype): K past the last word / group, odd N, per column.
CASES = [
    ("int4", False, 32, 100, 37, "k_packed", "bfloat16"),
    ("int4", True, 64, 131, 70, "prepacked", "float16"),
    ("int4", False, None, 77, 65, "prepacked", "bfloat16"),
    ("int4", True, 128, 256, 40, "k_packed", "float32"),
    ("int8", False, 32, 130, 24, "prepacked", "bfloat16"),
    ("int8", True, None, 66, 17, "k_packed", "float16"),
    ("fp8_e4m3", True, 32, 72, 41, "prepacked", "bfloat16"),
    ("fp8_e4m3", True, None, 64, 30, "k_packed", "float32"),
    # every group size of each code with and without zeros; K past the last group; K < a word; N = 1
    ("int4", False, 128, 300, 65, "k_packed", "float16"),
    ("int4", True, 32, 5, 1, "prepacked", "bfloat16"),
    ("int4", False, 64, 64, 129, "prepacked", "float32"),
    ("int8", False, 128, 260, 33, "k_packed", "float32"),
    ("int8", True, 64, 129, 64, "prepacked", "bfloat16"),
    ("fp8_e4m3", True, 128, 200, 19, "k_packed", "float16"),
    ("fp8_e4m3", True, None, 3, 70, "prepacked", "bfloat16"),
    # groups that end inside a unit's run of word rows: a scale per word
    ("int4", False, 48, 100, 37, "prepacked", "float16"),
    ("int8", True, 8, 70, 20, "k_packed", "bfloat16"),
    # groups of one word inside a two-word piece, the piece's second word wholly past K (its scale
    # row would be past the scales); several cubes along K and N (cubes of 64 word rows)
    ("int8", False, 4, 68, 20, "prepacked", "float16"),
    ("fp8_e4m3", True, 32, 520, 130, "k_packed", "bfloat16"),
    ("int8", False, 32, 300, 66, "prepacked", "float32"),
]


#: Every case through the portable kernel and the Hopper prefill path; the other two dense kernels
#: read the same copy (one pass kernel for all four), so they take the first eight (CUDA compile time).
FULL = ("dequantized_simple_unit", "dequantized_specialized_wgmma")
