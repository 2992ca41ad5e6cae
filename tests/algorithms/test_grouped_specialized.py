"""grouped_specialized_wgmma on an sm_90 GPU (skipped elsewhere): the TMA pipeline under the grouped
walk against float64 references per group, on TMA-addressable shapes (16-byte leading dimensions)
so that it, not a portable member, runs: every output path (whole tiles through the output's map,
a group's last partial tile copied from the staging tile), every tile the grouped rule picks (64 x
128, 128 x 256; fp8's promoted 64 x 128 and 128 x 128), routings with empty groups and all tokens in one group,
the masked layout (padding rows NaN, never read), per-group epilogues and DeepGEMM's block scales,
and a poisoned output buffer beyond M and N that must stay untouched; routing that mixes tiles a
consumer warpgroup has no rows of with whole ones, that warpgroup skipping its wgmma or not (the
routing that hung the kernel while every warp of an idle warpgroup waited for each slot); tiles past
a group's end copied row by row from the staging tile, nothing past the group written."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.algorithms import REGISTRY
from grouped_support import contiguous_ref, masked_ref, routing
from helpers import random, rel_error
from hopper_support import sm90_engine

ml_dtypes = pytest.importorskip("ml_dtypes")

#: (groups, tokens, k, n, routing): 64-row tiles (few rows a group), 128 x 256 ones (many), odd counts.
CASES = [(8, 64, 256, 512, "random"), (8, 2000, 512, 768, "random"), (16, 1000, 384, 256, "one"),
         (4, 777, 128, 384, "skewed"), (32, 300, 256, 256, "random")]


def device_weights(engine, w, k_major=True):
    """(groups, K, N) weights on the device as the (groups, N, K) view nn.Linear keeps (``k_major``)."""
    if not k_major:
        return engine.runtime.to_device(w)
    return engine.runtime.to_device(np.ascontiguousarray(w.transpose(0, 2, 1))).transpose(0, 2, 1)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:4])) + "-" + c[4])
def test_contiguous(rng, case):
    engine = sm90_engine()
    groups, tokens, k, n, kind = case
    counts = routing(rng, groups, tokens, kind)
    x, w = random(rng, (tokens, k), "float16"), random(rng, (groups, k, n), "float16")
    bias, rs = random(rng, (groups, n), "float16"), rng.random(tokens).astype(np.float32)
    rt = engine.runtime
    # the output inside a NaN buffer, 16-byte aligned: TMA stores for whole tiles, clipped nowhere
    buf = rt.to_device(np.full((tokens + 3, n + 8), np.nan, np.float16))
    out = buf[:tokens, :n]
    dw = device_weights(engine, w, k_major=kind != "skewed")     # either layout of the weights
    engine.grouped_matmul(rt.to_device(x), dw, offsets=rt.to_device(np.cumsum(counts).astype(np.int32)), out=out,
                          bias=bias, row_scale=rs, activation="silu")
    assert engine.last_choice[0].name == "grouped_specialized_wgmma"
    host = rt.to_host(buf).astype(np.float64)
    assert rel_error(host[:tokens, :n], contiguous_ref(x, w, counts, bias=bias, row_scale=rs, activation="silu")) < 2e-3
    assert np.isnan(host[tokens:]).all() and np.isnan(host[:, n:]).all()


@pytest.mark.parametrize("idle", ["skip", "compute"])
def test_idle_warpgroups_beside_whole_tiles(rng, idle):
    """Dirichlet routing over 64 experts (groups of 1 to 700 rows, one empty): in 128-row tiles the
    second consumer warpgroup has no rows of a group's last tile whenever it holds 64 rows or fewer,
    and skips its wgmma there, beside whole tiles, each tile 8 slices over a ring of 4. With every
    warp of the idle warpgroup waiting for each slot this routing hung on an H200 (two runs of two);
    repeated calls, each checked."""
    engine = sm90_engine()
    route = np.random.default_rng(0)
    counts = route.multinomial(8192, route.dirichlet(np.ones(64)))
    tokens, k, n = int(counts.sum()), 512, 1024
    x, w = random(rng, (tokens, k), "float16"), random(rng, (64, k, n), "float16")
    rt = engine.runtime
    dx, dw = rt.to_device(x), device_weights(engine, w)
    offs = rt.to_device(np.cumsum(counts).astype(np.int32))
    alg = REGISTRY["grouped_specialized_wgmma"](idle_warpgroups=idle)
    ref = contiguous_ref(x, w, counts)
    for _ in range(3):
        out = engine.grouped_matmul(dx, dw, offsets=offs, algorithm=alg)
        cfg = engine.last_choice[1]
        assert cfg.batch.global_.stage.stage_m == 128 and cfg.batch.global_.skip_idle == (idle == "skip")
        assert rel_error(rt.to_host(out).astype(np.float64), ref) < 2e-3


@pytest.mark.parametrize("layout", ["contiguous", "masked"])
def test_tiles_past_a_groups_end_are_copied_from_the_staging_tile(rng, layout):
    """A tile that runs past its group's end goes through the staging tile like a whole one, then
    its units copy the rows inside the group (the output's map would write the next group's rows,
    or a masked slab's rows past its count). No epilogue (the staging tile filled unchecked), N =
    1000 (a partial last column tile), inside a NaN buffer: every group's rows right, nothing past
    N, the tokens or a count written."""
    engine = sm90_engine()
    counts = np.array([127, 1, 129, 0, 65, 300, 64, 128])
    groups, k, n, rt = len(counts), 256, 1000, engine.runtime
    w = random(rng, (groups, k, n), "float16")
    if layout == "contiguous":
        tokens = int(counts.sum())
        x = random(rng, (tokens, k), "float16")
        buf = rt.to_device(np.full((tokens + 3, n + 8), np.nan, np.float16))
        engine.grouped_matmul(rt.to_device(x), device_weights(engine, w), out=buf[:tokens, :n],
                              offsets=rt.to_device(np.cumsum(counts).astype(np.int32)))
        host = rt.to_host(buf).astype(np.float64)
        assert rel_error(host[:tokens, :n], contiguous_ref(x, w, counts)) < 2e-3
        assert np.isnan(host[tokens:]).all() and np.isnan(host[:, n:]).all()
    else:
        cap = 300
        x = random(rng, (groups, cap, k), "float16")
        buf = rt.to_device(np.full((groups, cap, n + 8), np.nan, np.float16))
        engine.grouped_matmul(rt.to_device(x), device_weights(engine, w), out=buf[:, :, :n],
                              counts=rt.to_device(counts.astype(np.int32)))
        host = rt.to_host(buf).astype(np.float64)
        ref = masked_ref(x, w, counts)
        for g, c in enumerate(counts):
            assert rel_error(host[g, :c, :n], ref[g, :c]) < 2e-3, g
            assert np.isnan(host[g, c:]).all() and np.isnan(host[g, :, n:]).all(), g
    assert engine.last_choice[0].name == "grouped_specialized_wgmma"


def test_masked_padding_is_never_read(rng):
    engine = sm90_engine()
    groups, cap, k, n = 8, 96, 256, 384
    x, w = random(rng, (groups, cap, k), "float16"), random(rng, (groups, k, n), "float16")
    counts = np.array([0, 1, 96, 50, 64, 65, 0, 7], np.int32)
    for g, c in enumerate(counts):
        x[g, c:] = np.nan
    rt = engine.runtime
    out = engine.grouped_matmul(rt.to_device(x), device_weights(engine, w), counts=rt.to_device(counts))
    assert engine.last_choice[0].name == "grouped_specialized_wgmma"
    host = rt.to_host(out).astype(np.float64)
    assert rel_error(host, masked_ref(np.nan_to_num(x), w, counts)) < 2e-3


@pytest.mark.parametrize("tokens", [300, 4000], ids=["64-row tiles", "128-row tiles"])
def test_fp8_block_scales(rng, tokens):
    engine = sm90_engine()
    torch = pytest.importorskip("torch", reason="fp8 weights on the device, K-major: torch holds them (CuPy does not)")
    groups, k, n = 16, 640, 512
    counts = routing(rng, groups, tokens)
    x = (rng.standard_normal((tokens, k)) * 3).astype(ml_dtypes.float8_e4m3fn)
    w = (rng.standard_normal((groups, n, k)) * 3).astype(ml_dtypes.float8_e4m3fn)     # (groups, N, K)
    kb, nb = -(-k // 128), -(-n // 128)
    sa, sb = (rng.random((tokens, kb)) + 0.5).astype(np.float32), (rng.random((groups, kb, nb)) + 0.5).astype(np.float32)

    def fp8(host):
        return torch.from_numpy(host.view(np.uint8)).cuda().view(torch.float8_e4m3fn)
    out = engine.grouped_matmul(fp8(x), fp8(w).transpose(1, 2), offsets=torch.tensor(np.cumsum(counts), device="cuda"),
                                scale_a=torch.from_numpy(sa).cuda(), scale_b=torch.from_numpy(sb).cuda())
    assert engine.last_choice[0].name == "grouped_specialized_wgmma", engine.last_choice[0].name
    fa = np.repeat(sa, 128, 1)[:, :k]
    fb = np.repeat(np.repeat(sb, 128, 1), 128, 2)[:, :k, :n]
    ref = contiguous_ref(x.astype(np.float64) * fa, w.transpose(0, 2, 1).astype(np.float64) * fb, counts)
    assert rel_error(out.cpu().numpy(), ref) < 1e-3


@pytest.mark.parametrize("knobs", [dict(tile_n=256), dict(tile_n=128), dict(warpgroups_m=2, partition_m=2, tile_n=128),
                                   dict(warpgroups_m=1, tile_n=256)], ids=lambda k: "-".join(f"{a}{b}" for a, b in k.items()))
def test_named_tiles(rng, knobs):
    """A tile named by its shape alone gets its staging and ring fitted to it (algorithms/
    specialized_wgmma.py `fit_named_tile`) after the grouped rule's own small-group choice: the
    product of each with a bias and silu, against float64 into a poisoned out."""
    engine = sm90_engine()
    counts = routing(rng, 8, 600, "random")
    tokens, k, n = int(counts.sum()), 512, 768
    x, w = random(rng, (tokens, k), "bfloat16"), random(rng, (8, k, n), "bfloat16")
    bias = random(rng, (8, n), "bfloat16")
    rt = engine.runtime
    buf = rt.to_device(np.full((tokens, n), np.nan, ml_dtypes.bfloat16))
    engine.grouped_matmul(rt.to_device(x), device_weights(engine, w), offsets=rt.to_device(np.cumsum(counts).astype(np.int32)),
                          out=buf, bias=bias, activation="silu", algorithm=REGISTRY["grouped_specialized_wgmma"](**knobs))
    g = engine.last_choice[1].batch.global_
    assert g.stage.stage_n == knobs["tile_n"]
    want = contiguous_ref(x, w, counts, bias=bias, activation="silu")
    assert rel_error(rt.to_host(buf).astype(np.float64), want) < 1e-2
