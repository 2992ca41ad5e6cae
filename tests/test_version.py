"""version.py: the one version string, which the package exports and pyproject.toml reads."""
from __future__ import annotations

import pathlib
import re

import gemm_engine
from gemm_engine.version import __version__

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_version_is_pep440_release_and_exported():
    assert re.fullmatch(r"\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?(?:\.dev\d+)?", __version__)
    assert gemm_engine.__version__ == __version__


def test_pyproject_reads_it_from_this_module():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in text
    assert 'version = {attr = "gemm_engine.version.__version__"}' in text
