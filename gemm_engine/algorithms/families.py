"""The card's family names as algorithms: ``simple``, ``double_buffering``, ``specialized`` and
``ordered``, each an `AlgorithmFamily` whose members (best first, with their conditions) are
selector/families.py's table. `SimpleAlgorithm` and `DoubleBufferingAlgorithm` keep their names;
the ``specialized`` and ``ordered`` families are new classes, their register members keeping the
old class names (specialized.py, ordered.py)."""
from __future__ import annotations

from ..selector.families import FAMILIES
from .accelerated import SimpleMmaAlgorithm
from .base import register
from .dmma import PipelinedDmmaAlgorithm, SimpleDmmaAlgorithm
from .double_buffering import DoubleBufferingMmaAlgorithm, DoubleBufferingUnitAlgorithm
from .family import AlgorithmFamily
from .ordered import OrderedUnitAlgorithm
from .pipelined import PipelinedMmaAlgorithm
from .simple import SimpleUnitAlgorithm
from .specialized import SpecializedUnitAlgorithm
from .specialized_wgmma import SpecializedWgmmaAlgorithm
from .wgmma import PipelinedWgmmaAlgorithm

_BUILT_IN = {cls.name: cls for cls in (
    SimpleMmaAlgorithm, SimpleDmmaAlgorithm, SimpleUnitAlgorithm, PipelinedWgmmaAlgorithm, PipelinedMmaAlgorithm,
    PipelinedDmmaAlgorithm, DoubleBufferingMmaAlgorithm, DoubleBufferingUnitAlgorithm, SpecializedWgmmaAlgorithm,
    SpecializedUnitAlgorithm, OrderedUnitAlgorithm)}


def members_of(family: str) -> tuple[tuple, tuple]:
    """(member classes, their rules) of a card family, best first."""
    rules = FAMILIES[family]
    return tuple(_BUILT_IN[r.algorithm] for r in rules), rules


@register
class SimpleAlgorithm(AlgorithmFamily):
    name = "simple"
    variants, member_rules = members_of("simple")


@register
class DoubleBufferingAlgorithm(AlgorithmFamily):
    name = "double_buffering"
    variants, member_rules = members_of("double_buffering")


@register
class SpecializedFamily(AlgorithmFamily):
    name = "specialized"
    variants, member_rules = members_of("specialized")


@register
class OrderedFamily(AlgorithmFamily):
    name = "ordered"
    variants, member_rules = members_of("ordered")
