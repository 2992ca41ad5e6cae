"""Split tail on the Hopper Specialized kernel (``split_tail``, batch/split_tail.py): the tiles of
the last, partial wave split along K into parts that fill the device, partial sums added across
cubes through flags in a kept workspace.

The schedule is checked by running its rendered C (the unit loop and the owners' contributor
loop) under the host C compiler for many tile counts, grid sizes, slice counts and part limits;
refusals and the plan's workspace on nominal devices; numerics (poisoned outputs, every call
twice: the kernel must leave its flags clear, and the two results must be the same bits) on an
sm_90 GPU."""
from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict

import numpy as np
import pytest

from cuda_compile import archs_for, compile_jobs, failures_of, jobs_of, nvcc_or_skip, prefetched
from helpers import assert_close, np_dtype, random
from hopper_support import fp8_operands, fp8_problem
from hopper_support import SM90, padded, problem, sm90_engine
from gemm_engine.algorithms.specialized_wgmma import SpecializedWgmmaAlgorithm
from gemm_engine.batch import split_tail
from gemm_engine.errors import SetupError

CO128 = dict(warpgroups_m=2, partition_m=1, tile_n=128, stages=6)
CO256 = dict(warpgroups_m=2, partition_m=1, tile_n=256, stages=4, store_parts=2)


# -- the schedule, as rendered ---------------------------------------------------------------------
def run_schedule(tmp_path, cases):
    """{case: {cube: [(tile, k_lo, k_hi, contributors)]}} from the rendered loops compiled by the
    host C compiler (CUBE_ID / CUBE_COUNT as variables), ``cases``: (tiles, grid, slices, parts)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no host C compiler to run the rendered schedule")
    # Names of the test's own: the loop declares the scope's, and the body reads them only so.
    sk = split_tail.SplitTailScope(1, k_lo="first_slice", k_hi="end_slice")
    body = "\n".join([f'printf("U %d %lld %d %d", (int)CUBE_ID, (long long)cube, {sk.k_lo}, {sk.k_hi});',
                      f"if (!({sk.contributes}) && {sk.owns_split('slices')}) {{",
                      sk.contributors('printf(" %d", split_cube);'), "}", 'printf("\\n");'])
    runs = []
    for i, (t, g, s, parts) in enumerate(cases):
        runs.append(f"static void run{i}(i64 tiles, i64 grid, int slices) {{\n"
                    f'  printf("CASE %lld %lld %d {parts}\\n", tiles, grid, slices);\n'
                    "  const i64 batch = 1, cubes_m = 1, cubes_n = tiles;\n  cube_count = grid;\n"
                    "  for (cube_id = 0; cube_id < grid; ++cube_id) {\n"
                    f"{split_tail.unit_loop(sk, 'slices', [], body, parts)}\n  }}\n}}")
    calls = " ".join(f"run{i}({t}, {g}, {s});" for i, (t, g, s, _) in enumerate(cases))
    source = ("#include <stdio.h>\ntypedef long long i64;\nstatic i64 cube_id, cube_count;\n"
              "#define CUBE_ID cube_id\n#define CUBE_COUNT cube_count\n" + "\n".join(runs)
              + f"\nint main(void) {{ {calls} return 0; }}\n")
    src, exe = tmp_path / "schedule.c", tmp_path / "schedule"
    src.write_text(source)
    subprocess.run([cc, "-O1", "-o", str(exe), str(src)], check=True, capture_output=True)
    out, case = {}, None
    for line in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.splitlines():
        words = line.split()
        if words[0] == "CASE":
            case = tuple(map(int, words[1:]))
            out[case] = defaultdict(list)
        else:
            c, tile, lo, hi, *contributors = map(int, words[1:])
            out[case][c].append((tile, lo, hi, contributors))
    return out


#: (tiles, grid, K slices a tile, most parts): block-scaled 4096 x 7168 x 16384 (a tail of 44 in 3
#: parts), 4096^3 (116: whole), one wave's worth or less, slices fewer than parts, no tail.
SCHEDULES = [(1232, 132, 128, 4), (512, 132, 64, 4), (64, 132, 64, 4), (10, 132, 3, 8), (1, 132, 100, 4),
             (264, 132, 8, 4), (7, 3, 5, 2), (200, 132, 1, 4), (45, 132, 7, 3), (133, 132, 9, 2)]


def test_schedule_covers_every_slice_once_and_owners_add_exactly_the_later_parts(tmp_path):
    results = run_schedule(tmp_path, SCHEDULES)
    assert len(results) == len(SCHEDULES)
    for (tiles, grid, slices, most), cubes in results.items():
        case = (tiles, grid, slices, most)
        tail = tiles % grid
        parts = min(most, grid // tail, slices) if tail else 1
        covered, split, owners = defaultdict(list), defaultdict(list), {}
        for c, units in cubes.items():
            for i, (tile, lo, hi, contributors) in enumerate(units):
                assert 0 <= lo < hi <= slices, case
                covered[tile] += range(lo, hi)
                if (lo, hi) != (0, slices):
                    assert i == len(units) - 1 and tile >= tiles - tail, f"{case}: a part is a cube's last unit"
                    assert hi - lo in (slices // parts, -(-slices // parts)), case
                if lo > 0:
                    split[tile].append(c)
                elif hi < slices:
                    owners[tile] = (c, contributors)
        assert sorted(covered) == list(range(tiles)), case
        assert all(sorted(v) == list(range(slices)) for v in covered.values()), case
        assert set(split) == set(owners), case
        for tile, (c, contributors) in owners.items():
            assert contributors == sorted(split[tile]) and all(x > c for x in contributors), case
            assert len(contributors) == parts - 1, case
        assert len(owners) == (tail if parts > 1 else 0), case


def test_the_split_tail_keeps_its_flags_zero_not_its_partial_slots():
    # A captured call zeroes what `kept_workspace` says (Runtime.kept_scratch): the flags.
    alg = SpecializedWgmmaAlgorithm(warpgroups_m=2, tile_n=128, stages=6, split_tail=2)
    p = problem(m=1024, n=1024, k=8192, dtype="bfloat16")
    cfg = alg.setup(p, SM90)
    kept = alg.kept_workspace(cfg, p)
    cubes = SM90.device.compute_units
    assert kept.zeroed == split_tail.flag_words(cubes) < kept.count == split_tail.workspace_words(cubes, 128 * 128)


def test_block_scaled_tail_fills_the_device_in_three_parts(tmp_path):
    cubes = run_schedule(tmp_path, [(1232, 132, 128, 4)])[(1232, 132, 128, 4)]
    last = [units[-1] for units in cubes.values()]
    assert all(t >= 1188 for t, *_ in last) and {hi - lo for _, lo, hi, _ in last} <= {42, 43}
    assert all(len(units) == 10 for units in cubes.values())    # 9 whole tiles, then a part


# -- setup -----------------------------------------------------------------------------------------
def test_plan_takes_every_multiprocessor_and_a_kept_workspace():
    alg = SpecializedWgmmaAlgorithm(**CO256, split_tail=2)
    p = problem(m=4096, n=4096, k=4096, dtype="float16")
    cfg = alg.setup(p, SM90)
    sms = SM90.device.compute_units
    assert alg.cube_count(cfg, p) == sms
    kept = alg.kept_workspace(cfg, p)
    assert kept.count == split_tail.workspace_words(sms, 128 * 256) and kept.element.storage == "f32"
    src = alg.render(cfg, SM90)
    assert "kept_scratch" in src and "ptx_flag_release" in src and "ptx_flag_acquire_clear" in src
    # The owners wait for the later parts' cubes: the kernel is launched co-resident (cooperative).
    assert [launch.co_resident for launch in alg.launches(cfg, p)] == [True]
    off = SpecializedWgmmaAlgorithm(**CO256)
    assert [launch.co_resident for launch in off.launches(off.setup(p, SM90), p)] == [False]
    assert off.kept_workspace(off.setup(p, SM90), p) is None
    assert "kept_scratch" not in off.render(off.setup(p, SM90), SM90)
    one = SpecializedWgmmaAlgorithm(**CO256, split_tail=1)     # one part: no split
    assert one.setup(p, SM90).batch.global_.split_tail == 0


@pytest.mark.parametrize("knobs", [dict(cluster_m=2), dict(schedule="pingpong", warpgroups_m=1)])
def test_clusters_and_pingpong_are_refused(knobs):
    with pytest.raises(SetupError, match="split_tail with cluster_m="):
        SpecializedWgmmaAlgorithm(**{**CO128, **knobs, "split_tail": 2}).setup(problem(m=2048, n=2048, k=2048), SM90)


def test_overrides_compose_with_the_default_split():
    """A caller's clusters, ping-pong or three consumer warpgroups take the place of what the
    default chose for the tiling they replace (`yield_to`), unless the caller asked for both."""
    p = problem(m=1000, n=1000, k=4000)
    assert SpecializedWgmmaAlgorithm().selection_for(p, SM90).split_tail == 2
    for knobs in (dict(cluster_m=2), dict(schedule="pingpong", warpgroups_m=1, stages=4)):
        cfg = SpecializedWgmmaAlgorithm(**knobs).setup(p, SM90)
        assert cfg.batch.global_.split_tail == 0
    with pytest.raises(SetupError, match="split_tail with cluster_m=2"):
        SpecializedWgmmaAlgorithm(cluster_m=2, split_tail=2).setup(p, SM90)
    # The other way: a split asked for where the default clusters (2176 tiles, K = 8192).
    clustered = problem(m=8192, n=8704, k=8192)
    assert SpecializedWgmmaAlgorithm().selection_for(clustered, SM90).cluster_m == 2
    cfg = SpecializedWgmmaAlgorithm(split_tail=2).setup(clustered, SM90)
    assert cfg.batch.global_.split_tail == 2 and cfg.batch.global_.cluster_m == 1
    f8 = fp8_problem(1024, 1024, 8192)
    assert SpecializedWgmmaAlgorithm().selection_for(f8, SM90).promote_behind
    assert SpecializedWgmmaAlgorithm(warpgroups_m=3, stages=4).setup(f8, SM90).batch.global_.promotion.behind is False
    with pytest.raises(SetupError, match="promote_behind keeps three accumulator sets"):
        SpecializedWgmmaAlgorithm(warpgroups_m=3, stages=4, promote_behind=True).setup(f8, SM90)


def test_a_bad_count_is_refused():
    with pytest.raises(SetupError, match=r"split_tail=-1: a count of parts"):
        SpecializedWgmmaAlgorithm(**CO128, split_tail=-1).setup(problem(m=2048, n=2048, k=2048), SM90)
    for value in (2.5, "3", True):      # the knob's own check, when the algorithm is made
        with pytest.raises(TypeError, match="split_tail: expected an int"):
            SpecializedWgmmaAlgorithm(**CO128, split_tail=value)


def test_kept_scratch_is_zeroed_once_and_kept_per_queue(engine):
    """`Runtime.kept_scratch` (any backend): zero-filled when made, the same buffer for the next
    request on the queue (a kernel leaves it zero), replaced by a larger one where more is asked."""
    rt = engine.runtime
    first = rt.kept_scratch(1000, np.float32)
    assert first.size >= 1000 and not rt.to_host(first).any()
    assert rt.kept_scratch(10, np.float32) is first
    bigger = rt.kept_scratch(5000, np.float32)
    assert bigger is not first and bigger.size >= 5000 and not rt.to_host(bigger).any()
    assert rt.kept_scratch(1000, np.float32) is bigger


def test_opencl_refuses_a_co_resident_launch(engine):
    """OpenCL 1.2 cannot promise that all work-groups run at once: a kernel whose cubes wait for
    one another is refused there before anything is enqueued (none is planned for OpenCL today)."""
    if engine.backend != "opencl":
        pytest.skip("the CUDA runtime's cooperative launch is checked with a recording driver "
                    "(tests/codegen/test_cuda_launch.py) and on the GPU (test_numerics)")
    with pytest.raises(RuntimeError, match="co-resident"):
        engine.runtime.launch_converted(None, 1, 32, (), 0, True)


# -- the default ----------------------------------------------------------------------------------
@pytest.mark.parametrize("p, parts", [
    (fp8_problem(4096, 7168, 16384, "block"), 3),   # 1232 tiles of 192 x 128: a tail of 44, in 3
    (fp8_problem(8192, 8192, 8192, "block"), 2),    # a tail of 112 stays whole; the loop's copy
    (fp8_problem(1024, 1024, 8192), 2),             # 64 tiles of 128 x 128 in 2
    (problem(m=512, n=1024, k=16384), 2),           # 64 tiles of 64 x 128 in 2
    (problem(m=1000, n=1000, k=4000), 2),           # 64 tiles of 128 x 128 (rows of 2000 bytes)
    (problem(m=4096, n=4096, k=4096), 0),           # a tail of 116: more than half a wave
    (problem(m=1000, n=1000, k=256), 0),            # 4 slices: too short to split
    (problem(m=1000, n=1000, k=1000), 0),           # 16 slices: two parts of 8 ran slower than whole
    (problem(m=1000, n=1000, k=2000), 0),           # 32: so did two of 16 (31 each at k=4000 won)
    (problem(m=8192, n=8704, k=8192), 0),           # clusters of two (2176 tiles, a tail of 64: not split)
])
def test_default_splits_tails_of_at_most_half_a_wave(p, parts):
    sel = SpecializedWgmmaAlgorithm().selection_for(p, SM90)
    assert sel.split_tail == parts


@pytest.mark.parametrize("shape, name", [((2048, 2048, 8192), "specialized_wgmma"),
                                         ((1024, 1024, 8192), "specialized_wgmma"),
                                         ((256, 256, 65536), "split_k_wgmma")])
def test_auto_runs_long_fp8_products_in_one_kernel_where_its_parts_fill_half_the_device(shape, name):
    from gemm_engine.algorithms import REGISTRY
    auto = REGISTRY["auto"]()
    assert auto.chosen(auto.setup(fp8_problem(*shape), SM90)).name == name


@pytest.mark.parametrize("shape, name", [((512, 512, 32768), "specialized_wgmma"),
                                         ((256, 256, 65536), "specialized_wgmma"),
                                         ((1024, 1024, 8192), "specialized_wgmma"),
                                         ((1024, 1024, 4096), "pipelined_wgmma"),
                                         ((1024, 1024, 2048), "pipelined_wgmma"),
                                         ((4096, 4096, 4096), "specialized_wgmma")])
def test_auto_takes_the_split_kernel_for_int8_on_few_tiles_only_with_a_long_k(shape, name):
    """int8's pipelined kernel runs twice the 16-bit rate: the split kernel pays from K >= 8 max(M,
    N) on few tiles (rules.INT8_SPECIALIZED_MIN_K_RATIO); many tiles take it as before."""
    from gemm_engine.algorithms import REGISTRY
    from gemm_engine.dtypes import BY_NAME
    from gemm_engine.problem import Layout, MatmulProblem
    auto = REGISTRY["auto"]()
    i8 = BY_NAME["int8"]
    p = MatmulProblem(1, *shape, i8, i8, BY_NAME["int32"], Layout("row"), Layout("col"), 16, 16)  # int32 out, as matmul makes
    assert auto.chosen(auto.setup(p, SM90)).name == name


def test_auto_explains_why_the_split_kernel_beats_split_k():
    from gemm_engine.selector.conditions import split_k_worth_it
    why = split_k_worth_it(problem(m=1000, n=1000, k=4000), SM90)
    assert why is not None and "each split in 2 along K" in why


# -- nvcc ------------------------------------------------------------------------------------------
def split_sources() -> dict:
    """A split-tail kernel of each consumer count and accumulator kind."""
    out = {}
    for name, p, knobs in (("bf16-co256", problem(m=4096, n=4096, k=4096, dtype="float16"), CO256),
                           ("f16-64x128", problem(m=512, n=512, k=4096, dtype="float16"),
                            dict(warpgroups_m=1, tile_n=128, stages=6)),
                           ("fp8-behind", fp8_problem(4096, 4096, 4096, "row"), dict(CO128, promote_behind=True)),
                           ("fp8-block-192", fp8_problem(4096, 7168, 16384, "block"),
                            dict(warpgroups_m=3, tile_n=128, stages=3, promote_behind=False))):
        alg = SpecializedWgmmaAlgorithm(**knobs, split_tail=4)
        out[f"split-{name}"] = alg.render(alg.setup(p, SM90), SM90)
    return out


@pytest.mark.nvcc
@prefetched(lambda: jobs_of(split_sources(), archs_for(SpecializedWgmmaAlgorithm.min_arch)))
def test_sources_compile_without_serialized_wgmma():
    """ptxas serialized every wgmma of the kernel (C7515) when the tail's part sat under a plain
    ``if``; the schedule renders it as a loop (batch/split_tail.py)."""
    nvcc = nvcc_or_skip()
    results = compile_jobs(jobs_of(split_sources(), archs_for(SpecializedWgmmaAlgorithm.min_arch)), nvcc)
    assert not failures_of(results)
    for compiled in results.values():
        assert "C7514" not in compiled.log and "C7515" not in compiled.log, compiled.log[-2000:]


# -- numerics on an H100 / H200 --------------------------------------------------------------------
HALF_CASES = [  # (batch, m, n, k, dtype, knobs, parts on 132 multiprocessors): a tail of less than
    # a wave split in 2 to 4, whole waves then a split tail, a tail that stays whole, one K slice
    (1, 1000, 1000, 1000, "float16", dict(CO128, split_tail=4), 2),
    (1, 1024, 2048, 1024, "bfloat16", dict(CO256, split_tail=4), 2),
    (1, 4096, 2176, 512, "float16", dict(CO128, store_parts=1, split_tail=4), 4),
    (1, 4096, 4096, 256, "float16", dict(CO256, split_tail=4), 1),
    (2, 300, 1300, 777, "bfloat16", dict(CO256, split_tail=3), 3),
    (1, 3000, 2900, 64, "float16", dict(CO128, store_parts=1, split_tail=4), 1),
    (3, 129, 257, 1500, "float16", dict(warpgroups_m=1, tile_n=128, stages=6, split_tail=4), 4),
]


def parts(engine, tiles: int, most: int, slices: int) -> int:
    """The parts a tail tile is split into on this engine's device (batch/split_tail.py)."""
    grid = engine.runtime.device.compute_units
    tail = tiles % grid
    return min(most, grid // tail, slices) if tail else 1


def _twice(engine, call, check):
    """Two calls into fresh poisoned outputs: the second finds the kept flags as the first left
    them, and gives the same bits (the owner adds the later parts in part order)."""
    first = np.asarray(call())
    check(first)
    second = np.asarray(call())
    check(second)
    np.testing.assert_array_equal(second, first)


@pytest.mark.parametrize("case", HALF_CASES, ids=lambda c: "x".join(map(str, c[:4])) + f"-{c[4]}")
def test_numerics(rng, case):
    engine = sm90_engine()
    b, m, n, k, dtype, knobs, expected = case
    tm, tn = 64 * knobs["warpgroups_m"], knobs["tile_n"]
    if engine.runtime.device.compute_units == 132:   # H100 / H200 SXM: the case splits as listed
        assert parts(engine, b * -(-m // tm) * -(-n // tn), knobs["split_tail"], -(-k // 64)) == expected
    lead = (b,) if b > 1 else ()
    a, bb = random(rng, lead + (m, k), dtype), random(rng, lead + (k, n), dtype)
    da, db = padded(engine, a, "row", 0), padded(engine, bb, "row", 0)
    alg = SpecializedWgmmaAlgorithm(**knobs)

    def call():
        out = engine.runtime.to_device(np.full(lead + (m, n), np.nan, dtype=np_dtype(dtype)))
        engine.matmul(da, db, out=out, algorithm=alg)
        assert engine.last_choice[1].batch.global_.split_tail == knobs["split_tail"]
        return engine.runtime.to_host(out)
    _twice(engine, call, lambda got: assert_close(got, a, bb, dtype))


def test_fused_epilogue(rng):
    engine = sm90_engine()
    m, n, k = 700, 1100, 900       # 54 tiles: in two parts
    a, bb = random(rng, (m, k), "float16"), random(rng, (k, n), "float16")
    c, bias = random(rng, (m, n), "float16"), random(rng, (n,), "float16")
    alg = SpecializedWgmmaAlgorithm(**CO128, split_tail=2)
    ref = np.maximum(0.5 * (a.astype(np.float64) @ bb.astype(np.float64)) + 2.0 * c.astype(np.float64)
                     + bias.astype(np.float64), 0)

    def call():
        out = engine.matmul(engine.runtime.to_device(a), engine.runtime.to_device(bb), alpha=0.5, beta=2.0,
                            c=engine.runtime.to_device(c), bias=engine.runtime.to_device(bias), activation="relu",
                            algorithm=alg)
        return engine.runtime.to_host(out).astype(np.float64)
    _twice(engine, call, lambda got: np.testing.assert_array_less(np.linalg.norm(got - ref) / np.linalg.norm(ref), 2e-3))


def test_a_captured_split_call_replays_with_new_inputs(rng, monkeypatch):
    # A captured call's scratch has only its flags zeroed (the fill each replay runs): its partial
    # slots are poisoned with NaN (a fill the graph holds, so every replay runs it first), and every
    # replay must still add only the sums this call wrote.
    engine = sm90_engine()
    torch = pytest.importorskip("torch")
    real = engine.runtime.scratch

    def poisoned(count, dtype):
        x = real(count, dtype)
        if engine.runtime.capturing():
            x.fill(np.nan)
        return x
    monkeypatch.setattr(engine.runtime, "scratch", poisoned)
    m, n, k = 700, 1100, 900       # 54 tiles: in two parts
    alg = SpecializedWgmmaAlgorithm(**CO128, split_tail=2)
    da, db = (torch.empty(shape, dtype=torch.float16, device="cuda") for shape in ((m, k), (k, n)))
    out = torch.full((m, n), float("nan"), dtype=torch.float16, device="cuda")
    engine.matmul(da, db, out=out, algorithm=alg)            # compiled before the capture
    assert engine.last_choice[1].batch.global_.split_tail == 2
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        engine.matmul(da, db, out=out, algorithm=alg)
    for _ in range(3):
        a, bb = random(rng, (m, k), "float16"), random(rng, (k, n), "float16")
        da.copy_(torch.from_numpy(a)), db.copy_(torch.from_numpy(bb)), out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_close(out.cpu().numpy(), a, bb, "float16")


FP8_CASES = [  # (batch, m, n, k, scale kind, knobs): tails split in 2 to 4 on 132 multiprocessors
    (1, 1000, 1000, 1100, None, dict(CO128, promote_behind=True)),
    (2, 300, 900, 700, "row", dict(CO128, promote_behind=True)),
    (1, 3000, 500, 1500, "block", dict(warpgroups_m=3, tile_n=128, stages=3, promote_behind=False)),
    (1, 4096, 1664, 1024, "block", dict(warpgroups_m=3, tile_n=128, stages=3, promote_behind=False)),
    (1, 1300, 500, 2000, "block", dict(CO128, promote_behind=True)),
]


@pytest.mark.parametrize("case", FP8_CASES, ids=lambda c: "x".join(map(str, c[:4])) + f"-{c[4]}-{len(c[5])}")
def test_numerics_fp8(rng, case):
    b, m, n, k, kind, knobs = case
    a, bb, sa, sb, ref = fp8_operands(rng, b, m, n, k, kind)
    engine = sm90_engine()
    alg = SpecializedWgmmaAlgorithm(**knobs, split_tail=4)

    def check(got):
        got = np.asarray(got, np.float64)
        assert np.isfinite(got).all() and np.linalg.norm(got - ref) / np.linalg.norm(ref) < 2e-3
    _twice(engine, lambda: engine.matmul(a, bb, scale_a=sa, scale_b=sb, algorithm=alg), check)


def test_numerics_int8_exact(rng):
    engine = sm90_engine()
    m, n, k = 1100, 500, 2000      # 36 tiles: in three parts
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    bb = np.ascontiguousarray(rng.integers(-128, 128, (n, k), dtype=np.int8)).T
    ref = a.astype(np.int64) @ bb.astype(np.int64)
    alg = SpecializedWgmmaAlgorithm(**CO128, split_tail=4)
    _twice(engine, lambda: np.asarray(engine.matmul(a, bb, algorithm=alg)),
           lambda got: np.testing.assert_array_equal(got.astype(np.int64), ref))


def test_auto_int8_long_k_runs_split_and_exact(rng):
    """The shape auto now sends to the split kernel for int8 (K >= 8 max(M, N)), through the
    default path: exact int32, twice the same."""
    engine = sm90_engine()
    m, n, k = 512, 512, 32768          # 16 tiles of 128 x 128, each split in 4
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    bb = np.ascontiguousarray(rng.integers(-128, 128, (n, k), dtype=np.int8)).T
    ref = a.astype(np.int64) @ bb.astype(np.int64)
    da, db = engine.runtime.to_device(a), engine.runtime.to_device(bb)

    def call():
        got = engine.runtime.to_host(engine.matmul(da, db))
        alg, cfg = engine.last_choice
        assert alg.name == "specialized_wgmma" and cfg.batch.global_.split_tail == 4
        return got
    _twice(engine, call, lambda got: np.testing.assert_array_equal(got.astype(np.int64), ref))


def test_calls_on_two_streams_keep_a_scratch_each(rng):
    """Split kernels queued on two streams at once: each stream has its own kept workspace (the
    flags and partial slots of one would otherwise be shared by kernels running together)."""
    engine = sm90_engine()
    cp = pytest.importorskip("cupy")
    m, n, k = 1000, 1000, 4000              # 64 tiles, split in 2 by default
    pairs = [(random(rng, (m, k), "float16"), random(rng, (k, n), "float16")) for _ in range(2)]
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    outs = [[], []]
    for _ in range(4):
        for i, (stream, (a, bb)) in enumerate(zip(streams, pairs)):
            with stream:
                outs[i].append(engine.matmul(cp.asarray(a), cp.asarray(bb)))
    assert engine.last_choice[1].batch.global_.split_tail == 2
    for stream in streams:
        stream.synchronize()
    for (a, bb), results in zip(pairs, outs):
        for got in results:
            assert_close(cp.asnumpy(got), a, bb, "float16")


def test_a_runtime_without_a_cooperative_launch_refuses_the_split_kernel_when_planning():
    """The planner checks `Runtime.co_resident_launch` before compiling: the refusal is a
    SetupError that names the way out, not a launch-time failure on every call."""
    from gemm_engine.call.plan import Planner

    class NoCooperative:
        backend, co_resident_launch = "cuda", False
        dialect = SM90

        def kernel(self, source, name):
            raise AssertionError("compiled before the refusal")
    alg = SpecializedWgmmaAlgorithm(**CO128, split_tail=2)
    p = problem(m=1000, n=1000, k=4000)
    with pytest.raises(SetupError, match="needs a cooperative launch.*choose split_tail=0"):
        Planner(NoCooperative()).plan(alg, p, alg.setup(p, SM90))
