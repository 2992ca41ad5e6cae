"""The Hopper specialized kernel on weight-streaming products (decode batches: selector/
specialized_wgmma.py ``decode_tiling``) and on the wave rule's 192 x 128 16-bit tile: the default
choice's kernels (and each case's split) compile with nvcc for sm_90a without spills or serialized
wgmma, and on an sm_90 GPU match float64 (short sides of 1 to 128 rows in both weight layouts, N
short, a batch, a fused epilogue, fp8 rowwise), two calls giving the same bits (the split parts'
sums are added in part order) and the tile's rows past M moving no partial sums."""
from __future__ import annotations

import numpy as np
import pytest

from cuda_compile import archs_for, compile_jobs, failures_of, jobs_of, nvcc_or_skip, prefetched, spill_problems_of
from gemm_engine.algorithms import REGISTRY
from gemm_engine.algorithms.specialized_wgmma import SpecializedWgmmaAlgorithm
from helpers import assert_close, np_dtype, random
from hopper_support import SM90, fp8_operands, fp8_problem, padded, problem, sm90_engine

#: (batch, m, n, k, dtype, layouts, the default's tile and split parts on 132 multiprocessors, what
#: the numerics tests run besides: the default's selection with these overrides (split parts where
#: the default has none, so that every case checks the split's sums too)
CASES = [
    (1, 16, 4096, 4096, "bfloat16", ("row", "col"), (64, 32, 0), dict(tile_n=64, stages=12, split_tail=4)),
    (1, 5, 4096, 2048, "float16", ("row", "col"), (64, 32, 0), {}),     # 5 rows: three warps skip their sums
    (1, 7, 1024, 4096, "bfloat16", ("row", "row"), (64, 64, 0), dict(tile_n=32, split_tail=4)),  # 32-column parts
    (1, 100, 4096, 4096, "bfloat16", ("row", "col"), (128, 64, 0), dict(split_tail=2)),  # one row block, 104 rows read
    (1, 33, 6144, 4096, "bfloat16", ("row", "row"), (64, 64, 0),                     # a row-major weight (MN-major B),
     dict(warpgroups_n=2, stages=4, split_tail=5)),                                 # 128 columns in 5 parts
    (1, 64, 14336, 4096, "bfloat16", ("row", "col"), (64, 128, 0), {}),                # 112 tiles: no split
    (1, 4096, 16, 4096, "bfloat16", ("row", "row"), (128, 64, 4), dict(split_tail=4)),  # N short: the weight is a
    (2, 16, 2048, 4096, "float16", ("row", "col"), (64, 32, 0), dict(tile_n=64, stages=12, split_tail=4)),  # a batch of two weights
    (1, 8, 4096, 4104, "bfloat16", ("row", "col"), (64, 32, 0), {}),    # K not a whole slot
    (1, 16, 2560, 14336, "bfloat16", ("row", "col"), (64, 64, 3), {}),                 # a long K: split by default
    (1, 16, 4096, 14336, "bfloat16", ("row", "col"), (64, 32, 0), {}),                 # 128 tiles of 32 columns
    # One row (auto takes these past the skinny kernels: selector/conditions.py `one_row_streams`)
    (1, 1, 4096, 14336, "bfloat16", ("row", "col"), (64, 32, 0), {}),
    (1, 1, 14336, 4096, "bfloat16", ("row", "col"), (64, 128, 0), {}),
    (1, 1, 4096, 4096, "bfloat16", ("row", "row"), (64, 32, 0), {}),
    (1, 1, 4096, 14336, "bfloat16", ("col", "col"), (64, 32, 0), {}),                  # a strided one-row x
    (1, 1, 2048, 8192, "float16", ("col", "row"), (64, 64, 4), {}),
]

#: The split tail's two fixups: the owner waits for the later parts, or the last part adds them all.
FIXUPS = ("owner", "last")


def _forced(case, fixup=None):
    """The default's selection for the case with its overrides, as an algorithm (the tests run it
    whatever auto takes; one row takes the skinny kernel by default below 64 MiB of a K-major weight);
    ``fixup``: the split tail's fixup too."""
    b, m, n, k, dtype, layouts, _, more = case
    chosen = SpecializedWgmmaAlgorithm().select(problem(b, m, n, k, dtype, layouts), SM90)
    return SpecializedWgmmaAlgorithm(**{**chosen, **more, **({"split_fixup": fixup} if fixup else {})})


def decode_sources() -> dict:
    out = {}
    for case in CASES:
        b, m, n, k, dtype, layouts, _, _ = case
        p = problem(b, m, n, k, dtype, layouts)
        for fixup in FIXUPS:
            alg = _forced(case, fixup)
            out[f"decode-{b}x{m}x{n}x{k}-{dtype}-{'/'.join(layouts)}-{fixup}"] = alg.render(alg.setup(p, SM90), SM90)
    for dtype in ("bfloat16", "float16"):     # the wave rule's 192 x 192 (3000^3) and 192 x 96 (1536^3)
        for size, label in ((3000, "192x192"), (1536, "192x96")):
            p = problem(1, size, size, size, dtype)
            alg = SpecializedWgmmaAlgorithm()
            out[f"wave-{label}-{dtype}"] = alg.render(alg.setup(p, SM90), SM90)
    f8 = fp8_problem(16, 4096, 4096, "row")
    out["decode-fp8-rowwise"] = SpecializedWgmmaAlgorithm().render(SpecializedWgmmaAlgorithm().setup(f8, SM90), SM90)
    return out


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:4])) + f"-{c[4]}-{'/'.join(c[5])}")
def test_default_tiles(case):
    b, m, n, k, dtype, layouts, (tm, tn, parts), _ = case
    sel = SpecializedWgmmaAlgorithm().selection_for(problem(b, m, n, k, dtype, layouts), SM90)
    assert (64 * sel.warpgroups_m * sel.partition_m, sel.tile_n * sel.warpgroups_n, sel.split_tail) == (tm, tn, parts)


def test_wave_tiles_for_3000_and_1536_cubed():
    sel = SpecializedWgmmaAlgorithm().selection_for(problem(1, 3000, 3000, 3000, "bfloat16"), SM90)
    assert (sel.warpgroups_m, sel.tile_n) == (3, 192)
    sel = SpecializedWgmmaAlgorithm().selection_for(problem(1, 1536, 1536, 1536, "bfloat16"), SM90)
    assert (sel.warpgroups_m, sel.tile_n) == (3, 96)


@pytest.mark.nvcc
@prefetched(lambda: jobs_of(decode_sources(), archs_for(SpecializedWgmmaAlgorithm.min_arch)))
def test_sources_compile_without_spills_or_serialized_wgmma():
    results = compile_jobs(jobs_of(decode_sources(), archs_for(SpecializedWgmmaAlgorithm.min_arch)), nvcc_or_skip())
    assert not failures_of(results)
    assert not spill_problems_of(results)
    for compiled in results.values():
        assert "C7514" not in compiled.log and "C7515" not in compiled.log, compiled.log[-2000:]


# -- numerics on an H100 / H200 ---------------------------------------------------------------------------
@pytest.mark.parametrize("fixup", FIXUPS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:4])) + f"-{c[4]}-{'/'.join(c[5])}")
def test_numerics_and_same_bits_twice(rng, case, fixup):
    engine = sm90_engine()
    b, m, n, k, dtype, layouts, (_, _, default_parts), more = case
    parts = more.get("split_tail", default_parts)
    if fixup == "last" and parts < 2:
        pytest.skip("no split: the fixup does not enter")
    lead = (b,) if b > 1 else ()
    a, bb = random(rng, lead + (m, k), dtype), random(rng, lead + (k, n), dtype)
    da, db = padded(engine, a, layouts[0], 0), padded(engine, bb, layouts[1], 0)
    alg = _forced(case, fixup)
    results = []
    for _ in range(2):
        out = engine.runtime.to_device(np.full(lead + (m, n), np.nan, dtype=np_dtype(dtype)))
        engine.matmul(da, db, out=out, algorithm=alg)
        assert engine.last_choice[1].batch.global_.split_tail == parts
        assert engine.last_choice[1].batch.global_.split_fixup == fixup
        results.append(engine.runtime.to_host(out))
        assert_close(results[-1], a, bb, dtype)
    np.testing.assert_array_equal(results[0].view(np.uint16), results[1].view(np.uint16))


def test_default_decode_call_with_a_fused_epilogue(rng):
    """24 rows of a 2560 x 14336 weight (split in 3 by default), relu(x @ W.T + bias), called three
    times (the repeated calls take the fast path, whose fused values once included the kept scratch)."""
    engine = sm90_engine()
    m, n, k = 24, 2560, 14336
    x, w = random(rng, (m, k), "bfloat16"), random(rng, (n, k), "bfloat16")
    bias = random(rng, (n,), "bfloat16")
    ref = np.maximum(x.astype(np.float64) @ w.T.astype(np.float64) + bias.astype(np.float64), 0)
    for _ in range(3):
        got = engine.matmul(x, w.T, bias=bias, activation="relu")
        alg, cfg = engine.last_choice
        assert alg.name == "specialized_wgmma" and cfg.batch.global_.split_tail == 3
        got = np.asarray(got, np.float64)
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1.5e-2


def test_fp8_rowwise_decode(rng):
    """fp8 rowwise 16 x 4096 x 4096: the default (whole tiles) and the tiles split in 4, each called
    three times (the probe's repeated split call raised KeyError: 'kept_scratch' on its scales)."""
    engine = sm90_engine()
    a, bb, sa, sb, ref = fp8_operands(rng, 1, 16, 4096, 4096, "row")
    for alg, parts in ((None, 0), (SpecializedWgmmaAlgorithm(split_tail=4), 4)):
        got = [np.asarray(engine.matmul(a, bb, scale_a=sa, scale_b=sb, algorithm=alg), np.float64) for _ in range(3)]
        assert engine.last_choice[0].name == "specialized_wgmma"
        assert engine.last_choice[1].batch.global_.split_tail == parts
        assert np.linalg.norm(got[0] - ref) / np.linalg.norm(ref) < 2e-3
        np.testing.assert_array_equal(got[0], got[1])
        np.testing.assert_array_equal(got[0], got[2])


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_wave_tile_numerics(rng, dtype):
    engine = sm90_engine()
    a, bb = random(rng, (3000, 3000), dtype), random(rng, (3000, 3000), dtype)
    got = engine.matmul(a, bb)
    assert engine.last_choice[1].batch.global_.stage.stage_m == 192
    assert_close(np.asarray(got), a, bb, dtype)


def test_auto_takes_the_decode_tiling():
    auto = REGISTRY["auto"]()
    for m, n, k, name, parts in ((64, 4096, 4096, "specialized_wgmma", 0), (128, 4096, 4096, "specialized_wgmma", 0),
                                 (16, 2560, 14336, "specialized_wgmma", 3), (16, 4096, 4096, "specialized_wgmma", 0),
                                 (2, 4096, 4096, "specialized_wgmma", 0), (1, 4096, 4096, "skinny", None),
                                 (1, 14336, 4096, "specialized_wgmma", 0)):
        cfg = auto.setup(problem(1, m, n, k, "bfloat16", ("row", "col")), SM90)
        assert auto.chosen(cfg).name == name, (m, n, k)
        if parts is not None:
            assert cfg.batch.global_.split_tail == parts, (m, n, k)
