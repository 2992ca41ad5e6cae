"""Autotuning: time candidate kernels for a problem class, keep the winner in an on-disk cache.

`Engine.tune` / ``matmul(..., tune=True)`` use it; default calls read the cache (engine.py).
key.py says what a problem class is, space.py what is timed, tuner.py how, cache.py where the
winners live.
"""
from .cache import CACHE_ENV, Entry, TuningCache, cache_dir
from .key import anchor, problem_key
from .space import candidate_names, candidates
from .tuner import ProgressBar, Trial, TuneResult, Tuner

__all__ = ["CACHE_ENV", "candidate_names", "Entry", "ProgressBar", "Trial", "TuneResult", "Tuner", "TuningCache",
           "anchor", "cache_dir", "candidates", "problem_key"]
