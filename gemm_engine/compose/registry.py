"""Name registries (algorithms, dispatch orders, activations): one rule for all of them.

A taken name is refused unless ``replace=True`` (a subclass that keeps its parent's name, or a
user's activation called "relu", would otherwise silently change what a name means for the whole
process). Every change to any registry, and every swap of a composition class's slot attribute
(algorithms/base.py), advances one process-wide `generation`: engines compare it on each call and
drop what they cached under the old meaning (plans, call plans, resolved names), so a name
re-registered after use is never answered with the code compiled for its old meaning.
"""
from __future__ import annotations

from .contracts import SLOTS

_generation = 0


def generation() -> int:
    """The number of registry changes so far in this process (engines cache per generation)."""
    return _generation


def advance() -> None:
    """Note a change that cached plans may depend on (a registration, a slot swapped)."""
    global _generation
    _generation += 1


class Registry(dict):
    """Name -> registered object, for one kind of thing (``what``: "algorithm", "dispatch order"...).
    A dict, so lookups cost nothing; every change advances the `generation`."""

    def __init__(self, what: str):
        super().__init__()
        self.what = what

    def register(self, name: str, obj, replace: bool = False, hint: str = "give it its own `name`"):
        """Add ``obj`` under ``name``; ValueError when the name is taken by another object, unless
        ``replace``."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"register: a {self.what}'s name must be a non-empty string, got {name!r}")
        taken = self.get(name)
        if taken is not None and taken is not obj and not replace:
            where = f"{getattr(taken, '__module__', '?')}.{getattr(taken, '__qualname__', taken)}"
            raise ValueError(f"register: the {self.what} name {name!r} is taken by {where}; {hint} or pass "
                             f"replace=True")
        self[name] = obj
        return obj

    def __setitem__(self, name, obj):
        super().__setitem__(name, obj)
        advance()

    def __delitem__(self, name):
        super().__delitem__(name)
        advance()

    def pop(self, *args):
        found = super().pop(*args)
        advance()
        return found

    def clear(self):
        super().clear()
        advance()


class Composition(type):
    """The type of algorithm classes: a slot attribute set after the class was made (a component
    swapped on a class already used) advances the `generation`, so engines drop the plans compiled
    for the old composition."""

    def __setattr__(cls, name, value):
        super().__setattr__(name, value)
        if name in SLOTS:
            advance()
