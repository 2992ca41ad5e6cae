"""A snapshot of every selection the package makes for a spread of problems on nominal devices (no
GPU): auto's verdict per rule, each concrete algorithm's setup (its selection and a digest of its
whole config) and its tuning space. Run it before and after a change that must not move any choice
(PYTHONPATH names the checkout whose gemm_engine it imports), and diff:

    PYTHONPATH=$OLD python tests/selector/selection_snapshot.py > before.json
    PYTHONPATH=. python tests/selector/selection_snapshot.py > after.json
    python tests/selector/selection_snapshot.py --diff before.json after.json

About 10 s and 75 MB of JSON (72,432 entries). The selector/ move (bench/SELECTION_NOTES.md, "The
check that no choice moved") left every entry unchanged.
"""
from __future__ import annotations

import hashlib
import json
import sys

from gemm_engine.algorithms import REGISTRY, AlgorithmFamily
from gemm_engine.algorithms.auto import decide
from gemm_engine.codegen.device import DeviceInfo, nominal_cuda_device
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.dtypes import BY_NAME, FLOAT32, INT32, BFLOAT16, FLOAT16
from gemm_engine.epilogue.activations import ACTIVATIONS
from gemm_engine.epilogue.spec import Epilogue
from gemm_engine.errors import SetupError
from gemm_engine.problem import Layout, MatmulProblem

#: Concrete algorithms that were renamed when their family name became a family (old: new).
RENAMED = {"specialized": "specialized_unit", "ordered": "ordered_unit"}

DEVICES = {
    "sm_90": nominal_cuda_device(9, 0),
    "sm_80": nominal_cuda_device(8, 0),
    "opencl_cpu": DeviceInfo(backend="opencl", name="nominal opencl", compute_units=8,
                             max_shared_memory=64 * 1024, max_threads_per_cube=1024, plane_size=1),
    "opencl_gpu": DeviceInfo(backend="opencl", name="nominal opencl gpu", compute_units=132,
                             max_shared_memory=48 * 1024, max_threads_per_cube=1024, plane_size=32),
}

SHAPES = [
    (1, 4096, 4096, 4096), (1, 8192, 8192, 8192), (1, 2048, 2048, 2048), (1, 1024, 1024, 1024),
    (1, 1000, 1000, 1000), (1, 4093, 4093, 4093), (1, 512, 512, 512), (1, 256, 256, 256),
    (1, 1024, 1024, 4096), (1, 1024, 1024, 8192), (1, 512, 1024, 16384), (1, 1000, 1000, 4000),
    (1, 64, 64, 65536), (1, 16, 8192, 8192), (1, 8192, 8192, 64), (1, 128, 14336, 4096),
    (1, 8192, 12288, 4096), (1, 1024, 1000, 1024), (1, 1, 8192, 8192), (1, 8192, 1, 8192),
    (1, 1, 4096, 14336), (1, 1, 300, 64), (1, 1, 1, 5), (64, 512, 512, 512), (256, 128, 128, 128),
    (1, 65, 63, 33), (3, 37, 45, 2000), (2, 129, 67, 200), (1, 4096, 7168, 16384), (1, 768, 768, 768),
    # issue 28: decode batches, wave-quantized squares, short and long K
    (1, 2, 4096, 4096), (1, 8, 14336, 4096), (1, 64, 4096, 4096), (1, 96, 4096, 14336), (1, 3000, 3000, 3000),
    (1, 1536, 1536, 1536), (1, 5101, 6008, 64), (1, 128, 128, 262144),
]
LAYOUTS = [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col")]


def kinds():
    """(label, lhs, rhs, out, precision, epilogue) per element kind."""
    f8 = BY_NAME["float8_e4m3fn"]
    yield "f32", FLOAT32, FLOAT32, FLOAT32, "default", None
    yield "tf32", FLOAT32, FLOAT32, FLOAT32, "tf32", None
    yield "f16", FLOAT16, FLOAT16, FLOAT16, "default", None
    yield "bf16", BFLOAT16, BFLOAT16, BFLOAT16, "default", None
    yield "f64", BY_NAME["float64"], BY_NAME["float64"], BY_NAME["float64"], "default", None
    yield "i8", BY_NAME["int8"], BY_NAME["int8"], INT32, "default", None
    yield "e4m3", f8, f8, BFLOAT16, "default", Epilogue(lhs_scale="vector", rhs_scale="vector")
    yield "e4m3_f32", f8, f8, FLOAT32, "default", None
    yield "e5m2", BY_NAME["float8_e5m2"], BY_NAME["float8_e5m2"], FLOAT16, "default", None
    yield "e4m3_block", f8, f8, BFLOAT16, "default", Epilogue(lhs_scale="block", rhs_scale="block")


def problems():
    relu = Epilogue(bias=BFLOAT16, activation=ACTIVATIONS["relu"]())
    for label, lhs, rhs, out, precision, epilogue in kinds():
        wide = 16 // lhs.itemsize
        for shape in SHAPES:
            layouts = LAYOUTS if shape[1] in (1000, 4096, 1, 65, 8192) else LAYOUTS[:2]
            for la, lb in layouts:
                for align in ((wide, wide), (1, 1)) if shape[1] in (4093, 65, 1000) else ((wide, wide),):
                    kw = dict(precision=precision)
                    if epilogue is not None:
                        kw["epilogue"] = epilogue
                    yield (f"{label} {shape} {la}/{lb} align {align}",
                           MatmulProblem(*shape, lhs, rhs, out, Layout(la), Layout(lb), *align, **kw))
        if label in ("bf16", "f16", "f32"):
            for shape in ((1, 8192, 8192, 64), (1, 4096, 4096, 4096)):
                yield (f"{label} {shape} bias+relu", MatmulProblem(*shape, lhs, rhs, out, lhs_align=wide,
                                                                   rhs_align=wide, epilogue=relu))


def shown(preset) -> str:
    """A preset or selection as text (a mapping's keys sorted: their order means nothing)."""
    if isinstance(preset, dict):
        return repr(sorted(preset.items()))
    return repr(preset)


def digest(obj) -> str:
    return hashlib.sha1(repr(obj).encode()).hexdigest()[:12]


def concrete():
    for name, cls in sorted(REGISTRY.items()):
        if not issubclass(cls, AlgorithmFamily):
            yield RENAMED.get(name, name), cls


def snapshot() -> dict:
    out = {}
    auto = REGISTRY["auto"]()
    algs = [(name, cls()) for name, cls in concrete()]
    for dev_name, device in DEVICES.items():
        dialect = dialect_for(device)
        for label, problem in problems():
            key = f"{dev_name} | {label}"
            _, _, verdicts = decide(auto.members, problem, dialect, everything=True)
            out[f"{key} | auto"] = [[v.name, v.verdict, v.reason, shown(v.config.selection) if v.config else None]
                                    for v in verdicts]
            for name, alg in algs:
                try:
                    cfg = alg.setup(problem, dialect)
                    entry = [shown(cfg.selection), digest(cfg.batch)]
                except SetupError as exc:
                    entry = ["refused", str(exc)]
                try:
                    entry.append([shown(s) for s in alg.tuning_space(problem, dialect)])
                except Exception as exc:  # noqa: BLE001 -- recorded: a change must not move it either
                    entry.append(f"{type(exc).__name__}: {exc}")
                out[f"{key} | {name}"] = entry
    return out


def diff(before_path: str, after_path: str) -> int:
    before, after = (json.load(open(p)) for p in (before_path, after_path))
    keys = sorted(set(before) | set(after))
    changed = [k for k in keys if before.get(k) != after.get(k)]
    for k in changed[:40]:
        print(k, "\n  before:", before.get(k), "\n  after: ", after.get(k))
    print(f"{len(keys)} entries, {len(changed)} differ")
    return 1 if changed else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--diff"]:
        sys.exit(diff(*sys.argv[2:4]))
    json.dump(snapshot(), sys.stdout, indent=0, sort_keys=True)
