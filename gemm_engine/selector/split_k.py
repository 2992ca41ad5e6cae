"""The split-K members' tuning spaces: the base algorithm's tiling with the batch level's own split
count (batch/split_k.py: choose_splits) and a few fixed counts around it. Where auto splits K at
all is a rule (rules.py: split_k_worth_it)."""
from __future__ import annotations

from ..compose.selection import preset_values
from .base import distinct

#: The fixed split counts the tuner times beside the batch level's choice.
SPLIT_COUNTS = (4, 16, 64)


def split_k_tuning_space(chosen) -> list:
    """``chosen`` (the base algorithm's preset or selection), then with each of `SPLIT_COUNTS`."""
    first = preset_values(chosen)
    return distinct([first] + [{**first, "split_k": s} for s in SPLIT_COUNTS])
