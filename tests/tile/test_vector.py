"""tile/vector.py (render only): the vector register tile's refusals (dialect, types, widths, register
budget), its register declarations, one vector FMA per accumulator and k step, and its accumulator
map (every output element of the tile exactly once)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from gemm_engine.algorithms import REGISTRY
from gemm_engine.codegen.device import nominal_cuda_device, nominal_opencl_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem
from gemm_engine.tile.base import SmemTile
from gemm_engine.tile.vector import MAX_ACC_VECTORS, VectorTile

CPU = dialect_for(nominal_opencl_device("cpu"))


def problem(dtype="float32", rhs=None):
    et = BY_NAME[dtype]
    return MatmulProblem(1, 128, 128, 64, et, BY_NAME[rhs or dtype], et, Layout.ROW, Layout.ROW)


def setup(p=None, d=CPU, **sel):
    p = p or problem()
    s = REGISTRY["direct_vector"]().selection_for(p, CPU)
    return VectorTile().setup(p, replace(s, **sel), d)


def test_config_from_selection():
    cfg = setup(tile_m=4, tile_n=32, vector_width=16)
    assert (cfg.tile_m, cfg.tile_n, cfg.width, cfg.vectors, cfg.compute) == (4, 32, 16, 2, "f32")


@pytest.mark.parametrize("sel, words", [
    (dict(tile_m=4, tile_n=24, vector_width=16), "whole rows"),
    (dict(tile_m=0, tile_n=32, vector_width=16), "whole rows"),
    (dict(tile_m=4, tile_n=36, vector_width=12), "vector_width=12"),
    (dict(tile_m=15, tile_n=32, vector_width=16), f"at most {MAX_ACC_VECTORS}"),
])
def test_refusals_name_the_reason(sel, words):
    with pytest.raises(SetupError, match=words):
        setup(**sel)


def test_refuses_cuda_and_integer_and_mixed_compute():
    with pytest.raises(SetupError, match="vector types"):
        setup(d=dialect_for(nominal_cuda_device(9, 0)))
    with pytest.raises(SetupError, match="int8"):
        setup(problem("int8"))
    with pytest.raises(SetupError, match="compute type"):
        setup(problem("float32", rhs="float64"))


def test_declarations_and_one_fma_per_accumulator():
    cfg = setup(tile_m=3, tile_n=32, vector_width=16)
    t = VectorTile()
    assert t.declare_lhs(cfg, CPU, "a") == "float a[3];"
    assert t.declare_rhs(cfg, CPU, "b") == "float16 b[2];"
    assert t.declare_acc(cfg, CPU, "c") == "float16 c[6];"
    body = t.execute(cfg, CPU, "a", "b", "c").splitlines()
    assert len(body) == 6
    assert {ln.split(" = ")[0] for ln in body} == {f"c[{i}]" for i in range(6)}
    assert "a[2]" in body[5] and "b[1]" in body[5]


def test_rhs_read_along_n_only():
    cfg = setup(tile_m=2, tile_n=32, vector_width=16)
    loads = VectorTile().load_rhs(cfg, CPU, "b", SmemTile("p", "ld", "0", "0")).splitlines()
    assert len(loads) == 2 and loads[0].startswith("b[0] = ") and loads[1].startswith("b[1] = ")
    with pytest.raises(SetupError, match="k-major"):
        VectorTile().load_rhs(cfg, CPU, "b", SmemTile("p", "ld", "0", "0", k_contiguous=True))


def test_acc_elements_cover_the_tile_once():
    cfg = setup(tile_m=2, tile_n=32, vector_width=16)
    els = list(VectorTile().acc_elements(cfg, "c"))
    assert sorted((int(r), int(c)) for r, c, _ in els) == [(r, c) for r in range(2) for c in range(32)]
    assert len({e for _, _, e in els}) == 64
