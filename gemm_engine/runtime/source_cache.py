"""Rendered kernel sources kept on disk, keyed by the kernel's config and the package's code.

Why: with the compilers' binary caches warm (runtime/base.py), what a fresh process still spends on
the first call of a problem class is choosing and rendering: rendering a Hopper kernel is tens of
milliseconds of Python (bf16 8192 x 28672 x 4096, specialized_wgmma: 71 ms on the 2-core CI box),
against a few for the choice. A source cached here is read instead (then the binary caches find
its kernels by their source).

The key is the config's text (`KernelConfig`'s repr: every field the source depends on), the
dialect, the epilogue's rendered helpers (what a user's activation renders) and a fingerprint of
the package's code (its version and every module's size and time), so an edited checkout never
reads a stale source. Configs with parts from outside the package (a user's algorithm, dispatch
order, activation or a component swapped into a slot, whose code the fingerprint does not
cover) are not cached. Files are
written under a temporary name and renamed, and carry a hash of their text: processes share the
folder, and a torn or foreign file is rendered again, never used. The folder: the tuning cache's
($GEMM_ENGINE_CACHE_DIR), ``sources/``; ``GEMM_ENGINE_SOURCE_CACHE=0`` turns it off.
"""
from __future__ import annotations

import hashlib
import os
import pathlib
import tempfile

ENV = "GEMM_ENGINE_SOURCE_CACHE"
_PACKAGE = "gemm_engine"
_fingerprint: list = []


def code_fingerprint() -> str:
    """The package's version and the size and modification time of each of its modules."""
    if not _fingerprint:
        from ..version import __version__
        root = pathlib.Path(__file__).resolve().parent.parent
        items = [__version__]
        for path in sorted(root.rglob("*.py")):
            st = path.stat()
            items.append(f"{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}")
        _fingerprint.append(hashlib.sha256("\n".join(items).encode()).hexdigest())
    return _fingerprint[0]


def _ours(obj) -> bool:
    return type(obj).__module__.split(".")[0] == _PACKAGE


def _our_class(cls) -> bool:
    return cls is None or isinstance(cls, str) or cls.__module__.split(".")[0] == _PACKAGE


def source_key(algorithm, cfg, dialect) -> str | None:
    """The cache key of the source of ``algorithm`` (concrete) set up as ``cfg`` under ``dialect``,
    or None where it must not be cached."""
    if not (cfg.algorithm.startswith(_PACKAGE + ".") and _our_class(type(algorithm))
            and all(_our_class(c) for c in type(algorithm).slots().values())):
        return None
    epilogue = cfg.batch.epilogue
    act = epilogue.activation
    while act is not None and hasattr(act, "of"):
        if not _ours(act):
            return None
        act = act.of
    if act is not None and not _ours(act):
        return None
    dispatch = getattr(cfg.batch, "dispatch", None)
    if dispatch is not None and not _ours(dispatch):
        return None
    text = repr(cfg)
    if " object at 0x" in text:          # a part without a value repr: no stable key
        return None
    parts = (code_fingerprint(), repr(dialect.key), dialect.device.name, text, epilogue.helpers(dialect, cfg.batch.result))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


class SourceCache:
    """The folder of cached sources (see the module docstring); never raises on I/O."""

    def __init__(self, folder: str | None = None):
        if folder is None:
            from ..tuning.cache import cache_dir
            folder = os.path.join(cache_dir(), "sources")
        self.folder = folder
        self.enabled = os.environ.get(ENV, "1") != "0"

    def _path(self, key: str) -> str:
        return os.path.join(self.folder, f"{key}.src")

    def get(self, key: str | None) -> str | None:
        if key is None or not self.enabled:
            return None
        try:
            with open(self._path(key), "rb") as f:
                data = f.read()
        except OSError:
            return None
        digest, text = data[:64], data[64:]
        if digest != hashlib.sha256(text).hexdigest().encode():
            return None
        return text.decode()

    def put(self, key: str | None, source: str) -> None:
        if key is None or not self.enabled:
            return
        text = source.encode()
        try:
            os.makedirs(self.folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".source_")
            with os.fdopen(fd, "wb") as f:
                f.write(hashlib.sha256(text).hexdigest().encode() + text)
            os.replace(tmp, self._path(key))
        except OSError:
            pass     # a read-only folder costs a render per process, not a failure
