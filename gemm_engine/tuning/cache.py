"""The persistent tuning cache: problem key -> the winning algorithm and selection, as JSON.

Where: ``$GEMM_ENGINE_CACHE_DIR`` when set, else the platform's user cache folder for
"gemm_engine" (platformdirs: ~/.cache/gemm_engine on Linux), file ``tuning.json``.

Robustness rules, because a cache must never be the reason a matmul fails:
* writes are atomic (a temporary file in the same folder, then ``os.replace``), and merge with what
  another process wrote meanwhile (the file is re-read just before each write);
* a file that is not valid JSON, has another format, or was written by another gemm_engine version
  (selections and kernels may have changed meaning) is ignored and replaced at the next write;
  `status` says which, for ``gemm-engine info``;
* an entry whose algorithm is no longer registered or whose selection no longer constructs is
  skipped (`get` returns None), never raised.
Compiled kernels are not stored here: CuPy's and PyOpenCL's own binary caches hold them.
"""
from __future__ import annotations

import dataclasses
import json
import os
import tempfile

FORMAT = "gemm_engine.tuning/1"
CACHE_ENV = "GEMM_ENGINE_CACHE_DIR"
FILE_NAME = "tuning.json"


def cache_dir() -> str:
    """The folder the tuning cache lives in (not created here)."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return os.path.abspath(os.path.expanduser(override))
    # platformdirs: the well-kept answer to "where does a user cache live" on every platform
    # (XDG on Linux, ~/Library/Caches on macOS, %LOCALAPPDATA% on Windows).
    import platformdirs
    return platformdirs.user_cache_dir("gemm_engine", appauthor=False)


def _version() -> str:
    from ..version import __version__
    return __version__


def selection_to_json(selection) -> dict:
    return {"fields": selection.values_dict()}


def selection_from_json(algorithm: str, data: dict):
    """The selection of registered ``algorithm`` that ``data`` describes (its type is the
    algorithm's own: nothing the file names is ever imported); ValueError when it cannot be rebuilt."""
    from ..algorithms import REGISTRY
    cls = REGISTRY.get(algorithm)
    target = getattr(cls, "selection_class", None) if cls is not None else None
    if target is None:
        raise ValueError(f"stale entry: {algorithm!r} is no registered algorithm with a selection")
    fields = data.get("fields") if isinstance(data, dict) else None
    if not isinstance(fields, dict):
        raise ValueError(f"malformed selection {data!r}")
    try:
        return target(**fields)
    except (TypeError, ValueError) as exc:   # a field this version lacks, or a value of another type
        raise ValueError(f"stale selection for {algorithm}: {exc}") from exc


@dataclasses.dataclass(frozen=True)
class Entry:
    """One tuned choice: a registered algorithm name, its selection and the time it measured."""

    algorithm: str
    selection: object
    seconds: float
    trials: int = 0           # how many candidates the tuner timed

    def to_json(self) -> dict:
        return {"algorithm": self.algorithm, "selection": selection_to_json(self.selection),
                "seconds": self.seconds, "trials": self.trials}

    @classmethod
    def from_json(cls, data: dict) -> "Entry":
        try:
            return cls(str(data["algorithm"]), selection_from_json(str(data["algorithm"]), data["selection"]),
                       float(data["seconds"]), int(data.get("trials", 0)))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed entry {data!r}") from exc


class TuningCache:
    def __init__(self, path: str | None = None):
        self.path = path or os.path.join(cache_dir(), FILE_NAME)
        self._raw: dict[str, dict] = {}
        self._stamp = None          # (mtime_ns, size) of the file when last read
        self.status = "not read yet"

    # -- reading -----------------------------------------------------------------------------
    def _read_file(self) -> dict[str, dict]:
        """The valid entries on disk ({} and a status line when there are none or the file is bad)."""
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            self.status = "empty (no file yet)"
            return {}
        except (OSError, ValueError) as exc:
            self.status = f"ignored: unreadable ({type(exc).__name__}: {exc}); rebuilt at the next write"
            return {}
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("entries"), dict):
            self.status = f"ignored: not a {FORMAT} file; rebuilt at the next write"
            return {}
        if data.get("version") != _version():
            self.status = (f"ignored: written by gemm_engine {data.get('version')!r}, this is "
                           f"{_version()}; rebuilt at the next write")
            return {}
        self.status = f"{len(data['entries'])} entries"
        return {k: v for k, v in data["entries"].items() if isinstance(k, str) and isinstance(v, dict)}

    def refresh(self) -> None:
        """Re-read the file when another process (or this one) changed it since the last read."""
        try:
            st = os.stat(self.path)
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        if stamp != self._stamp or self.status == "not read yet":
            self._raw = self._read_file()
            self._stamp = stamp

    def get(self, key: str) -> Entry | None:
        self.refresh()
        data = self._raw.get(key)
        if data is None:
            return None
        try:
            return Entry.from_json(data)
        except ValueError:
            return None

    def keys(self) -> list[str]:
        self.refresh()
        return sorted(self._raw)

    # -- writing -----------------------------------------------------------------------------
    def put(self, key: str, entry: Entry) -> None:
        """Store ``entry`` (merged into whatever the file holds now) with an atomic replace."""
        folder = os.path.dirname(self.path)
        os.makedirs(folder, exist_ok=True)
        merged = self._read_file()
        merged[key] = entry.to_json()
        payload = {"format": FORMAT, "version": _version(), "entries": merged}
        fd, tmp = tempfile.mkstemp(prefix=".tuning-", suffix=".json", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(payload, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        self._stamp = None
        self.status = "not read yet"

    def clear(self) -> None:
        """Remove the cache file (``gemm-engine tune --clear``)."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self._raw, self._stamp, self.status = {}, None, "not read yet"
