"""Tilings and rules, per family: which kernel ``auto`` takes (rules.py, its conditions in
conditions.py), what the card's family names run (families.py), and each algorithm's tiling for a
problem and device with the alternatives the tuner times (unit.py, mma.py, wgmma.py,
specialized_wgmma.py, dmma.py, skinny.py, split_k.py; shared counting in base.py; waves of tiles,
bytes, intensity and the weight-streaming products in waves.py). The algorithms
import these; nothing here imports the algorithms. The measurements: bench/SELECTION_NOTES.md."""
