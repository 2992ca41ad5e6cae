"""Persistent TMA batch level with the K-major pass in front: `TmaPersistentBatchMatmul` whose
operands are first copied, where they must be, into a workspace that TMA and the tile can read.

An operand is copied (batch/k_major.py's copy kernels, then the persistent kernel reads the copy):

* where the tile reads it only K-major and it is not (fp8, int8 and tf32 wgmma have no transpose
  bits): transposed into rows of k;
* where TMA cannot address it (its address, leading dimension or batch stride not a multiple of 16
  bytes: odd extents such as 4093 x 4093 half-precision operands): re-pitched into rows of k padded
  to 16 bytes (transposed too where its source is MN-major, which the tile reads as well).

* with ``copy_ragged`` (the selector's choice where the pass costs less than it saves: selector/
  ragged.py `ragged_copies`), where its rows are not whole 128-byte lines: re-pitched
  to whole lines in its own layout (TMA's boxes of 128-byte rows then each read one line, not two).

Nothing to copy: exactly the persistent level (one kernel, no workspace). The copied operand's
tensor map describes its copy: the workspace region, its pitch a row (K rounded up; M or N for a
copy kept MN-major), a row count times it a batch entry (0 for a broadcast operand, copied once).
"""
from __future__ import annotations

from ..problem import Layout, MatmulProblem
from .k_major import KMajorBatchMatmul, k_pitch
from .tma_persistent import TmaPersistentBatchMatmul, device_address


def tma_addressable(itemsize: int, align: int) -> bool:
    """Whether an operand aligned to ``align`` elements (address, leading dimension and batch stride:
    `MatmulProblem.lhs_align`) meets TMA's 16 bytes."""
    return align * itemsize % 16 == 0


class TmaKMajorBatchMatmul(KMajorBatchMatmul, TmaPersistentBatchMatmul):
    name = "tma_k_major_batch"

    def copies_for(self, problem: MatmulProblem) -> tuple[bool, bool]:
        lhs, rhs = super().copies_for(problem)
        return (lhs or not tma_addressable(problem.lhs.itemsize, problem.lhs_align),
                rhs or not tma_addressable(problem.rhs.itemsize, problem.rhs_align))

    def map_source(self, cfg, values: dict, op: str, itemsize: int) -> tuple[int, int, int]:
        if op not in self._copied(cfg):
            return super().map_source(cfg, values, op, itemsize)
        m, n, k, batch = (int(values[x]) for x in ("M", "N", "K", "batch"))

        def entry(name):      # (elements of a batch entry of the copy, its pitch)
            rows, length = self.copy_shape(cfg, name, m, n, k)
            return rows * k_pitch(length, cfg.pitch_align), k_pitch(length, cfg.pitch_align)
        region = batch * entry("lhs")[0] if op == "rhs" and cfg.lhs_copy else 0
        size, pitch = entry(op)
        stride = size if int(values[f"{op}_batch_stride"]) else 0
        return device_address(values["workspace"], region, itemsize), pitch, stride


def copies_needed(problem: MatmulProblem, k_major: bool) -> tuple[str, ...]:
    """The operands `TmaKMajorBatchMatmul` copies for ``problem`` (``k_major``: its tile reads only
    K-major), for callers deciding before a setup (auto's rules)."""
    out = []
    for op, layout, want, align in (("lhs", problem.lhs_layout, Layout.ROW, problem.lhs_align),
                                    ("rhs", problem.rhs_layout, Layout.COL, problem.rhs_align)):
        element = problem.lhs if op == "lhs" else problem.rhs
        if (k_major and Layout(layout) is not want) or not tma_addressable(element.itemsize, align):
            out.append(op)
    return tuple(out)

