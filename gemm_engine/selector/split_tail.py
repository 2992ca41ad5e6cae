"""The split of a last wave along K (batch/split_tail.py) as the Hopper specialized rule takes it:
how many parts a tile of a partial last wave is cut into, and, for long K under half a wave, whether
128 x 256 tiles in more parts beat 128 x 128 tiles (selector/specialized_wgmma.py).
"""
from __future__ import annotations

from ..problem import MatmulProblem
from .base import tile_count

#: The last wave, when at most half full, split along K into at most this many parts, each at least
#: this many ring slots long (a part's partial sums cost a few slots' time to store and add).
SPLIT_MAX, SPLIT_MIN_SLICES = 4, 24
#: Long K (`long_k_wide`): 128 x 256 tiles split into up to LONG_SPLIT_MAX parts of at least
#: LONG_MIN_SLICES slots.
LONG_SPLIT_MAX, LONG_MIN_SLICES = 8, 128


def split_parts(problem: MatmulProblem, sms: int, tiles: int, most: int = SPLIT_MAX,
                min_slices: int = SPLIT_MIN_SLICES) -> int:
    """The parts the rule splits each tile of the last wave into (1: none): at most ``most``, each
    at least ``min_slices`` ring slots long. The kernel takes the fewest of this, its grid over the
    tail and the tile's slices (batch/split_tail.py): the same where the grid is the device's
    multiprocessors, as the persistent grid is."""
    tail = tiles % sms
    slices = -(-problem.k * problem.lhs.itemsize // 128)     # ring slots of 128 bytes of K
    return min(most, sms // tail, slices // min_slices) if tail else 1


def long_k_wide(problem: MatmulProblem, sms: int, tiles: int) -> int:
    """Parts of 128 x 256 tiles (0: keep the ``tiles`` of 128 x 128) for a 16-bit problem from
    SMALL_MAX_K under half a wave of 128 x 256 tiles, where the 64 x 128 tiles do not take it: where
    fewer 128 x 256 tiles in their parts give each part less work than the 128 x 128 tiles' parts
    (both run in one round), or as much in at most SPLIT_MAX parts, the larger tile at its better
    rate (1024^2 x 65536: 4 parts of 128 x 256 182 us, 2 of 128 x 128 190). Not as much in more
    parts: each further part's partial tile is added by its owner (1024 x 512 x 65536 in 8 parts of
    128 x 256 107 us against 4 of 128 x 128's 99.6). A part's work counts padded tiles: 384 columns
    are two 128 x 256 tiles, one half empty (bench/SELECTION_NOTES.md, "Long K in 128 x 256 tiles")."""
    wide = tile_count(problem, 128, 256)
    parts = split_parts(problem, sms, wide, LONG_SPLIT_MAX, LONG_MIN_SLICES)
    narrow = split_parts(problem, sms, tiles)
    # work a part, in 128 x 128 tiles' K: 2 / parts against 1 / narrow
    shorter = 2 * narrow < parts or (2 * narrow == parts and parts <= SPLIT_MAX)
    return parts if wide < tiles and shorter else 0
