"""``out += a @ b`` (``c=out, beta=1``) on an sm_90 GPU (skipped elsewhere): the TMA writer adds
each 16-bit tile into ``out`` with reducing bulk stores (global_/write/tma_store_writer.py) instead
of reading c. Against float64 references of the old ``out`` plus the product, three calls in a row
(the general path, then the fast path), for torch and CuPy arrays, tiles cut at M and N, the split
tail (both fixups), ping-pong consumers, a bias, a grouped call; ``out`` inside a larger buffer whose
other elements hold a sentinel that any write would change. Without a GPU: the rendered source adds
16-bit tiles and reads c in the direct branch and for float32 outputs."""
from __future__ import annotations

import numpy as np
import pytest

from gemm_engine.algorithms import REGISTRY
from helpers import random, rel_error
from hopper_support import sm90_engine

SENTINEL = 7.0
KNOBS = {"default": None, "split tail": dict(split_tail=2), "split tail, last": dict(split_tail=2, split_fixup="last"),
         "pingpong": dict(warpgroups_m=1, partition_m=2, tile_n=128, stages=4, store_parts=2, schedule="pingpong")}


@pytest.mark.parametrize("knobs", list(KNOBS))
@pytest.mark.parametrize("shape", [(512, 768, 256), (300, 520, 200), (2048, 2304, 1024)], ids=str)
def test_adds_into_out(rng, shape, knobs):
    torch = pytest.importorskip("torch")
    engine = sm90_engine()
    m, n, k = shape
    alg = None if KNOBS[knobs] is None else REGISTRY["specialized_wgmma"](**KNOBS[knobs])
    a, b = (torch.from_numpy(random(rng, s, "float16")).cuda() for s in ((m, k), (k, n)))
    buf = torch.full((m + 2, n + 8), SENTINEL, dtype=torch.float16, device="cuda")
    out = buf[1:m + 1, :n]
    start = torch.from_numpy(random(rng, (m, n), "float16")).cuda()
    out.copy_(start)
    want = start.double()
    for _ in range(3):
        engine.matmul(a, b, out=out, c=out, beta=1.0, algorithm=alg)
        want = want + a.double() @ b.double()
        assert engine.last_choice[1].batch.global_.epilogue.accumulate
    host = buf.double().cpu().numpy()
    assert rel_error(host[1:m + 1, :n], want.cpu().numpy()) < 3e-3
    outside = np.ones(host.shape, bool)
    outside[1:m + 1, :n] = False
    assert (host[outside] == SENTINEL).all(), "elements outside out were written"


def test_bias_and_cupy(rng):
    cp = pytest.importorskip("cupy")
    engine = sm90_engine()
    m, n, k = 640, 1024, 384
    a, b = (cp.asarray(random(rng, s, "float16")) for s in ((m, k), (k, n)))
    bias = cp.asarray(random(rng, (n,), "float16"))
    out = cp.asarray(random(rng, (m, n), "float16"))
    want = cp.asnumpy(out).astype(np.float64)
    for _ in range(2):
        engine.matmul(a, b, out=out, c=out, beta=1.0, bias=bias)
        want += cp.asnumpy(a).astype(np.float64) @ cp.asnumpy(b).astype(np.float64) + cp.asnumpy(bias)
        assert engine.last_choice[1].batch.global_.epilogue.accumulate
    assert rel_error(cp.asnumpy(out).astype(np.float64), want) < 3e-3


def test_grouped_contiguous(rng):
    # Whole tiles of a group are added through the output's map; a group's last, partial tile is
    # stored directly, reading c (= out) as before: both must add exactly once.
    torch = pytest.importorskip("torch")
    from grouped_support import contiguous_ref, routing
    engine = sm90_engine()
    groups, tokens, k, n = 8, 2000, 256, 512
    counts = routing(rng, groups, tokens)
    x = torch.from_numpy(random(rng, (tokens, k), "float16")).cuda()
    w = torch.from_numpy(random(rng, (groups, n, k), "float16")).cuda().transpose(1, 2)     # (groups, K, N) view
    offsets = torch.from_numpy(np.cumsum(counts).astype(np.int32)).cuda()
    out = torch.from_numpy(random(rng, (tokens, n), "float16")).cuda()
    want = out.double().cpu().numpy() + contiguous_ref(x.cpu().numpy(), w.cpu().numpy(), counts)
    engine.grouped_matmul(x, w, offsets=offsets, out=out, c=out, beta=1.0)
    assert engine.last_choice[0].name == "grouped_specialized_wgmma"
    assert engine.last_choice[1].batch.global_.epilogue.accumulate
    assert rel_error(out.double().cpu().numpy(), want) < 3e-3


@pytest.mark.parametrize("dtype, precision, tol", [("bfloat16", None, 2e-2), ("float32", "tf32", 5e-3)])
def test_other_output_types(rng, dtype, precision, tol):
    # The reducing store adds in the output map's element type (bf16); a float32 output reads c.
    torch = pytest.importorskip("torch")
    engine = sm90_engine()
    m, n, k = 384, 640, 256
    dt = getattr(torch, dtype)
    alg = REGISTRY["specialized_wgmma"]()
    a, b, out = (torch.from_numpy(random(rng, s, "float32")).cuda().to(dt) for s in ((m, k), (k, n), (m, n)))
    want = out.double() + a.double() @ b.double()
    engine.matmul(a, b, out=out, c=out, beta=1.0, precision=precision, algorithm=alg)
    g = engine.last_choice[1].batch.global_
    assert g.epilogue.accumulate and g.writer.tma_store
    alg, cfg = engine.last_choice
    source = alg.chosen(cfg).render(cfg, engine.dialect)
    assert ("cp.reduce.async.bulk.tensor" in source) == (dtype == "bfloat16")
    assert rel_error(out.double().cpu().numpy(), want.cpu().numpy()) < tol


@pytest.mark.parametrize("dtype, precision, adds", [("bfloat16", "default", True), ("float16", "default", True),
                                                     ("float32", "tf32", False)])
def test_the_source_adds_16_bit_outputs_and_reads_c_elsewhere(dtype, precision, adds):
    # No GPU: the rendered kernel. Through the output's map a 16-bit tile is added (c never read
    # there); the direct branch (an output TMA cannot address) and float32 outputs read c.
    from gemm_engine.codegen.device import nominal_cuda_device
    from gemm_engine.codegen.dialect import dialect_for
    from gemm_engine.dtypes import BY_NAME
    from gemm_engine.epilogue.spec import Epilogue
    from gemm_engine.problem import Layout, MatmulProblem
    d, et = dialect_for(nominal_cuda_device(9, 0)), BY_NAME[dtype]
    p = MatmulProblem(1, 384, 640, 256, et, et, et, Layout.ROW, Layout.ROW, 16, 16, precision,
                      Epilogue(c=et, accumulate=True))
    alg = REGISTRY["specialized_wgmma"]()
    cfg = alg.setup(p, d)
    source = alg.chosen(cfg).render(cfg, d)
    assert ("cp.reduce.async.bulk.tensor" in source) == adds
    assert "c_row_stride" in source                      # the direct branch reads c
    if adds:
        staged = source[source.index("if (out_tma)"):]
        staged = staged[:staged.index("ptx_tma_add_3d")]
        assert "c_row_stride" not in staged, "the added tile reads c"
