"""Binaries kept on disk by more than one process: each file is the SHA-256 of its payload followed
by the payload, written under a temporary name and renamed (atomic). A torn or foreign file reads
as missing, so it is built again, never loaded; a folder that cannot be written costs a build per
process, not a failure. NVRTC's cubins (runtime/nvrtc.py) and the OpenCL kernels' SASS
(runtime/sass.py) are kept this way."""
from __future__ import annotations

import hashlib
import os
import tempfile


def read_checked(path: str) -> bytes | None:
    """The payload of ``path``, or None where it is missing, unreadable or fails its hash."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    digest, found = data[:64], data[64:]
    return found if digest == hashlib.sha256(found).hexdigest().encode() else None


def write_checked(path: str, payload: bytes, prefix: str) -> None:
    """``payload`` to ``path`` with its hash, through a temporary ``prefix``-named file; never raises
    on I/O."""
    try:
        folder = os.path.dirname(path)
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + prefix)
        with os.fdopen(fd, "wb") as f:
            f.write(hashlib.sha256(payload).hexdigest().encode() + payload)
        os.replace(tmp, path)
    except OSError:
        pass
