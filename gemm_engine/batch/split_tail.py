"""Split tail: the persistent TMA batch level's last, partial wave of tiles split along K so that
it fills the device, partial sums added across cubes.

A persistent kernel over T output tiles on G cubes takes ceil(T / G) tile times; where G does not
divide T the last wave leaves multiprocessors idle. Block-scaled fp8 4096 x 7168 x 16384: 1232
tiles of 192 x 128 on 132 multiprocessors, 9.33 waves, the last only 44 tiles. Split three ways
along K, those 44 tiles make 132 parts: the last wave takes a third of a tile time.

The schedule, which every warp role of a cube walks alike (the producer loads exactly the slices
its consumers compute): tiles ``c``, ``c + G``, ... whole while they fill whole waves (the
dispatch order's first ``T - tail``); then, where cube c < ``tail * parts``, part ``c / tail`` of
tail tile ``c % tail``: K slices ``[p * slices / parts, (p + 1) * slices / parts)``, ``parts =
min(split_tail, G / tail, slices)`` (1: the tail runs whole, as without the split). Parts of one
tile run on ``tail`` cubes apart, all in the same last round, so every cube's last part is as long
as the others' and the parts of a round read the operands in step (a cube c reads the K slices
that cubes c +- tail read at the same time), as whole tiles do.

Why not stream-K (Osama et al., PPoPP 2023: every cube an equal, contiguous run of the last
tiles' K slices, tiles split wherever the runs end)? Built and measured on the H100, it was slower
on every shape (bench/results/h100/kernel_durations.md, notes; bf16 4096^3 213-256 us against
174): runs that start anywhere in a tile's K put the cubes out of step, and the operand
reads L2 served once for a whole wave go to memory once per cube.

Fixup. Part 0 of a tail tile is its *owner*: after its slices it waits for the flag of each cube
holding a later part (`SplitTailScope.contributors`: the cubes ``tail``, ``2 tail``, ... above
it), adds that cube's partial sums, clears the flag and stores the tile through the writer. A
later part (``k_lo > 0``: `SplitTailScope.contributes`) is a *contributor*: it stores its sums
into its cube's partial slot and sets its cube's flag. Owners wait only for parts of their own round, which wait for nothing, so
the kernel cannot deadlock while all its cubes can be resident at once: the persistent grid is one
cube per multiprocessor. Where fewer multiprocessors are available for good (an MPS limit on the
active threads, a green context) or for a while (a kernel beside it), a plain launch would start
the cubes that fit, and the owners, whose cube ids come first, could hold every one of them and
wait for the others for ever. A last-arriver fixup (each part takes a ticket; the last adds,
waiting only for parts that took theirs first) removes that: it was built and measured, and ran
slower (block-scaled 4096 x 7168 x 16384 1036 us against 892, the 3-consumer kernel spilling in
its K loop; bench/results/h100/kernel_durations.md, notes). So the kernel is
launched cooperatively (`Launch.co_resident`, cuLaunchCooperativeKernel): the driver starts its
cubes only all at once (behind a kernel beside it, it waits for the room), and fails a grid that
can never be resident instead of letting owners wait for cubes that never start. Kernel times
unchanged on the H100 (bench/results/h100/kernel_durations.md, notes); the
failure itself is not tried there (no MPS limit or green context).

The workspace (`workspace_words`: a flag word per cube, then a partial tile per cube) is *kept*:
the runtime zero-fills it once per stream (per thread, for the per-thread default stream) and hands
the same buffer to every such kernel on that stream (`Runtime.kept_scratch`); each owner clears the flags it consumed, so every kernel leaves it
zero. Kernels on one stream run in order, so they never share it at once.
"""
from __future__ import annotations

from dataclasses import dataclass

#: Flag words per cube, padded so the partial slots start 256-byte aligned.
_FLAG_PAD = 64


def flag_words(cubes: int) -> int:
    return -(-cubes // _FLAG_PAD) * _FLAG_PAD


def workspace_words(cubes: int, partial_words: int) -> int:
    """32-bit words of the kept workspace for a grid of ``cubes``, each partial tile
    ``partial_words`` long."""
    return flag_words(cubes) + cubes * partial_words


@dataclass(frozen=True)
class SplitTailScope:
    """What a global level reads of the split-tail schedule around its body (`CubeScope.split_tail`):
    the unit at hand is slices ``k_lo`` .. ``k_hi`` (the names `unit_loop` declares) of the tile's
    ``slices`` (the count the global level passed to ``tiles``); it contributes where
    `contributes` and owns a split tile where `owns_split` (else it owns a whole tile)."""

    #: Words of a cube's partial slot (the stage's `partial_words`).
    partial_words: int
    #: The int variables holding the unit's first slice and the slice after its last.
    k_lo: str = "k_lo"
    k_hi: str = "k_hi"

    @property
    def k_range(self) -> tuple[str, str]:
        """(first slice, slice after the last) of the unit at hand."""
        return self.k_lo, self.k_hi

    @property
    def contributes(self) -> str:
        """Condition: the unit is a later part of its tile (it stores its sums for the owner)."""
        return f"{self.k_lo} > 0"

    def owns_split(self, slices: str) -> str:
        """Condition, where not `contributes`: the unit is part 0 of a split tile (it adds the later
        parts' sums); ``slices``: the tile's slice count."""
        return f"{self.k_hi} < {slices}"

    def partial(self, cube: str) -> str:
        """Pointer (32-bit words) to cube ``cube``'s partial slot."""
        return (f"(kept_scratch + ((CUBE_COUNT + {_FLAG_PAD - 1}) & ~(i64){_FLAG_PAD - 1}) "
                f"+ ({cube}) * {self.partial_words}ll)")

    @staticmethod
    def flag(cube: str) -> str:
        """Pointer to cube ``cube``'s flag word."""
        return f"(kept_scratch + ({cube}))"

    @staticmethod
    def counter() -> str:
        """Pointer to the ticket counter of the tail tile at hand (the last-arriver fixup: a part's
        cube is ``tail tile + part * split_tail``, so the tile is CUBE_ID % split_tail)."""
        return "(kept_scratch + (int)CUBE_ID % split_tail)"

    @staticmethod
    def parts(body: str) -> str:
        """``body`` once per cube ``split_cube`` holding a part of the tail tile at hand, in part
        order (the last-arriver fixup's additions)."""
        return _tile_cubes("(int)CUBE_ID % split_tail", body)

    @staticmethod
    def contributors(body: str) -> str:
        """``body`` once per cube ``split_cube`` holding a later part of the tile at hand (its
        owner's), in part order."""
        return _tile_cubes("(int)CUBE_ID + split_tail", body)


def _tile_cubes(first: str, body: str) -> str:
    """``body`` once per cube ``split_cube`` of the tail tile at hand from ``first`` (its part order)."""
    return (f"for (int split_cube = {first}; split_cube < split_tail * split_parts; split_cube += split_tail) "
            f"{{\n{body}\n}}")


def unit_loop(scope: SplitTailScope, slices: str, origin: list[str], body: str, max_parts: int) -> str:
    """This cube's units (``cube``: the tile's index in the dispatch order, ``scope.k_lo`` /
    ``scope.k_hi``: its slices), with ``origin`` (the tile's coordinates and pointers from ``cube``)
    and ``body`` inside each; ``slices``: the K slices of a tile (an expression); ``max_parts``:
    the most parts a tail tile is split into. Two copies of the body, the whole tiles' loop and the tail's part,
    so that the loop keeps no more registers than without the split (the 3-consumer kernel's
    consumers have 24 beside their accumulators)."""
    return "\n".join([
        "const i64 split_all = batch * cubes_m * cubes_n;",
        "const int split_tail = (int)(split_all % CUBE_COUNT);",
        "const i64 split_whole = split_all - split_tail;       // tiles in whole waves",
        "for (i64 cube = CUBE_ID; cube < split_whole; cube += CUBE_COUNT) {",
        # Whole tiles: the body's owner and contributor branches are dead here (k_lo = 0, k_hi =
        # slices), but must compile, so split_parts exists in this copy too.
        f"const int {scope.k_lo} = 0, {scope.k_hi} = {slices}, split_parts = 1;",
        *origin, body, "}",
        "{",
        "int split_parts = split_tail == 0 ? 1 : (int)CUBE_COUNT / split_tail;",
        f"split_parts = split_parts < {max_parts} ? split_parts : {max_parts};",
        f"split_parts = split_parts < ({slices}) ? split_parts : ({slices});",
        # Part CUBE_ID / tail of tail tile CUBE_ID % tail: the cube's last unit. A loop that runs
        # once at most (tail x parts <= CUBE_COUNT): ptxas serialized every wgmma of the kernel
        # (C7515) with a plain if here.
        "for (i64 split_u = CUBE_ID; split_u < (i64)split_tail * split_parts; split_u += CUBE_COUNT) {",
        "const int split_part = (int)split_u / split_tail;",
        "const i64 cube = split_whole + (int)split_u % split_tail;",
        f"const int {scope.k_lo} = split_part * ({slices}) / split_parts;",
        f"const int {scope.k_hi} = (split_part + 1) * ({slices}) / split_parts;",
        *origin, body, "}", "}"])
