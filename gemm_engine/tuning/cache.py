"""The persistent tuning cache: problem key -> the winning algorithm and selection, as JSON.

Where: ``$GEMM_ENGINE_CACHE_DIR`` when set, else the platform's user cache folder for
"gemm_engine" (platformdirs: ~/.cache/gemm_engine on Linux), file ``tuning.json``.

Robustness rules, because a cache must never be the reason a matmul fails:
* writes are atomic (a temporary file in the same folder, then ``os.replace``) and the whole
  read-merge-replace runs under a lock file (filelock: several processes tuning at once keep every
  entry);
* a file that is not valid JSON (or nested past reason), has another format, or was written by
  another gemm_engine version (selections and kernels may have changed meaning) is ignored and
  replaced at the next write; `status` says which, for ``gemm-engine info``;
* entries are parsed one by one: one whose algorithm is not registered, or whose fields are not
  the algorithm's own selection's (a name it lacks, a value of another type), is skipped and
  counted in `status`, never raised; the selection's type is the registered algorithm's: nothing
  a file names is ever imported;
* a folder that cannot be written keeps the tuned choice in memory for this process, with one
  warning (`put` returns False).
Compiled kernels are not stored here: CuPy's and PyOpenCL's own binary caches hold them.
"""
from __future__ import annotations

import dataclasses
import json
import os
import stat
import tempfile
import warnings

from filelock import FileLock   # the ecosystem's cross-process lock (no hand-made flock)

from ..algorithms.base import REGISTRY
from ..version import __version__

#: The file's schema (entries; selections as their fields); a file of another schema is rebuilt.
FORMAT = "gemm_engine.tuning/2"
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
    return __version__


def selection_to_json(selection) -> dict:
    return {"fields": selection.values_dict()}


def selection_from_json(algorithm: str, data: dict):
    """The selection of registered ``algorithm`` that ``data`` describes (its type is the
    algorithm's own: nothing the file names is ever imported); ValueError when it cannot be rebuilt."""
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
    def from_json(cls, data) -> "Entry":
        """The entry ``data`` describes; ValueError for anything else (never another exception)."""
        try:
            algorithm = data["algorithm"]
            if not isinstance(algorithm, str):
                raise TypeError(f"algorithm is a {type(algorithm).__name__}")
            seconds, trials = data["seconds"], data.get("trials", 0)
            if (isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or isinstance(trials, bool)
                    or not isinstance(trials, int)):
                raise TypeError("seconds / trials are not numbers")
            return cls(algorithm, selection_from_json(algorithm, data["selection"]), float(seconds), trials)
        except ValueError:
            raise
        except Exception as exc:  # noqa: BLE001 -- whatever shape the file has
            raise ValueError(f"malformed entry ({type(exc).__name__}: {exc})") from None


#: The most bytes of tuning cache read (thousands of entries; a larger file is someone else's).
MAX_BYTES = 4 << 20


def _read_regular(path: str) -> str:
    """The text of ``path`` if it is a regular file of at most `MAX_BYTES` (OSError otherwise): a
    named pipe or a device put there must not block the first call, nor a huge file slow it."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path} is not a regular file")
        if st.st_size > MAX_BYTES:
            raise OSError(f"{path} holds {st.st_size} bytes, more than the {MAX_BYTES} a tuning cache may")
        with os.fdopen(fd, "rb") as f:
            fd = -1
            return f.read(MAX_BYTES + 1).decode("utf-8")
    finally:
        if fd >= 0:
            os.close(fd)


class TuningCache:
    def __init__(self, path: str | None = None):
        self.path = path or os.path.join(cache_dir(), FILE_NAME)
        self._raw: dict[str, dict] = {}
        self._memory: dict[str, Entry] = {}   # entries a read-only folder could not take
        self._warned = False
        self._stamp = None          # (mtime_ns, size) of the file when last read
        self.status = "not read yet"
        self.skipped: list[str] = []

    @property
    def _lock(self):
        return FileLock(self.path + ".lock", timeout=30)

    # -- reading -----------------------------------------------------------------------------
    def _read_file(self) -> dict[str, dict]:
        """The well-formed entries on disk ({} and a status line when there are none or the file
        is bad); a bad entry is left out and counted."""
        try:
            data = json.loads(_read_regular(self.path))
        except FileNotFoundError:
            self.status = "empty (no file yet)"
            return {}
        except (OSError, ValueError, RecursionError, MemoryError) as exc:
            self.status = f"ignored: unreadable ({type(exc).__name__}: {str(exc)[:120]}); rebuilt at the next write"
            return {}
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("entries"), dict):
            self.status = f"ignored: not a {FORMAT} file; rebuilt at the next write"
            return {}
        if data.get("version") != _version():
            self.status = (f"ignored: written by gemm_engine {str(data.get('version'))[:40]!r}, this is "
                           f"{_version()}; rebuilt at the next write")
            return {}
        good, bad = {}, []
        for key, value in data["entries"].items():
            try:
                Entry.from_json(value)
            except ValueError as exc:
                bad.append(f"{str(key)[:60]}: {str(exc)[:160]}")
                continue
            good[key] = value
        self.status = f"{len(good)} entries" + (f"; {len(bad)} skipped (e.g. {bad[0]})" if bad else "")
        self.skipped = bad
        return good

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
        if key in self._memory:
            return self._memory[key]
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
        return sorted(set(self._raw) | set(self._memory))

    # -- writing -----------------------------------------------------------------------------
    def put(self, key: str, entry: Entry) -> bool:
        """Store ``entry``, merged into whatever the file holds now, with an atomic replace under the
        lock. True when written; False when the folder cannot be written (the entry then stays in
        this process's memory, and one warning says so)."""
        try:
            self._write(key, entry)
            return True
        except OSError as exc:
            self._memory[key] = entry
            if not self._warned:
                self._warned = True
                warnings.warn(f"gemm_engine: the tuning cache {self.path} cannot be written ({exc}); tuned "
                              f"choices are kept in memory for this process only (set ${CACHE_ENV} to a "
                              f"writable folder to keep them)", RuntimeWarning, stacklevel=3)
            return False

    def _write(self, key: str, entry: Entry) -> None:
        folder = os.path.dirname(self.path)
        os.makedirs(folder, exist_ok=True)
        with self._lock:
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
        for path in (self.path, self.path + ".lock"):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self._raw, self._memory, self._stamp, self.status = {}, {}, None, "not read yet"
