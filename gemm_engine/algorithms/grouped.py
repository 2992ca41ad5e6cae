"""Grouped algorithms: the dense compositions with their batch slot taken by a grouped level.

A grouped GEMM is not a kernel of its own: ``grouped_<name>`` is the algorithm ``<name>`` (its tile,
stage, loaders, writer and global level) under a batch level that walks groups whose extents it
reads from device memory (batch/grouped.py; the Hopper TMA pipeline's: batch/grouped_tma.py), in
the column-major order inside each group (batch/group_walk.py). Their tiling is the dense rule's for
the batched problem one group looks like (`typical`), less the knobs a grouped level sets itself
(the dispatch order; the TMA level's clusters and split tail), and a persistent grid of two cubes
per compute unit where the global level is reentrant (the walk then reads each group's extent once
per cube, not once per tile).

``grouped`` is the family: the best member that sets up (the TMA pipeline on sm_90a, the wgmma and
cp.async rings, register FMA everywhere else, OpenCL included; for quantized experts the quantized
compositions, chosen by the dense rules' conditions on one group's rows). `grouped_variant` makes the grouped
variant of any algorithm, a user's too.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from ..batch.dispatch import ColMajorDispatch
from ..batch.grouped import GroupedBatchMatmul
from ..batch.grouped_tma import GroupedTmaBatchMatmul
from ..batch.tma_persistent import TmaPersistentBatchMatmul
from ..problem import MatmulProblem
from ..selector.grouped import grouped_decode_tiling, grouped_member_rules, grouped_specialized_tiling
from .base import Algorithm, register
from .family import AlgorithmFamily
from .pipelined import PipelinedMmaAlgorithm
from .quantized import QuantizedDoubleBufferingMmaAlgorithm, QuantizedSimpleUnitAlgorithm
from .quantized_decode import QuantizedDecodeAlgorithm
from .quantized_wgmma import QuantizedWgmmaAlgorithm
from .simple import SimpleUnitAlgorithm
from .specialized_wgmma import SpecializedWgmmaAlgorithm, fit_named_tile
from .wgmma import PipelinedWgmmaAlgorithm

#: Cubes per compute unit of the grouped levels' persistent grid (a reentrant global level).
PERSISTENT = 2
#: Knobs of the dense rules that a grouped level decides itself.
_DROPPED = ("dispatch", "dispatch_width", "cluster_m", "split_tail")


def typical(problem: MatmulProblem) -> MatmulProblem:
    """The dense batched problem one group of ``problem`` looks like, for the dense tiling rules: the
    groups' rows (contiguous) or reduction (k) spread evenly, a masked group's slab, a list's
    largest sizes; each operand aligned as its loaders read it (`MatmulProblem.vector_align`)."""
    layout, groups = problem.groups.layout, max(1, problem.batch)
    # The loaders' widths, not the memory's: the tiling rules pick register-path tiles by them.
    dense = replace(problem, groups=None, lhs_align=problem.vector_align("lhs"), rhs_align=problem.vector_align("rhs"))
    if layout == "contiguous":
        return replace(dense, m=problem.rows_per_group)
    if layout == "k":
        return replace(dense, k=max(1, -(-problem.k // groups)))
    return dense


class GroupedAlgorithm(Algorithm):
    """Mixin of the grouped variants (`grouped_variant`): the dense member's rule on `typical`."""

    dispatch = ColMajorDispatch
    dense_rules = False       # the grouped tilings were measured without the dense-only choices
    narrow_producer = False   # quantized experts: the narrow cubes' producer is measured on dense problems only

    def select(self, problem, dialect):
        like = typical(problem) if problem.groups is not None else problem
        dense = super().select(like, dialect)
        chosen = dict(dense) if isinstance(dense, Mapping) else dense.changed()
        if isinstance(self, SpecializedWgmmaAlgorithm):
            chosen = fit_named_tile(grouped_specialized_tiling(like, dialect, chosen), self.overrides, like, dialect)
        elif isinstance(self, QuantizedDecodeAlgorithm) and problem.groups is not None:
            chosen = grouped_decode_tiling(problem, like)
        chosen = {k: v for k, v in chosen.items() if k not in _DROPPED}
        names = self.selection_class.field_names()
        reentrant = self.components is not None and self.components.global_.reentrant
        if "persistent" in names and reentrant:
            chosen["persistent"] = PERSISTENT
        return chosen

    def tuning_space(self, problem, dialect):
        return [self.select(problem, dialect)]


def grouped_variant(cls: type[Algorithm], name: str | None = None) -> type[Algorithm]:
    """The grouped variant of algorithm class ``cls`` (not registered: `register` it to reach it by
    name): the TMA level where ``cls`` runs the persistent TMA pipeline, else the portable one."""
    batch = GroupedTmaBatchMatmul if issubclass(cls.batch, TmaPersistentBatchMatmul) else GroupedBatchMatmul
    attrs = {"name": name or f"grouped_{cls.name}", "batch": batch, "__module__": __name__,
             "__qualname__": f"Grouped{cls.__name__}", "selection_name": None,
             "__doc__": f"{cls.name} under the grouped batch level ({batch.__name__})."}
    return type(f"Grouped{cls.__name__}", (GroupedAlgorithm, cls), attrs)


GroupedSpecializedWgmmaAlgorithm = register(grouped_variant(SpecializedWgmmaAlgorithm))
GroupedPipelinedWgmmaAlgorithm = register(grouped_variant(PipelinedWgmmaAlgorithm))
GroupedPipelinedMmaAlgorithm = register(grouped_variant(PipelinedMmaAlgorithm))
GroupedSimpleUnitAlgorithm = register(grouped_variant(SimpleUnitAlgorithm))


# Quantized experts (quant/experts.py): the quantized compositions under the portable grouped level,
# which moves the packed words, scales and zeros to each group's expert.
GroupedQuantizedDecodeAlgorithm = register(grouped_variant(QuantizedDecodeAlgorithm))
GroupedQuantizedWgmmaAlgorithm = register(grouped_variant(QuantizedWgmmaAlgorithm))
GroupedQuantizedDoubleBufferingMmaAlgorithm = register(grouped_variant(QuantizedDoubleBufferingMmaAlgorithm))
GroupedQuantizedSimpleUnitAlgorithm = register(grouped_variant(QuantizedSimpleUnitAlgorithm))


@register
class GroupedFamily(AlgorithmFamily):
    """``grouped``: the best grouped member that sets up (the default of `grouped_matmul`): dense
    members refuse quantized experts and the quantized ones dense weights (`check_weights`)."""

    name = "grouped"
    variants = (GroupedSpecializedWgmmaAlgorithm, GroupedPipelinedWgmmaAlgorithm, GroupedPipelinedMmaAlgorithm,
                GroupedSimpleUnitAlgorithm, GroupedQuantizedDecodeAlgorithm, GroupedQuantizedWgmmaAlgorithm,
                GroupedQuantizedDoubleBufferingMmaAlgorithm, GroupedQuantizedSimpleUnitAlgorithm)
    member_rules = grouped_member_rules(typical)
