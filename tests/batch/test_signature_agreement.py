"""The one kernel signature (codegen/signature.py) agrees with the kernels every built-in algorithm
renders: for each registered algorithm on nominal devices (A100, H100, OpenCL; no device needed),
each kernel a call launches (`Algorithm.launches`) declares exactly ``signature.names``, in order,
each parameter declared as the signature renders it (a by-value block as a structure of its
declared size); ``signature.pack`` gives one value per parameter (by-value blocks as ``bytes`` of
their size), the `Packer` of a plan the same tuple, and ``positions`` the places of the arrays."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pytest

from gemm_engine.algorithms import REGISTRY
from gemm_engine.batch.base import KEPT_SCRATCH, KERNEL_NAME
from gemm_engine.codegen.signature import ARRAY, BY_VALUE, INDEX, SCALAR
from gemm_engine.codegen.dialect import dialect_for
from gemm_engine.errors import SetupError
from gemm_engine.problem import MatmulProblem
from renders import MUST_SET_UP, NOMINAL_DEVICES, coverage_problems, short_name


@dataclass
class Case:
    problem: MatmulProblem
    alg: object
    cfg: object
    source: str


@lru_cache(maxsize=None)
def cases(device: str, name: str) -> tuple[tuple[Case, ...], tuple[str, ...]]:
    """(the problems ``name`` sets up and renders on ``device``, the refusals of the others)."""
    found, refused = [], []
    for problem in coverage_problems():
        alg = REGISTRY[name]()
        dialect = dialect_for(NOMINAL_DEVICES[device])   # a fresh dialect per render: no helper state shared
        try:
            cfg = alg.setup(problem, dialect)
        except SetupError as exc:
            refused.append(f"{short_name(problem)}: {exc}")
            continue
        found.append(Case(problem, alg, cfg, alg.render(cfg, dialect)))
    return tuple(found), tuple(refused)


def _split_params(text: str) -> list[str]:
    """The comma-separated declarations of a parameter list, split at top-level commas only."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([<":
            depth += 1
        elif ch in ")]>":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    if text[start:].strip():
        out.append(text[start:])
    return [" ".join(p.split()) for p in out]


def kernel_parameters(source: str, kernel: str) -> list[list[str]]:
    """The declarations of every ``void <kernel>(...)`` in ``source`` (one list per occurrence)."""
    found = []
    for m in re.finditer(rf"\bvoid\s+{re.escape(kernel)}\s*\(", source):
        depth, i = 1, m.end()
        while depth:
            assert i < len(source), f"unbalanced parameter list of {kernel}"
            depth += {"(": 1, ")": -1}.get(source[i], 0)
            i += 1
        found.append(_split_params(source[m.end():i - 1]))
    return found


def _name(declaration: str) -> str:
    return re.findall(r"[A-Za-z_]\w*", declaration)[-1]


def _values(signature) -> dict:
    """A value per parameter, by kind: arrays a dummy object, indices 1, scalars 1.0, by-value
    blocks zero bytes of their size."""
    values = {}
    for p in signature.params:
        values[p.name] = {ARRAY: lambda p: object(), INDEX: lambda p: 1, SCALAR: lambda p: 1.0,
                          BY_VALUE: lambda p: bytes(p.size)}[p.kind](p)
    return values


ALGORITHMS = sorted(REGISTRY)
PAIRS = [pytest.param(dev, name, id=f"{dev}-{name}") for dev in NOMINAL_DEVICES for name in ALGORITHMS]


def _cases_or_skip(device, name):
    found, refused = cases(device, name)
    if not found:
        pytest.skip(f"{name} sets up none of the problems on {device}; first refusal: {refused[0]}")
    return found


@pytest.mark.parametrize("device, name", PAIRS)
def test_every_kernel_declares_the_signature(device, name):
    for case in _cases_or_skip(device, name):
        signature = case.alg.signature(case.cfg)
        expected = [" ".join(p.render(dialect_for(NOMINAL_DEVICES[device])).split()) for p in signature.params]
        kernels = [launch.name for launch in case.alg.launches(case.cfg, case.problem)]
        assert KERNEL_NAME in kernels, f"{name} {short_name(case.problem)}: launches {kernels}"
        for kernel in dict.fromkeys(kernels):
            declared = kernel_parameters(case.source, kernel)
            assert declared, f"{name} {short_name(case.problem)}: no `void {kernel}(` in the source"
            for params in declared:
                where = f"{name} ({case.alg.chosen(case.cfg).name}) {short_name(case.problem)} kernel {kernel}"
                assert [_name(p) for p in params] == list(signature.names), where
                assert params == expected, where
        for p in signature.params:
            if p.kind == BY_VALUE:   # the structure it is declared as holds exactly its size
                type_name = re.search(rf"(\w+)\s+{p.name}\s*$", expected[signature.names.index(p.name)]).group(1)
                definitions = [line for line in case.source.splitlines()
                               if re.match(r"\s*(typedef\s+)?struct\b", line) and re.search(rf"\b{type_name}\b", line)]
                assert len(definitions) == 1, f"{name} {short_name(case.problem)}: {type_name} defined {definitions}"
                assert f"unsigned char bytes[{p.size}];" in definitions[0], definitions[0]
                assert f"({p.align})" in definitions[0], definitions[0]   # __align__(A) / aligned(A)


@pytest.mark.parametrize("device, name", PAIRS)
def test_pack_and_positions_follow_the_signature(device, name):
    for case in _cases_or_skip(device, name):
        signature = case.alg.signature(case.cfg)
        where = f"{name} {short_name(case.problem)}"
        values = _values(signature)
        packed = signature.pack(values)
        assert isinstance(packed, tuple) and len(packed) == len(signature.params), where
        for p, v in zip(signature.params, packed):
            if p.kind == BY_VALUE:
                assert type(v) is bytes and len(v) == p.size, f"{where}: {p.name}"
            elif p.kind == ARRAY:
                assert v is values[p.name], f"{where}: {p.name}"
            elif p.kind == INDEX:
                assert type(v) is np.int64 and v == 1, f"{where}: {p.name}"
            else:
                assert isinstance(v, (np.float32, np.float64)) and v == 1.0, f"{where}: {p.name}"
        # A plan's packer (the sizes fixed, the rest per call) packs the same tuple.
        fixed = {n: values[n] for n in ("M", "N", "K", "batch") if n in values}
        assert signature.packer(fixed).pack(values) == packed, where
        # Where the operands' addresses sit (launches that refill only those).
        arrays = ("lhs_base", "rhs_base", "out_base")
        positions = signature.positions(arrays)
        assert [signature.names[i] for i in positions] == list(arrays), where
        assert all(signature.params[i].kind == ARRAY for i in positions), where
        assert signature.params[positions[2]].writable and not signature.params[positions[0]].writable, where
        # A value missing is named.
        with pytest.raises(KeyError, match="out_base"):
            signature.pack({k: v for k, v in values.items() if k != "out_base"})


def test_tensor_map_algorithms_end_with_their_maps():
    """specialized_wgmma's signature: the partitioned one, then lhs_map / rhs_map (128 bytes each),
    out_map where its writer stores through TMA, and the kept scratch where it splits its tail."""
    found = _cases_or_skip("sm_90", "specialized_wgmma")
    for case in found:
        params = case.alg.signature(case.cfg).params
        maps = [("lhs_map", BY_VALUE, 128), ("rhs_map", BY_VALUE, 128)]
        if case.cfg.batch.global_.writer.tma_store:
            maps.append(("out_map", BY_VALUE, 128))
        if case.cfg.batch.global_.split_tail:
            maps.append((KEPT_SCRATCH, ARRAY, 0))
        assert [(p.name, p.kind, p.size) for p in params[-len(maps):]] == maps
        assert "const __grid_constant__ ge_bytes128_a64 lhs_map" in case.source


@pytest.mark.parametrize("device", NOMINAL_DEVICES)
def test_the_agreement_is_checked_on_every_device(device):
    checked = {name for name in ALGORITHMS if cases(device, name)[0]}
    missing = MUST_SET_UP[device] - checked
    assert not missing, f"on {device} these set up none of the problems: " + "; ".join(
        f"{n}: {cases(device, n)[1][:1]}" for n in sorted(missing))
    assert len(checked) >= len(MUST_SET_UP[device])
