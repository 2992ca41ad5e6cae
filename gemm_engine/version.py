"""The package version (pyproject.toml reads it; the tuning cache records it) and its distribution
name: the import name is ``gemm_engine``, the name pip knows it by is ``composable-gemm`` (the
package index's ``gemm-engine`` is an unrelated project). It is not published on the index: an
extra is installed from a checkout (``pip install '.[opencl]'``), so the hints name the packages
an extra brings as well."""
__version__ = "0.2.0"
DISTRIBUTION = "composable-gemm"


def extra_hint(extra: str, packages: str) -> str:
    """How to install what an extra brings: ``pip install PACKAGES`` (the composable-gemm[EXTRA] extra)."""
    return f"pip install {packages}, or the {DISTRIBUTION}[{extra}] extra of this package's checkout"
