"""The splitting and ordering of the overlapped collectives (no torch here: plain integers).

A group of P ranks shards the rows of a matrix into P blocks (uneven sizes allowed); the
overlapped strategies walk a ring (rank r sends to r + 1 and receives from r - 1):

* all-gather + GEMM (`gather_steps`): at step s rank r multiplies block (r - s) mod P, which it
  holds (its own at step 0: the GEMM starts at once), while it forwards that block to r + 1 and
  receives block (r - s - 1) mod P from r - 1 for the next step;
* GEMM + reduce-scatter (`scatter_steps`): at step s rank r computes its partial product of block
  (r - s - 1) mod P (first the block of the rank P - 1 hops ahead, last its own), adds the partial
  sum of that block received from r - 1 and, but at the last step, sends the sum on to r + 1: after
  P - 1 hops every block has gathered every rank's partial at its owner.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Blocks:
    """Row blocks of a matrix sharded over a group: block i has ``sizes[i]`` rows from ``starts[i]``."""
    sizes: tuple[int, ...]

    @property
    def starts(self) -> tuple[int, ...]:
        out, at = [], 0
        for s in self.sizes:
            out.append(at)
            at += s
        return tuple(out)

    @property
    def total(self) -> int:
        return sum(self.sizes)

    @property
    def even(self) -> bool:
        return len(set(self.sizes)) <= 1

    def rows(self, block: int) -> slice:
        start = self.starts[block]
        return slice(start, start + self.sizes[block])


def blocks_of(sizes, world: int, label: str = "shard_sizes") -> Blocks:
    """``sizes`` (one non-negative int per rank) checked against the group's size."""
    sizes = tuple(sizes)
    if len(sizes) != world:
        raise ValueError(f"{label}: expected one size per rank of the group ({world}), got {len(sizes)}: {sizes}")
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise ValueError(f"{label}: sizes must be non-negative ints, got {sizes}")
    return Blocks(sizes)


def even_blocks(total: int, world: int, label: str) -> Blocks:
    """``total`` rows in ``world`` equal blocks; ValueError naming ``label`` where they do not divide."""
    if total % world:
        raise ValueError(f"{label}: {total} rows do not split evenly over {world} ranks; pass shard_sizes "
                         f"(one size per rank) for uneven blocks")
    return Blocks((total // world,) * world)


@dataclass(frozen=True)
class Step:
    """One step of a ring: multiply ``block``; send ``send`` (a block) to ``to`` and receive block
    ``receive`` from ``source`` (None: no transfer at this step)."""
    block: int
    send: int | None
    receive: int | None
    to: int
    source: int


def gather_steps(rank: int, world: int) -> list[Step]:
    """The all-gather ring's steps for ``rank`` (module docstring): P steps, P - 1 transfers."""
    to, source = (rank + 1) % world, (rank - 1) % world
    steps = []
    for s in range(world):
        last = s == world - 1
        steps.append(Step(block=(rank - s) % world, send=None if last else (rank - s) % world,
                          receive=None if last else (rank - s - 1) % world, to=to, source=source))
    return steps


def scatter_steps(rank: int, world: int) -> list[Step]:
    """The reduce-scatter ring's steps for ``rank``: at step s the partial sum of ``block`` (received
    at the step before, none at step 0) plus this rank's product is sent on, but at the last step
    (``block`` == rank: the result). ``receive`` names the block whose partial sum arrives for the
    next step."""
    to, source = (rank + 1) % world, (rank - 1) % world
    steps = []
    for s in range(world):
        last = s == world - 1
        block = (rank - s - 1) % world
        steps.append(Step(block=block, send=None if last else block,
                          receive=None if last else (rank - s - 2) % world, to=to, source=source))
    return steps
