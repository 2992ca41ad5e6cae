"""The split tail's fixups (batch/split_tail.py): the statements after a unit's last slice where a
split tile's parts are added, by its owner (``split_fixup="owner"``) or by the last part to finish
(``"last"``)."""
from __future__ import annotations


def last_arriver_store(stage, st, d, sk, meet: str, rows: str, write: list[str]) -> list[str]:
    """Every part of a split tile stores its sums (``stage.store_partial`` into its cube's slot of
    `SplitTailScope` ``sk``) and takes a ticket on the tile's counter after them (one release: the
    stores, ``meet``, a device fence); the part that takes the last ticket resets the counter and
    adds every part's sums in part order from zero (the same bits whichever part finishes last),
    then ``write``s the tile. Nothing waits on another cube, so any number of cubes may be resident
    at once. ``st``: the stage's config; ``rows``: the tile's rows inside the problem ("" for all)."""
    last = "split_last"
    ticket = ["if (UNIT_ID == 0) {", d.fence_device(),
              f"{last} = {d.ticket(sk.counter())} + 1u == (unsigned)split_parts;",
              f"if ({last}) {{ {d.fence_device()} *(volatile unsigned*){sk.counter()} = 0u; }}", "}"]
    add = stage.add_partial(st, d, sk.partial("split_cube"), rows)
    return ["if (split_parts > 1) {", f"LOCAL int {last};",
            stage.store_partial(st, d, sk.partial("CUBE_ID"), rows), meet, *ticket, meet,
            f"if ({last}) {{", stage.init_accumulators(st, d), sk.parts(add), *write, "}",
            "} else {", *write, "}"]


def split_store(stage, st, d, sk, meet: str, rows: str, write: list[str], fixup: str) -> list[str]:
    """A split tile's end: with ``fixup="owner"`` a later part stores its sums for the tile's owner
    (every consumer unit's stores, ``meet``, then one release: what the owner acquires), who adds
    them first and ``write``s the tile; with ``"last"``, `last_arriver_store`."""
    if fixup == "last":
        return last_arriver_store(stage, st, d, sk, meet, rows, write)
    contribute = [stage.store_partial(st, d, sk.partial("CUBE_ID"), rows), meet,
                  f"if (UNIT_ID == 0) {d.flag_release(sk.flag('CUBE_ID'))}"]
    add = [f"if (UNIT_ID == 0) {d.flag_acquire_clear(sk.flag('split_cube'))}", meet,
           stage.add_partial(st, d, sk.partial("split_cube"), rows)]
    return [f"if ({sk.contributes}) {{", *contribute, "} else {",
            f"if ({sk.owns_split('k_steps')}) {{", sk.contributors("\n".join(add)), "}", *write, "}"]
