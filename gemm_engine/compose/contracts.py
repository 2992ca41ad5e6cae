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
in a slot that nothing uses (it would be silently ignored). The capabilities themselves are all in
compose/capabilities.py. A capability may declare an interface (a `Protocol`: the methods its
requirers call, `interface_gaps`) and config fields (`config_gaps`): a component declaring it must
have them, whatever its class, so a user's component stands in for a built-in one.

What one level renders for another is declared as data too: a scope object names the expressions
a component reads and the C names it must define (a dispatch order's `DispatchScope`, the split
tail's `SplitTailScope`), and `check_defines` checks that the rendered code defines them, so a
mismatch is a `SetupError` naming both components, never a compile error.

Static declarations cannot say everything: what depends on the problem and device (a dtype, a
tile shape, the shared memory a ring needs) stays in each component's ``setup``, which raises
`SetupError` too. Together they make every composition right or refused.
"""
from __future__ import annotations

import functools
import inspect
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..errors import SetupError

#: Slot names, in the order components are composed (and their knobs listed).
SLOTS = ("tile", "stage", "lhs_loader", "rhs_loader", "writer", "global_", "listener", "batch", "dispatch")


@dataclass(frozen=True)
class Capability:
    """Something a component offers its neighbours; ``meaning`` is the user-facing words."""

    name: str
    meaning: str
    #: A `Protocol` whose methods every provider must have, callable as its requirers call them.
    interface: type | None = field(default=None, compare=False)
    #: A `Protocol` whose annotated fields every provider's config must have.
    config: type | None = field(default=None, compare=False)

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
            raise SetupError(algorithm, f"the {_slot_words(slot)} slot holds {cls!r} (a {type(cls).__name__}), not "
                                        f"a component class: put the class there (gemm_engine.components lists "
                                        f"the built-in ones by slot)")
    used = {"batch", "dispatch", "listener"}
    batch = slots.get("batch")
    used |= set(getattr(batch, "uses", ("global_",)))
    global_ = slots.get("global_")
    if "global_" in used and global_ is None:
        raise SetupError(algorithm, f"the global level slot is empty, but {component_name(batch)} (batch) runs a "
                                    f"global level in each cube: every composition needs one")
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
            _check_interfaces(algorithm, cls, slot, req.slot, other, offered & req.any_of)


def _check_interfaces(algorithm: str, cls, slot: str, other_slot: str, other, matched: frozenset) -> None:
    """SetupError unless ``other`` has the interface of at least one of the ``matched`` capabilities."""
    gaps = {cap: interface_gaps(other, cap) for cap in sorted(matched, key=lambda c: c.name)}
    if all(gaps.values()):
        cap, missing = next(iter(gaps.items()))
        raise SetupError(algorithm, f"{component_name(cls)} ({_slot_words(slot)}) needs {cap.meaning} from its "
                                    f"{_slot_words(other_slot)}; {component_name(other)} declares it but lacks "
                                    f"its interface ({cap.interface.__name__}): {'; '.join(missing)}")


# -- declared interfaces --------------------------------------------------------------------------
def _interface_members(interface: type) -> list[tuple[str, object]]:
    return [(name, value) for name, value in vars(interface).items()
            if not name.startswith("_") and inspect.isfunction(value)]


def interface_gaps(provider, cap: Capability) -> list[str]:
    """What ``provider`` (a component class or instance) lacks of ``cap``'s interface: each method
    missing, or not callable as the interface says (the arguments without a default by position,
    the others by keyword). Empty where it has all (or ``cap`` declares none)."""
    if cap.interface is None:
        return []
    return list(_class_gaps(provider if isinstance(provider, type) else type(provider), cap))


@functools.lru_cache(maxsize=1024)
def _class_gaps(cls: type, cap: Capability) -> tuple[str, ...]:
    # Once per class and capability: inspect.signature took ~10 ms of a warm first call (70 reads
    # while the candidates set up; bench/results/h100/torch_op.md, first_call).
    gaps = []
    for name, proto in _interface_members(cap.interface):
        static = inspect.getattr_static(cls, name, None)
        member = getattr(cls, name, None)
        if static is None or not callable(member):
            gaps.append(f"no method {name}{_shown(proto)}")
            continue
        params = list(inspect.signature(proto).parameters.values())[1:]      # past self
        positional = [None] * sum(1 for p in params if p.default is p.empty)
        keywords = {p.name: None for p in params if p.default is not p.empty}
        bound_self = [] if isinstance(static, (staticmethod, classmethod)) else [None]
        try:
            inspect.signature(member).bind(*bound_self, *positional, **keywords)
        except TypeError:
            gaps.append(f"{name}{_shown(member, bound_self)} cannot be called as {name}{_shown(proto)}")
        except ValueError:          # no signature to read (a builtin): trusted
            pass
    return tuple(gaps)


def _shown(func, bound_self=(None,)) -> str:
    """``func``'s parameters as a caller sees them (without self and annotations)."""
    sig = inspect.signature(func)
    params = [p.replace(annotation=p.empty) for p in list(sig.parameters.values())[len(bound_self):]]
    return str(sig.replace(parameters=params, return_annotation=sig.empty))


def config_gaps(cfg, cap: Capability) -> list[str]:
    """The fields of ``cap``'s declared config that ``cfg`` lacks (empty where it has all)."""
    if cap.config is None:
        return []
    return [name for name in getattr(cap.config, "__annotations__", {}) if not hasattr(cfg, name)]


def require(consumer: str, slot: str, provider, cap: Capability) -> None:
    """At setup, for a component used without `check_composition` (built by hand): SetupError naming
    ``consumer`` and ``provider`` (the component in ``slot``) unless it declares ``cap`` and has
    its interface."""
    name = component_name(provider if isinstance(provider, type) else type(provider))
    if cap not in frozenset(getattr(provider, "provides", ())):
        raise SetupError(consumer, f"needs {cap.meaning} from its {_slot_words(slot)}, which {name} does not "
                                   f"declare (its provides)")
    missing = interface_gaps(provider, cap)
    if missing:
        raise SetupError(consumer, f"needs {cap.meaning} from its {_slot_words(slot)}; {name} declares it but "
                                   f"lacks its interface ({cap.interface.__name__}): {'; '.join(missing)}")


def require_config(consumer: str, slot: str, provider, cfg, cap: Capability) -> None:
    """SetupError naming ``consumer`` and ``provider`` unless ``cfg`` (the provider's config) has the
    fields ``cap`` declares."""
    missing = config_gaps(cfg, cap)
    if missing:
        name = component_name(provider if isinstance(provider, type) else type(provider))
        raise SetupError(consumer, f"reads {', '.join(missing)} of its {_slot_words(slot)}'s config "
                                   f"({cap.config.__name__}); {name}'s {type(cfg).__name__} has none")


# -- names a component's code must define ---------------------------------------------------------
def declares(code: str, name: str, c_type: str = "i64") -> bool:
    """Whether C ``code`` declares ``name`` as a ``c_type`` variable (``const i64 name = ...;``,
    ``i64 a, name;``...)."""
    return re.search(rf"\b{re.escape(c_type)}\s+(?:[^;{{}}]*?,\s*)?{re.escape(name)}\s*(?:=(?!=)|[;,])",
                     code) is not None


#: A declaration's first name: ``[const] type name`` followed by ``=``, ``;``, ``,`` or ``[``.
_DECLARED = re.compile(r"\b(?:i64|int|unsigned|long|short|char|bool|float|double|size_t)\s+([A-Za-z_]\w*)\s*[=;,\[]")


def check_defines(code: str, names: Iterable[str], provider: str, consumer: str, what: str,
                  helper_prefix: str | None = None, c_type: str = "i64") -> None:
    """SetupError naming ``provider`` (the component whose ``code`` it is) and ``consumer`` (the one
    that reads its names) unless ``code`` declares every one of ``names`` as ``c_type``; with
    ``helper_prefix``, also unless every other name it declares starts with it (so none clashes
    with the consumer's). ``what``: the contract in words, for the message."""
    names = tuple(names)
    missing = [n for n in names if not declares(code, n, c_type)]
    if missing:
        raise SetupError(consumer, f"{provider} does not define {', '.join(missing)}: {what}")
    if helper_prefix is not None:
        foreign = sorted({n for n in _DECLARED.findall(code) if n not in names and not n.startswith(helper_prefix)})
        if foreign:
            raise SetupError(consumer, f"{provider} declares {', '.join(foreign)}: besides {', '.join(names)}, "
                                       f"its names must start with {helper_prefix!r} ({what})")
