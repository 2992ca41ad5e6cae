"""The package version (pyproject.toml reads it; the tuning cache records it)."""
__version__ = "0.2.0"
