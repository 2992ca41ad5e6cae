"""global_/write/tma_store_writer.py: its setup (TMA stores only where the knob and the output type
allow), the staging band and bytes with their refusal, the output tensor map, and where each tile
element lands in the staging tile: one distinct byte range per element, inside the staging bytes."""
from __future__ import annotations

import types

import pytest

from gemm_engine.codegen.device import nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME, FLOAT16, FLOAT32
from gemm_engine.epilogue.activations import Derivative, resolve_activation
from gemm_engine.epilogue.spec import IDENTITY, Epilogue
from gemm_engine.errors import SetupError
from gemm_engine.global_.write.tma_store_writer import TmaStoreWriter
from gemm_engine.global_.write.writers import WriterConfig
from gemm_engine.problem import MatmulProblem

SM90 = dialect_for(nominal_cuda_device())


def _sel(tma=True, parts=1):
    return types.SimpleNamespace(tma_store=tma, store_parts=parts)


def _cfg(out=FLOAT16, m=128, n=128, parts=1, tma=True, epilogue=IDENTITY):
    return types.SimpleNamespace(out=out, stage=types.SimpleNamespace(stage_m=m, stage_n=n),
                                 writer=WriterConfig(tma_store=tma, store_parts=parts), epilogue=epilogue)


def test_setup_follows_the_knob_and_output_type():
    w = TmaStoreWriter()
    p = MatmulProblem(1, 64, 64, 64, FLOAT16, FLOAT16, FLOAT16)
    assert w.setup(p, _sel(), SM90) == WriterConfig(pairs=True, tma_store=True, store_parts=1)
    assert not w.setup(p, _sel(tma=False), SM90).tma_store
    assert w.setup(p, _sel(parts=2), SM90).store_parts == 2


def test_the_fill_stays_checked_only_for_arrays_read_beside_rows_of_no_map():
    """`checked_fill`: an epilogue that reads c, bias or mul, and N's rows not 16-byte multiples (a
    contiguous output then has no map: its tiles go direct, measured faster beside the checked
    fill); c added by reducing stores is not read."""
    def checked(n, **ep):
        p = MatmulProblem(1, 64, n, 64, FLOAT16, FLOAT16, FLOAT16, epilogue=Epilogue(**ep))
        return TmaStoreWriter().setup(p, _sel(), SM90).checked_fill
    assert checked(1004, bias=FLOAT16) and checked(1004, mul=FLOAT16) and checked(1004, c=FLOAT16)
    assert not checked(1000, bias=FLOAT16) and not checked(1004) and not checked(1004, scaled=True)
    assert not checked(1004, c=FLOAT16, accumulate=True)


@pytest.mark.parametrize("out, band", [(FLOAT16, 64), (BY_NAME["bfloat16"], 64), (FLOAT32, 32)])
def test_band_and_staging_bytes(out, band):
    w = TmaStoreWriter()
    assert w.band(_cfg(out)) == band
    assert w.staging_bytes(_cfg(out)) == 128 * 128 * out.itemsize
    assert w.staging_bytes(_cfg(out, parts=2)) == 128 * 64 * out.itemsize
    assert w.staging_bytes(_cfg(out, tma=False)) == 0


def test_a_gated_epilogue_stages_half_the_tile_in_one_part():
    gated = Epilogue(activation=resolve_activation("swiglu"))
    w = TmaStoreWriter()
    assert w.stages_pairs(_cfg(n=256, epilogue=gated)) and w.staging_bytes(_cfg(n=256, epilogue=gated)) == 128 * 128 * 2
    assert w.tensor_map_spec(_cfg(n=256, epilogue=gated), 100, 1000, 500, 0, 1).dims[:2] == (500, 100)
    assert w.tensor_map_spec(_cfg(n=256), 100, 1000, 1000, 0, 1).dims[:2] == (1000, 100)
    for no in (_cfg(n=64, epilogue=gated), _cfg(n=256, parts=2, epilogue=gated), _cfg(n=256, tma=False, epilogue=gated),
               _cfg(n=256, epilogue=Epilogue(activation=Derivative("swiglu"), mul=FLOAT16))):
        assert not w.stages_pairs(no) and w.staging_bytes(no) == 0


def test_tiles_that_are_not_whole_boxes_are_refused():
    with pytest.raises(SetupError, match="a 128 x 80 tile in 1 column part"):
        TmaStoreWriter().staging_bytes(_cfg(n=80))
    with pytest.raises(SetupError, match="a 128 x 96 tile in 2 column part"):     # 48 columns: 96 bytes
        TmaStoreWriter().staging_bytes(_cfg(n=96, parts=2))
    with pytest.raises(SetupError, match="in 4 column part"):
        TmaStoreWriter().staging_bytes(_cfg(n=128, parts=4))


@pytest.mark.parametrize("batch", [1, 3])
def test_output_tensor_map(batch):
    spec = TmaStoreWriter().tensor_map_spec(_cfg(), 1000, 4096, 4104, 1000 * 4104, batch)
    assert spec.dims == (4096, 1000, batch) and spec.box == (64, 128, 1) and spec.swizzle == 128
    assert spec.strides == (4104 * 2, (1000 * 4104 if batch > 1 else 4104 * 1000) * 2)


def test_tiles_of_rows_not_whole_128_bytes_take_64_byte_bands():
    """A 96-column 16-bit tile (192-byte rows): three bands of 64-byte rows, the map's swizzle 64;
    whole 128-byte rows (float32's 384) keep 128; a gated epilogue's half-width tile keeps 128."""
    w = TmaStoreWriter()
    narrow = _cfg(n=96, m=192)
    assert (w.span(narrow), w.band(narrow), w.staging_bytes(narrow)) == (64, 32, 192 * 96 * 2)
    assert w.staging_bytes(_cfg(n=96, parts=3)) == 128 * 32 * 2
    spec = w.tensor_map_spec(narrow, 1536, 1536, 1536, 0, 1)
    assert spec.box == (32, 192, 1) and spec.swizzle == 64
    assert (w.span(_cfg(FLOAT32, n=96)), w.band(_cfg(FLOAT32, n=96))) == (128, 32)


@pytest.mark.parametrize("out, n", [(FLOAT16, 128), (FLOAT32, 128), (FLOAT16, 96), (FLOAT16, 160)])
def test_each_element_lands_where_tma_swizzles_it(out, n):
    """Each element's staging bytes are its own, inside the staging tile, and where TMA's swizzle of
    the band's rows puts it: the unswizzled address's 16-byte chunk bits XOR its bits 7 up (three
    for 128-byte rows, two for 64; bands start on 1024-byte boundaries)."""
    w, cfg = TmaStoreWriter(), _cfg(out, m=64, n=n)
    size, span, seen = out.itemsize, w.span(cfg), set()
    band, mask = span // size, 7 if span == 128 else 3
    for row in range(64):
        for col in range(n):
            at = eval(w._offset(cfg, str(row), str(col)).replace("/", "//"))
            plain = (col // band) * 64 * span + row * span + (col % band) * size
            assert at == plain ^ (((plain >> 7) & mask) << 4)
            assert at % size == 0 and 0 <= at < w.staging_bytes(cfg)
            seen.add(at)
    assert len(seen) == 64 * n


def _staged_branch(epilogue_kwargs, n=1000):
    """The TMA branch of a ragged product's tile store (specialized_wgmma, 1000 x n x 96)."""
    from gemm_engine.algorithms import REGISTRY
    from gemm_engine.batch.tma_persistent import OUT_FLAG
    from gemm_engine.call.prepare import dense_problem
    from gemm_engine.dtypes import bfloat16_dtype
    from dataclasses import replace
    p = dense_problem(1, 1000, n, 96, bfloat16_dtype())
    p = replace(p, epilogue=Epilogue(**epilogue_kwargs))
    alg = REGISTRY["specialized_wgmma"](schedule="pingpong", warpgroups_m=1, partition_m=2, tile_n=128, stages=4)
    src = alg.render(alg.setup(p, SM90), SM90)
    start = src.index(f"if ({OUT_FLAG}) {{")
    return src[start:src.index("} else {", start)]


def test_the_staging_tile_is_filled_without_bounds_and_reads_the_epilogue_arrays_in_range():
    """Bulk stores clip their boxes at the output's edges, so the staging tile's elements past M
    and N are written unchecked (bounds tested there cost up to 78% of a short-K product on an
    H200); an epilogue that reads bias or mul per element reads them at the last row or column
    instead (the value is never stored), in range -- unless a contiguous output's rows are not
    16-byte multiples (its tiles then stored directly, measured faster beside the checked fill)."""
    plain = _staged_branch({})
    assert "< M" not in plain and "< N)" not in plain.replace("+ 64 < N)", "")
    assert "alpha" in _staged_branch({"scaled": True}) and "< M" not in _staged_branch({"scaled": True})
    bias, mul = _staged_branch({"bias": FLOAT32}), _staged_branch({"mul": BY_NAME["bfloat16"]})
    for branch in (bias, mul):
        assert "< M" not in branch and "< N)" not in branch.replace("+ 64 < N)", "")
        assert ": (N) - 1" in branch
    assert ": (M) - 1" in mul and ": (M) - 1" not in bias
    odd = _staged_branch({"bias": FLOAT32}, n=1004)
    assert "< M" in odd and ": (N) - 1" not in odd
    assert "< M" not in _staged_branch({}, n=1004)
