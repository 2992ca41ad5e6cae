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
