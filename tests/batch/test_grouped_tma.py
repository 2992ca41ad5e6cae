"""batch/grouped_tma.py (rendered for the nominal sm_90 device): the grouped TMA level's setup --
contiguous, masked and k layouts (list refused), K = 0 and host-planned tile loops refused by name -- its grid
(persistent, never more than the tile bound), its signature (maps, then the groups) and its kernel
walking the groups."""
from __future__ import annotations

import dataclasses

import pytest

from gemm_engine.algorithms.base import REGISTRY
from gemm_engine.batch.group_walk import EXTENT_FUNCTION, tile_bound
from gemm_engine.batch.grouped_tma import GroupedTmaBatchMatmul
from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.errors import SetupError
from gemm_engine.problem import Groups, Layout, MatmulProblem

SM90 = dialect_for(nominal_cuda_device())
BF16 = BY_NAME["bfloat16"]
ALG = REGISTRY["grouped_specialized_wgmma"]


def _p(layout="contiguous", groups=8, m=1024, k=512):
    return MatmulProblem(groups, m, 256, k, BF16, BF16, BF16, Layout.ROW, Layout.ROW, 8, 8, groups=Groups(layout))


def test_grouped_tilings_keep_out_of_the_dense_only_rules():
    """Short K's ping-pong and the 192 x 192 wave tile were measured on dense products: a weight
    gradient's groups (short K each: the "k" layout's ragged reduction needs one copy of the
    consumers) and the other layouts keep the cooperative tiles."""
    for layout, m, k in (("k", 2048, 64 * 128), ("contiguous", 4096, 256), ("masked", 3000, 3000)):
        p = MatmulProblem(64, m, 1408, k, BF16, BF16, BF16, Layout.COL if layout == "k" else Layout.ROW, Layout.ROW,
                          8, 8, groups=Groups(layout))
        cfg = ALG().setup(p, SM90)
        g = cfg.batch.global_
        assert g.schedule == "cooperative" and g.stage.stage_n != 192, layout


@pytest.mark.parametrize("layout", ["contiguous", "masked", "k"])
def test_grid_signature_and_kernel(layout):
    alg = ALG()
    problem = _p(layout)
    cfg = alg.setup(problem, SM90)
    assert isinstance(alg.chosen(cfg).build(), GroupedTmaBatchMatmul)
    stage = cfg.batch.global_.stage
    assert alg.cube_count(cfg, problem) == max(1, min(tile_bound(problem, stage.stage_m, stage.stage_n),
                                                      SM90.device.compute_units))
    names = alg.signature(cfg).names
    # the "k" layout's maps per group live in the kept scratch, after the groups
    tail = ("groups_base", "groups_offset") + (("kept_scratch",) if layout == "k" else ())
    assert names[-len(tail):] == tail and "rhs_map" in names
    source = alg.render(cfg, SM90)
    assert f"{EXTENT_FUNCTION}(" in source and "ptx_tma_load_" in source


def test_other_layouts_and_k_zero_are_refused():
    with pytest.raises(SetupError, match="list"):
        ALG().setup(_p("list"), SM90)
    with pytest.raises(SetupError, match="K = 0"):
        GroupedTmaBatchMatmul(ALG().build().global_).setup(_p(k=0), ALG().selection_for(_p(), SM90), SM90)


def test_dense_problems_are_refused():
    dense = dataclasses.replace(_p(), groups=None)
    with pytest.raises(SetupError, match="grouped"):
        ALG().setup(dense, SM90)


def test_every_line_of_a_group_tile_is_read(monkeypatch):
    """A group's rows start anywhere in the lhs map, so its copies read all of a tile's lines even
    where the groups' rows (the problem's M bound) are fewer (global_/read/tma_loader.py
    ``read_lines``); a loader that would read fewer is refused by the grouped level."""
    problem = _p(m=40, k=512)
    problem = dataclasses.replace(problem, rhs_layout=Layout.COL)      # a K-major rhs too
    g = ALG().setup(problem, SM90).batch.global_
    assert g.lhs_loader.read_lines == g.rhs_loader.read_lines == 0
    from gemm_engine.global_.read import tma_loader
    setup = tma_loader.TmaLoader.setup
    monkeypatch.setattr(tma_loader.TmaLoader, "setup",
                        lambda self, *a, **kw: dataclasses.replace(setup(self, *a, **kw), read_lines=8))
    with pytest.raises(SetupError, match="reads only some lines"):
        ALG().setup(problem, SM90)
