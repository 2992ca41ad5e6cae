"""Selections: the tunable numbers of a composition, declared once by the components that read them.

Every component class lists its *knobs* (`Knob`: a name, a default, what it means, the values it
takes). An algorithm's selection type is composed from the knobs of the components in its slots
(`compose_selection`): a frozen, keyword-only dataclass with exactly those fields, so a component
reads ``selection.stage_k`` knowing the field exists, and a default is written in one place (the
knob). Swapping a component swaps its knobs: the composed type follows the composition.

Values are checked when a selection is built: a knob's type (``int``, ``bool``, ``str``; never a
``bool`` for an ``int``) and, where it has them, its choices. Whether a value suits a problem and
device (a tile that does not divide a stage, too much shared memory) is the components' setup's
business (`SetupError`).

Heuristics return *presets*: mappings of knob values (`Selection.merged` keeps the fields the
composed type has, so a heuristic written for one composition still serves a composition that
swapped some of its components). A caller's values are *overrides*: they must name fields of the
type (`Selection.override`; an unknown name is a TypeError naming the known ones).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Iterable, Mapping

from ..errors import SetupError


@dataclass(frozen=True)
class Knob:
    """One tunable value a component reads from its selection."""

    name: str
    default: Any
    doc: str
    choices: tuple = ()

    @property
    def type(self) -> type:
        return type(self.default)

    def check(self, value, owner: str) -> None:
        """TypeError / ValueError naming the knob when ``value`` is not one it takes."""
        want = self.type
        if want is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"{owner}.{self.name}: expected an int, got {type(value).__name__} {value!r}")
        if want is not int and not isinstance(value, want):
            raise TypeError(f"{owner}.{self.name}: expected a {want.__name__}, got "
                            f"{type(value).__name__} {value!r}")
        if self.choices and value not in self.choices:
            raise ValueError(f"{owner}.{self.name}: expected one of {self.choices}, got {value!r}")


class Selection:
    """Base of every composed selection type (see `compose_selection`)."""

    knobs: ClassVar[tuple[Knob, ...]] = ()

    def __post_init__(self):
        for knob in self.knobs:
            knob.check(getattr(self, knob.name), type(self).__name__)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(k.name for k in cls.knobs)

    def override(self, **changes) -> "Selection":
        """A copy with ``changes``; a name this selection does not have is a TypeError."""
        unknown = sorted(set(changes) - set(self.field_names()))
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field(s) {unknown}; its fields are "
                            f"{list(self.field_names())}")
        return dataclasses.replace(self, **changes) if changes else self

    def merged(self, preset: Mapping[str, Any] | "Selection") -> "Selection":
        """A copy taking ``preset``'s values for the fields this type has (others are ignored: a
        heuristic's preset may describe components this composition swapped out)."""
        values = preset_values(preset)
        return self.override(**{k: v for k, v in values.items() if k in self.field_names()})

    def values_dict(self) -> dict[str, Any]:
        return {k.name: getattr(self, k.name) for k in self.knobs}

    def changed(self) -> dict[str, Any]:
        """The fields that differ from their knob's default."""
        return {k.name: getattr(self, k.name) for k in self.knobs if getattr(self, k.name) != k.default}

    def describe(self) -> str:
        """``stage_m=128 tile_n=8``: the fields that differ from the defaults."""
        return " ".join(f"{k}={v!r}" for k, v in self.changed().items()) or "defaults"


def preset_values(preset) -> dict[str, Any]:
    """A preset (a mapping of knob values, or a selection) as a plain dict."""
    return preset.values_dict() if isinstance(preset, Selection) else dict(preset)


_COMPOSED: dict[tuple, type[Selection]] = {}


def merge_knobs(owners: Iterable[tuple[str, Iterable[Knob]]]) -> tuple[Knob, ...]:
    """The knobs of several components (``(component name, knobs)``), each name once, in order.
    Two components may share a knob only if they declare it alike (the same default and choices:
    the lhs and rhs loaders of one class, say); otherwise SetupError names both."""
    seen: dict[str, tuple[str, Knob]] = {}
    for owner, knobs in owners:
        for knob in knobs:
            if knob.name in seen:
                first_owner, first = seen[knob.name]
                if (first.default, first.choices, first.type) != (knob.default, knob.choices, knob.type):
                    raise SetupError("composition", f"knob {knob.name!r} is declared by {first_owner} "
                                                    f"(default {first.default!r}) and by {owner} (default "
                                                    f"{knob.default!r}): the two components disagree")
                continue
            seen[knob.name] = (owner, knob)
    return tuple(knob for _, knob in seen.values())


def compose_selection(knobs: tuple[Knob, ...], name: str, module: str,
                      properties: Mapping[str, Any] | None = None) -> type[Selection]:
    """The selection type with these knobs as fields (and ``properties``: read-only values derived
    from them that components declare, e.g. a plane stage's ``stage_m``). Compositions with the
    same knobs share one type (simple and double buffering on register tiles: `UnitSelection`)."""
    properties = dict(properties or {})
    key = (tuple((k.name, k.type, k.default, k.choices) for k in knobs), tuple(properties.items()))
    cls = _COMPOSED.get(key)
    if cls is None:
        fields = [(k.name, k.type, dataclasses.field(default=k.default)) for k in knobs]
        doc = "Knobs: " + "; ".join(f"``{k.name}`` ({k.default!r}): {k.doc}" for k in knobs)
        namespace = {"knobs": knobs, "__doc__": doc, **{n: property(f) for n, f in properties.items()}}
        cls = dataclasses.make_dataclass(name, fields, bases=(Selection,), frozen=True, kw_only=True,
                                         namespace=namespace)
        cls.__module__ = module
        _COMPOSED[key] = cls
    return cls


def name_selection(cls: type[Selection], name: str, module: str) -> None:
    """Give a composed type its public name (``UnitSelection``), importable from ``module`` (its
    generated methods too: their names appear in error messages)."""
    old = cls.__qualname__
    for value in vars(cls).values():
        if callable(value) and getattr(value, "__qualname__", "").startswith(old + "."):
            value.__qualname__ = name + value.__qualname__[len(old):]
    cls.__name__ = cls.__qualname__ = name
    cls.__module__ = module
