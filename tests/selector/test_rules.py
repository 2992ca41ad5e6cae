"""selector/rules.py: auto's rule table and the unranked list account for every built-in, name only
registered algorithms; and the selector stays below the algorithms (it never imports them) and cites
the bench doc, not result files."""
from __future__ import annotations

import ast
import pathlib

from gemm_engine.algorithms import REGISTRY, AlgorithmFamily
from gemm_engine.selector.families import FAMILIES
from gemm_engine.selector.rules import RULES, UNRANKED, rule_for, unranked_reason

SELECTOR = pathlib.Path(__file__).resolve().parents[2] / "gemm_engine" / "selector"
ALGORITHMS = SELECTOR.parent / "algorithms"


def test_every_built_in_is_ranked_unranked_a_family_or_a_family_member():
    ranked = {r.algorithm for r in RULES}
    unranked = {u.algorithm for u in UNRANKED}
    members = {m.name for r in RULES if issubclass(REGISTRY[r.algorithm], AlgorithmFamily)
               for m in REGISTRY[r.algorithm]().members}
    assert not ranked & unranked
    assert ranked | unranked | members | set(FAMILIES) | {"auto"} == set(REGISTRY)


def test_lookups():
    assert rule_for("skinny").algorithm == "skinny" and rule_for("nope") is None
    assert "simple_unit" in unranked_reason("specialized_unit")
    assert unranked_reason("someone_elses") == "not one of auto's rules: run only when named"


def _imports(path: pathlib.Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            out.append("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


def test_the_selector_never_imports_the_algorithms_and_imports_only_at_the_top():
    for path in SELECTOR.glob("*.py"):
        assert not [m for m in _imports(path) if "algorithms" in m], path.name
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert not [n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))], \
                    f"{path.name}: {node.name} imports inside a function"


def test_selector_and_algorithms_cite_the_bench_doc_not_result_files():
    for path in [*SELECTOR.glob("*.py"), *ALGORITHMS.glob("*.py")]:
        text = path.read_text()
        assert "bench/results" not in text and "h100_20" not in text, path.name
