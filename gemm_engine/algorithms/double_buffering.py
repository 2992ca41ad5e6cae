"""Double buffering: two shared-memory stages; the next K slice's loads are spread between the
current slice's tile executions through the stage event listener.

``double_buffering_unit``: register tiles, unit stage (every backend and dtype). Its largest stages
(f64, 64 x 64 x 16) need 2 x 17 KiB of shared memory, inside the 48 KiB static limit.
``double_buffering_mma``: mma.sync tiles on a plane-partitioned stage (CUDA sm_80+, f16 / bf16,
f32 with tf32 opted in).
The ``double_buffering`` family (families.py) takes the pipelined rings first where they set up.
"""
from __future__ import annotations

from ..global_.double_buffering import DoubleBufferingGlobalMatmul
from .accelerated import SimpleMmaAlgorithm
from .base import register
from .simple import SimpleUnitAlgorithm


@register
class DoubleBufferingUnitAlgorithm(SimpleUnitAlgorithm):
    name = "double_buffering_unit"
    global_ = DoubleBufferingGlobalMatmul


@register
class DoubleBufferingMmaAlgorithm(SimpleMmaAlgorithm):
    name = "double_buffering_mma"
    global_ = DoubleBufferingGlobalMatmul
