"""JAX's persistent compilation cache as the study runner uses it: where it lives, its bound, whole entries.

:func:`use` points JAX's cache at a directory with :class:`SafeCache` in front (an entry is written whole; one that
cannot be read back is compiled again, never an error). :func:`watch` tells whether a compile loaded its program
from the cache (:class:`Seen`). :func:`limit`, :func:`evict` and :func:`clear` bound and empty the directory: JAX's
entries and those of the program cache inside it (:mod:`~jaxtrees.experiments.run.programs`), each by its last use.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pathlib
import threading
import time
import warnings

__all__ = ["SafeCache", "Seen", "clear", "evict", "limit", "touch", "trim", "use", "watch"]

#: The suffix of JAX's cache entries (``jax._src.lru_cache``: KEY-cache); temporary files have another.
SUFFIX = "-cache"
#: Prefix of an entry being written (``.tmp-PID-KEY``); JAX never reads it, :func:`use` removes a dead process's.
TEMPORARY = ".tmp-"
#: The program cache's folder inside the compilation cache's directory (:mod:`~jaxtrees.experiments.run.programs`).
PROGRAMS = "programs"

_local = threading.local()
_listening = False
_listen_lock = threading.Lock()


class Seen:
    """What happened to the compiles inside one :func:`watch`: ``requests`` (compiles that asked the
    persistent cache), ``hits`` (programs it had), ``backend`` (programs XLA's backend compiled or
    loaded, as JAX reports them; none when JAX's in-memory cache held the program already)."""

    def __init__(self):
        self.hits = self.requests = self.backend = 0
        self.entries: list[bytes] = []  # the entries read from the persistent cache (SafeCache.get), as stored

    @property
    def how(self) -> str:
        """"loaded" (every program from the persistent cache), "reused" (this process held it already,
        in JAX's in-memory cache) or "compiled"."""
        if self.requests and self.hits == self.requests:
            return "loaded"
        return "reused" if self.backend == 0 else "compiled"


#: JAX's monitoring event for XLA's part of a compile (compiling, or loading from the persistent cache).
BACKEND_EVENT = "/jax/core/compile/backend_compile_duration"


def _listener(event: str, **_):
    seen = getattr(_local, "seen", None)
    if seen is None:
        return
    if event == "/jax/compilation_cache/cache_hits":
        seen.hits += 1
    elif event == "/jax/compilation_cache/compile_requests_use_cache":
        seen.requests += 1


def _duration_listener(event: str, duration: float, **_):
    seen = getattr(_local, "seen", None)
    if seen is not None and event == BACKEND_EVENT:
        seen.backend += 1


@contextlib.contextmanager
def watch():
    """``with watch() as seen: lowered.compile()``: ``seen.how`` is "loaded" if the program came from
    the persistent cache, "reused" if this process held it already, else "compiled" (the cache off
    included). JAX reports these events (:mod:`jax.monitoring`) on the thread that compiles, so
    compiles on other threads at the same time are not counted."""
    global _listening
    with _listen_lock:
        if not _listening:
            from jax import monitoring

            monitoring.register_event_listener(_listener)
            monitoring.register_event_duration_secs_listener(_duration_listener)
            _listening = True
    outer, _local.seen = getattr(_local, "seen", None), Seen()
    try:
        yield _local.seen
    finally:
        _local.seen = outer


def use(directory: str, min_compile_seconds: float = 0.0) -> str:
    """Point JAX's persistent compilation cache at ``directory`` (created if need be), keeping every
    program that took at least ``min_compile_seconds`` to compile, with :class:`SafeCache` in front, and
    bound its size (:func:`evict`); return the directory. Call before the first compile: JAX opens its
    cache once per process."""
    import jax

    directory = os.path.abspath(os.path.expanduser(directory))
    os.makedirs(directory, exist_ok=True)
    _remove_orphans(directory)
    _remove_orphans(os.path.join(directory, PROGRAMS))
    trim(directory, force=True)
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_seconds))
    _install(directory)
    return directory


# The bound on the cache's size, and emptying it.

#: ``$JAXTREES_CACHE_MAX_MB`` unset: the cache's bound in MB.
MAX_MB = 2048
#: An entry used (loaded or written) this recently is never evicted: a concurrent run may be about to load it.
KEEP_SECONDS = 600
#: Eviction goes down to this share of the bound, so that the saves after it do not look again at once.
LOW_WATER = 0.9

#: Per cache directory: its size when last looked at plus what this process wrote into it since (:func:`trim`).
_estimates: dict = {}
_trimming = threading.Lock()


def limit() -> int | None:
    """The cache's bound in bytes: ``$JAXTREES_CACHE_MAX_MB`` (a number; 0 or empty: None, no bound), default
    :data:`MAX_MB`; a value that is no number is warned of and the default taken."""
    value = os.environ.get("JAXTREES_CACHE_MAX_MB")
    if value is None:
        return MAX_MB * 2**20
    if not value.strip():
        return None
    try:
        mb = float(value)
        if mb != mb or mb < 0:
            raise ValueError(value)
    except ValueError:
        warnings.warn(f"JAXTREES_CACHE_MAX_MB={value!r} is not a number of MB (0: no bound); taking {MAX_MB}",
                      stacklevel=2)
        return MAX_MB * 2**20
    return None if mb == 0 else int(mb * 2**20)


def _entries(directory: str) -> list[tuple[float, int, str]]:
    """``(last use, size, path)`` of every entry: JAX's (``*-cache``) and the program cache's (``*.program``);
    temporaries and other files are not entries. A file gone meanwhile is left out."""
    found = []
    for folder, suffix in ((directory, SUFFIX), (os.path.join(directory, PROGRAMS), ".program")):
        try:
            with os.scandir(folder) as listing:
                for item in listing:
                    if item.name.endswith(suffix) and not item.name.startswith("."):
                        with contextlib.suppress(OSError):
                            info = item.stat(follow_symlinks=False)
                            found.append((info.st_mtime, info.st_size, item.path))
        except OSError:
            pass
    return found


def evict(directory: str, max_bytes: int | None = None) -> tuple[int, int]:
    """Where the entries of ``directory`` exceed ``max_bytes`` (default :func:`limit`; None: no bound), remove the
    least recently used (a file's modification time: a load sets it) until they fill :data:`LOW_WATER` of it;
    ``(files, bytes)`` removed. Entries used in the last :data:`KEEP_SECONDS` stay; a file another process
    removed or used meanwhile is skipped."""
    removed, freed, _ = _evict(directory, limit() if max_bytes is None else max_bytes)
    return removed, freed


def _evict(directory: str, max_bytes: int | None) -> tuple[int, int, int]:
    """:func:`evict`, and the size left."""
    entries = _entries(directory)
    total = sum(size for _, size, _ in entries)
    if max_bytes is None or total <= max_bytes:
        return 0, 0, total
    target, keep_after = int(max_bytes * LOW_WATER), time.time() - KEEP_SECONDS
    removed = freed = 0
    for used, size, path in sorted(entries):
        if total <= target or used >= keep_after:
            break
        gone = _remove_if_unused(path, keep_after)
        if gone == 0:  # another process removed it first
            total -= size
        elif gone is not None:
            total, removed, freed = total - gone, removed + 1, freed + gone
    return removed, freed, total


def _remove_if_unused(path: str, keep_after: float) -> int | None:
    """Remove the entry at ``path`` unless it was used after ``keep_after`` (looked at again just before):
    the bytes it took (0: another process removed it first), None where it stays."""
    try:
        info = os.stat(path, follow_symlinks=False)
        if info.st_mtime >= keep_after:
            return None
        os.remove(path)
    except FileNotFoundError:
        return 0
    except OSError:  # a read-only cache: it stays
        return None
    if path.endswith(SUFFIX):  # JAX's own LRUCache keeps an entry's last use beside it
        with contextlib.suppress(OSError):
            os.remove(path[: -len(SUFFIX)] + "-atime")
    return info.st_size


def trim(directory: str, written: int = 0, force: bool = False) -> None:
    """After this process wrote ``written`` bytes into ``directory``'s cache: evict (:func:`evict`) where its
    size, as last seen plus what this process wrote since, may pass the bound (``force``: look anyway)."""
    bound = limit()
    if bound is None:
        return
    with _trimming:
        estimate = _estimates.get(directory)
        if estimate is not None and not force:
            estimate = _estimates[directory] = estimate + written
            if estimate <= bound:
                return
        _estimates[directory] = _evict(directory, bound)[2]


def touch(path: str) -> None:
    """Record a use of the entry at ``path`` (its modification time; access times are not kept on most mounts)."""
    with contextlib.suppress(OSError):
        os.utime(path)


def clear(directory: str) -> tuple[int, int]:
    """Empty the cache in ``directory``: its entries (JAX's and the program cache's), the records of the programs
    runs used and the temporaries of processes no longer alive (a live writer's stay); ``(files, bytes)`` removed.
    Other files and the folders stay. ``rm -r ~/.cache/jaxtrees`` does the same with no run going."""
    directory = os.path.abspath(os.path.expanduser(directory))
    programs_dir = os.path.join(directory, PROGRAMS)
    paths = [path for _, _, path in _entries(directory)]
    paths += glob.glob(os.path.join(glob.escape(directory), "*-atime"))
    paths += glob.glob(os.path.join(glob.escape(programs_dir), "recent-*.json"))
    paths += _orphans(directory) + _orphans(programs_dir)
    removed = freed = 0
    for path in paths:
        with contextlib.suppress(OSError):
            size = os.path.getsize(path)
            os.remove(path)
            removed, freed = removed + 1, freed + size
    with _trimming:
        _estimates.pop(directory, None)
    return removed, freed


def _install(directory: str) -> bool:
    """Put :class:`SafeCache` in place of JAX's own file cache (``jax._src.compilation_cache``, a private
    module: where it differs, JAX's own cache stays, which also skips an unreadable entry, with a
    warning, but does not replace it). Returns whether it is installed."""
    try:
        from jax._src import compilation_cache as jax_cache

        with jax_cache._cache_initialized_mutex:
            jax_cache._cache = SafeCache(directory)
            jax_cache._cache_initialized = True
            jax_cache._cache_checked = jax_cache._cache_used = False  # asked again at the next compile
    except (ImportError, AttributeError, TypeError):
        return False
    return True


def _remove_orphans(directory: str):
    """Remove the temporary entry files of processes no longer alive (killed while writing)."""
    for path in _orphans(directory):
        with contextlib.suppress(OSError):
            os.remove(path)


def _orphans(directory: str) -> list[str]:
    """The temporary entry files in ``directory`` of processes no longer alive."""
    found = []
    for path in glob.glob(os.path.join(glob.escape(directory), TEMPORARY + "*")):
        pid = os.path.basename(path)[len(TEMPORARY):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            found.append(path)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _readable(value: bytes) -> bool:
    """Whether a cache entry decompresses (JAX compresses with zstd where Python has it, else zlib,
    whose checksum catches a damaged entry) to more than its 4-byte compile-time header."""
    try:
        from jax._src.compilation_cache import decompress_executable

        return len(decompress_executable(value)) > 4
    except Exception:  # noqa: BLE001 (zlib.error, zstd's errors, a changed private API)
        return False


def _base():
    try:
        from jax._src.compilation_cache_interface import CacheInterface
    except ImportError:  # a JAX without it: SafeCache is not installed (_install)
        return object
    return CacheInterface


class SafeCache(_base()):
    """A directory of entries ``KEY-cache``, as JAX's ``LRUCache`` without a size bound keeps them (so
    either reads the other's), with whole writes and unreadable entries skipped.

    ``get`` returns None for a missing entry and for one that does not decompress (removed, so that
    the program compiled again takes its place) and records the use of one it returns (:func:`touch`);
    ``put`` writes a temporary file, fsyncs it and renames it over the entry, so readers (other processes
    too) see a whole entry or none, then keeps the directory in its bound (:func:`trim`)."""

    def __init__(self, path: str):
        self.path = self._path = pathlib.Path(path)
        self.path.mkdir(parents=True, exist_ok=True)

    def get(self, key: str) -> bytes | None:
        if not key:
            raise ValueError("key cannot be empty")
        path = os.path.join(self.path, key + SUFFIX)
        try:
            with open(path, "rb") as fh:
                value = fh.read()
        except FileNotFoundError:
            return None
        except OSError:
            return None
        if not _readable(value):
            with contextlib.suppress(OSError):
                os.remove(path)
            return None
        touch(path)
        seen = getattr(_local, "seen", None)
        if seen is not None:
            seen.entries.append(value)
        return value

    def put(self, key: str, value: bytes) -> None:
        if not key:
            raise ValueError("key cannot be empty")
        path = os.path.join(self.path, key + SUFFIX)
        temporary = os.path.join(self.path, f"{TEMPORARY}{os.getpid()}-{threading.get_ident()}-{key}")
        try:
            with open(temporary, "wb") as fh:
                fh.write(value)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(temporary, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.remove(temporary)
            raise
        trim(str(self.path), len(value))
