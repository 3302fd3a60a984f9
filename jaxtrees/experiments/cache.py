"""JAX's persistent compilation cache as the study runner uses it: where it lives, how large it is,
which programs a run loaded from it, and entries that are always whole.

:func:`use` points JAX's cache at a directory (``jaxtrees run``: ``$JAXTREES_CACHE_DIR``, default
``~/.cache/jaxtrees/xla``) and puts :class:`SafeCache` in front of it: an entry is written whole
(a temporary file, fsync, rename), so a process killed while writing (a compile worker, a run)
leaves no half-written entry, and an entry that cannot be read back (damaged, truncated) is
skipped and replaced by the program compiled again, never an error. Entries of another jax or
jaxlib version, another device or other compiler options have other keys (JAX's cache key covers
them), so they are never read. :func:`watch` tells whether a ``lowered.compile()`` on this thread
loaded its program from the cache (JAX's ``/jax/compilation_cache/cache_hits`` monitoring event) or
compiled it; :func:`describe` says where the cache is and how large.
"""

from __future__ import annotations

import contextlib
import glob
import os
import threading

__all__ = ["SafeCache", "describe", "use", "watch", "Seen"]

#: The suffix of JAX's cache entries (``jax._src.lru_cache``: KEY-cache); temporary files have another.
SUFFIX = "-cache"
#: Prefix of an entry being written (``.tmp-PID-KEY``); JAX never reads it, :func:`use` removes a dead process's.
TEMPORARY = ".tmp-"

_local = threading.local()
_listening = False
_listen_lock = threading.Lock()


class Seen:
    """What happened to the compiles inside one :func:`watch`: ``requests`` (compiles that asked the
    persistent cache), ``hits`` (programs it had), ``backend`` (programs XLA's backend compiled or
    loaded, as JAX reports them; none when JAX's in-memory cache held the program already)."""

    def __init__(self):
        self.hits = self.requests = self.backend = 0

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
    program that took at least ``min_compile_seconds`` to compile, with :class:`SafeCache` in front;
    return the directory. Call before the first compile: JAX opens its cache once per process."""
    import jax

    directory = os.path.abspath(os.path.expanduser(directory))
    os.makedirs(directory, exist_ok=True)
    _remove_orphans(directory)
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_seconds))
    _install(directory)
    return directory


def describe(directory: str) -> str:
    """``"DIRECTORY: N programs, S MB"``: where the cache lives and how large it is."""
    entries = glob.glob(os.path.join(glob.escape(directory), "*" + SUFFIX))
    size = 0
    for path in entries:
        try:
            size += os.path.getsize(path)
        except OSError:
            pass
    return f"{directory}: {len(entries):,} program{'s' * (len(entries) != 1)}, {size / 2**20:,.1f} MB"


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
    """Temporary entry files of processes no longer alive (killed while writing)."""
    for path in glob.glob(os.path.join(glob.escape(directory), TEMPORARY + "*")):
        pid = os.path.basename(path)[len(TEMPORARY):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                os.remove(path)


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
    the program compiled again takes its place); ``put`` writes a
    temporary file, fsyncs it and renames it over the entry, so readers (other processes too) see
    a whole entry or none."""

    def __init__(self, path: str):
        import pathlib

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

