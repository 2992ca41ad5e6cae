"""Contracts between components, as data: what each provides and what it needs from its neighbours.

An algorithm fills named *slots* (``tile``, ``stage``, ``global_``, ``lhs_loader``, ``rhs_loader``,
``writer``, ``batch``, ``dispatch``, ``listener``) with component classes. Each component class
declares

* ``provides``: the `Capability` values it offers (a plane-scoped tile; a loader that writes
  k-major shared memory; a global matmul that leaves a shared-memory ring free for the writer...);
* ``requires``: `Requirement` values, each naming a neighbour's slot and the capabilities of
  which that neighbour must offer one;
* ``uses`` (global and batch levels): the slots it composes at all.

`check_composition` compares the two before anything is set up: a mismatch raises `SetupError`
naming both components and the missing capability in a user's words, and so does a component put
in a slot that nothing uses (it would be silently ignored). The capabilities themselves are
defined beside the level that offers them (tile/base.py, stage/base.py, global_/base.py).

Static declarations cannot say everything: what depends on the problem and device (a dtype, a
tile shape, the shared memory a ring needs) stays in each component's ``setup``, which raises
`SetupError` too. Together they make every composition right or refused.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..errors import SetupError

#: Slot names, in the order components are composed (and their knobs listed).
SLOTS = ("tile", "stage", "lhs_loader", "rhs_loader", "writer", "global_", "listener", "batch", "dispatch")


@dataclass(frozen=True)
class Capability:
    """Something a component offers its neighbours; ``meaning`` is the user-facing words."""

    name: str
    meaning: str

    def __str__(self) -> str:
        return self.meaning


@dataclass(frozen=True)
class Requirement:
    """A component's need: the component in ``slot`` must provide one of ``any_of``."""

    slot: str
    any_of: frozenset
    why: str = ""

    @staticmethod
    def of(slot: str, *caps: Capability, why: str = "") -> "Requirement":
        return Requirement(slot, frozenset(caps), why)

    def describe(self) -> str:
        caps = sorted(self.any_of, key=lambda c: c.name)
        return " or ".join(c.meaning for c in caps)


def component_name(cls) -> str:
    if cls is None:
        return "nothing"
    name = getattr(cls, "name", None)
    return f"{cls.__name__} ({name!r})" if isinstance(name, str) and name != cls.__name__ else cls.__name__


def _slot_words(slot: str) -> str:
    return {"global_": "global level", "lhs_loader": "lhs loader", "rhs_loader": "rhs loader"}.get(slot, slot)


def check_composition(slots: Mapping[str, type | None], algorithm: str = "composition") -> None:
    """SetupError unless every filled, used slot's requirements are met by its neighbours, and no
    slot is filled that the composition does not use."""
    for slot, cls in slots.items():
        if cls is not None and not isinstance(cls, type):
            # A user's mistake, not a component's bug: a name or an instance where a class goes.
            hint = (f"; a registered {slot} name goes in the selection, e.g. "
                    f"SimpleUnitAlgorithm({slot}={cls!r})") if slot == "dispatch" and isinstance(cls, str) else ""
            raise SetupError(algorithm, f"the {_slot_words(slot)} slot holds {cls!r} ({type(cls).__name__}), "
                                        f"not a component class{hint}")
    used = {"batch", "dispatch", "listener"}
    batch = slots.get("batch")
    used |= set(getattr(batch, "uses", ("global_",)))
    global_ = slots.get("global_")
    if "global_" in used and global_ is not None:
        used |= set(getattr(global_, "uses", ()))
    stage = slots.get("stage")
    if "stage" in used and stage is not None:
        used |= set(getattr(stage, "uses", ("tile",)))
    for slot, cls in slots.items():
        if cls is not None and slot not in used:
            owner = global_ if slot != "global_" else batch
            raise SetupError(algorithm, f"{component_name(cls)} is in the {_slot_words(slot)} slot, but "
                                        f"{component_name(owner)} uses no {_slot_words(slot)}: it would "
                                        f"be ignored (leave the slot None)")
    for slot in [s for s in SLOTS if s in used] + sorted(used - set(SLOTS)):   # a stable order
        cls = slots.get(slot)
        if cls is None:
            continue
        for req in getattr(cls, "requires", ()):
            other = slots.get(req.slot)
            if other is None or req.slot not in used:
                raise SetupError(algorithm, f"{component_name(cls)} ({_slot_words(slot)}) needs a "
                                            f"{_slot_words(req.slot)} providing {req.describe()}, and "
                                            f"the composition has none")
            offered = frozenset(getattr(other, "provides", ()))
            if not offered & req.any_of:
                has = "; ".join(sorted(c.meaning for c in offered)) or "nothing declared"
                why = f" ({req.why})" if req.why else ""
                raise SetupError(algorithm, f"{component_name(cls)} ({_slot_words(slot)}) needs "
                                            f"{req.describe()} from its {_slot_words(req.slot)}{why}, "
                                            f"which {component_name(other)} does not provide (it "
                                            f"provides: {has})")
