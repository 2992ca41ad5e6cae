"""What ``help()`` and a packaging tool see: every argument of the entry points documented, every
public name with a docstring, the license and the typing marker shipped."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import gemm_engine

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("fn", [gemm_engine.matmul, gemm_engine.Engine.matmul, gemm_engine.grouped_matmul,
                                gemm_engine.Engine.grouped_matmul],
                         ids=["matmul", "Engine.matmul", "grouped_matmul", "Engine.grouped_matmul"])
def test_help_documents_every_argument(fn):
    doc = inspect.getdoc(fn)
    documented = set()
    for line in doc.splitlines():    # "a, b:   ..." / "beta, c:  ..." entries at the left margin
        head = re.match(r"^([a-z_]+(?:, [a-z_]+)*):\s", line)
        if head:
            documented |= set(head.group(1).split(", "))
    params = [p for p in inspect.signature(fn).parameters if p != "self"]
    missing = [p for p in params if p not in documented and f"``{p}" not in doc]
    assert not missing, f"{fn.__qualname__}'s docstring does not document {missing}"


def test_engine_matmul_says_which_device():
    assert "this\n    engine's device" in gemm_engine.Engine.matmul.__doc__ or "engine's device" in \
        inspect.getdoc(gemm_engine.Engine.matmul)
    assert "default engine" not in inspect.getdoc(gemm_engine.Engine.matmul).splitlines()[0]


@pytest.mark.parametrize("name", gemm_engine.__all__)
def test_public_names_have_docstrings(name):
    obj = getattr(gemm_engine, name)
    if not (inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismodule(obj)):
        pytest.skip(f"{name} is a {type(obj).__name__}, not a class, function or module")
    doc = inspect.getdoc(obj) or ""
    assert len(doc.split()) >= 8, f"gemm_engine.{name} has no real docstring: {doc!r}"


def test_license_and_typing_marker_ship():
    import tomllib
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = meta["project"]
    assert project["license"] == "MIT" and (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert (ROOT / "gemm_engine" / "py.typed").exists()
    assert "py.typed" in meta["tool"]["setuptools"]["package-data"]["gemm_engine"]
    assert any(c.startswith("Programming Language :: Python :: 3.1") for c in project["classifiers"])
    # Each backend extra names a package that provides the backend.
    extras = project["optional-dependencies"]
    assert extras["cuda12"][0].startswith("cupy-cuda12x") and extras["cuda13"][0].startswith("cupy-cuda13x")
    assert extras["opencl-cpu"][0].startswith("pyopencl[pocl]")


# -- the distribution's own name (issue 35) -------------------------------------------------------
def test_distribution_name_is_ours_and_every_hint_uses_it():
    """pyproject.toml, the package and the README agree on the name; no install hint names
    ``gemm_engine[...]`` / ``gemm-engine[...]`` (the index's gemm-engine is another project, so a
    pip install of that name fetches it)."""
    import tomllib
    from gemm_engine.version import DISTRIBUTION, extra_hint
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION == "composable-gemm"
    assert set(project["optional-dependencies"]) >= {"opencl", "cuda12", "cuda13", "plot", "test"}
    texts = [p for p in (ROOT / "gemm_engine").rglob("*.py")] + [ROOT / "README.md", ROOT / "scripts" / "setup.sh", ROOT / ".ci" / "run"]
    wrong = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in texts
             for m in re.finditer(r"gemm[_-]engine\[\w[\w-]*\]|pip install [\"']?gemm[_-]engine\b", p.read_text())]
    assert not wrong, wrong
    readme = (ROOT / "README.md").read_text()
    assert f"`{DISTRIBUTION}`" in readme and "not on the package index" in readme
    # A hint names what the extra brings (installable anywhere) and the extra by our name.
    hint = extra_hint("opencl", "pyopencl")
    assert "pip install pyopencl" in hint and f"{DISTRIBUTION}[opencl]" in hint


def test_sdist_ships_none_of_the_test_suite():
    """The tests read the repository's README, .ci/, bench/ and scripts/: a source distribution
    carries none of them (MANIFEST.in prunes tests/, which setuptools would half-include).
    The sdist itself is built when this Python's setuptools can build the project (>= 77)."""
    assert "prune tests" in (ROOT / "MANIFEST.in").read_text().splitlines()
    setuptools = pytest.importorskip("setuptools")
    if tuple(int(x) for x in setuptools.__version__.split(".")[:2]) < (77, 0):
        pytest.skip(f"setuptools {setuptools.__version__} here; the build needs >= 77 (PEP 639 license)")
    import subprocess
    import sys
    import tarfile
    import tempfile
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, "-c", f"from setuptools import build_meta as b; b.build_sdist({out!r})"],
                       cwd=ROOT, check=True, capture_output=True)
        (sdist,) = Path(out).glob("composable_gemm-*.tar.gz")
        names = tarfile.open(sdist).getnames()
    assert any(n.endswith("gemm_engine/__init__.py") for n in names)
    assert not [n for n in names if "/tests/" in n], [n for n in names if "/tests/" in n][:5]


# -- the README's "How it is built" tree and the paths the README names ----------------------------
def test_readme_tree_is_the_module_tree_script_output():
    """The tree a reader sees is the package's: scripts/module_tree.py's output, verbatim."""
    import subprocess
    import sys
    readme = (ROOT / "README.md").read_text()
    fence = re.search(r"^## How it is built\n\n```\n(.*?)```\n", readme, re.M | re.S)
    assert fence, "the README's \"How it is built\" section no longer opens with the tree's code fence"
    tree = subprocess.run([sys.executable, str(ROOT / "scripts" / "module_tree.py")], capture_output=True,
                          text=True, check=True).stdout
    assert fence.group(1) == tree, ("the README's tree differs from the package's: paste "
                                    "`python3 scripts/module_tree.py` into its code fence")


def test_readme_names_only_files_that_exist():
    """Every file path the README names (with a folder: `bench/suite.py`, `selector/rules.py`)
    lies in the checkout, from its root or from gemm_engine/ (a module moved is a path to fix)."""
    readme = (ROOT / "README.md").read_text()
    paths = set(re.findall(r"(?<![\w./<-])((?:[\w.-]+/)+[\w.-]+\.(?:py|sh|md))\b", readme))
    paths |= set(re.findall(r"(?<![\w./-])(gemm_engine/(?:[\w]+/)*)", readme))
    assert len(paths) > 30, sorted(paths)
    missing = sorted(p for p in paths if not (ROOT / p).exists() and not (ROOT / "gemm_engine" / p).exists())
    assert not missing, f"the README names paths that do not exist: {missing}"
