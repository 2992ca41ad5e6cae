"""The package's shape: no import cycles (lazy imports inside functions included), no module reaching
into another's private names, no module much over 400 lines."""
from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "gemm_engine"
MAX_LINES = 420


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: pathlib.Path, modules) -> set[str]:
    """The package modules ``name`` imports anywhere in its text (relative imports)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                found.add(candidate if candidate in modules else target)
    return {m for m in found if m in modules and m != name}


def test_no_import_cycles():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    state, cycles = {}, []

    def visit(node, stack):
        state[node] = "open"
        for dep in sorted(graph[node]):
            if state.get(dep) == "open":
                cycles.append(" -> ".join(stack[stack.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep, stack + [dep])
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


#: Private names of other libraries read on purpose, each with its reason.
ALLOWED_PRIVATE = {
    # torch's C accessor of the current raw stream (Triton launches with it): the public
    # torch.cuda.current_stream builds a Stream in Python, microseconds of a small call's budget.
    "torch._C",
}


def test_no_private_names_across_modules():
    offenders = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                offenders += [f"{name}:{node.lineno} imports {a.name}" for a in node.names
                              if a.name.startswith("_") and not a.name.startswith("__")]
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Name) and node.value.id not in ("self", "cls")
                    and f"{node.value.id}.{node.attr}" not in ALLOWED_PRIVATE):
                offenders.append(f"{name}:{node.lineno} reads {node.value.id}.{node.attr}")
    assert not offenders, "\n".join(offenders)


def test_modules_stay_small():
    big = {name: len(path.read_text().splitlines()) for name, path in _modules().items()}
    big = {k: v for k, v in big.items() if v > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines: {big}"


def test_cited_bench_files_exist():
    """Comments, tests and the README cite measurements by path: each path must exist (a glob
    such as ``h100_2026-11-21_tf32*.md`` must match something), the current tables of
    ``bench/results/<device>/`` included."""
    import glob
    import re
    root = pathlib.Path(__file__).resolve().parents[1]
    texts = [p for p in root.joinpath("gemm_engine").rglob("*.py")] + list(root.joinpath("tests").rglob("*.py"))
    texts.append(root / "README.md")
    missing = []
    for path in texts:
        for cited in re.findall(r"bench/[A-Za-z0-9_.*{},/-]+\.(?:py|sh|md|json|txt|png)", path.read_text()):
            if "{" in cited:
                head, alts, tail = re.match(r"(.*)\{(.*)\}(.*)", cited).groups()
                paths = [head + a + tail for a in alts.split(",")]
            else:
                paths = [cited]
            missing += [f"{path.relative_to(root)}: {p}" for p in paths if not glob.glob(str(root / p))]
    assert not missing, "cited files that do not exist:\n" + "\n".join(missing)
