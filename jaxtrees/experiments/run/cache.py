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

Beside it, :class:`Programs` (the folder ``programs`` inside) keeps each freshly compiled executable
serialized under a key of the run's own (:func:`program_key`: the program's static values, group and
inputs, devices, backend, options, XLA_FLAGS, versions, JAX settings and the package's source), so a
warm run loads a program without tracing or lowering it, which JAX's cache needs before it can look.

The directory is bounded (:func:`limit`: ``$JAXTREES_CACHE_MAX_MB``, default 2048; 0 or empty: no bound): at
:func:`use` and whenever a run's saves may have passed the bound, :func:`evict` removes the entries (JAX's and the
program cache's, each file by its own last use: nothing records which JAX entry a program entry came from, and a
program entry loads without it) used least recently, by their modification time, which a load sets. Entries used
in the last :data:`KEEP_SECONDS` (a concurrent run's) and temporaries being written are never removed; a missing
entry is a cache miss, never an error. :func:`clear` empties it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import threading

__all__ = ["Programs", "SafeCache", "clear", "describe", "evict", "limit", "prefetched", "program_key", "programs",
           "use", "watch", "Seen"]

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
    _trim(directory, force=True)
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_seconds))
    _install(directory)
    return directory


def describe(directory: str) -> str:
    """``"DIRECTORY: N programs, S MB"`` (JAX's entries), then, where it holds any, ``"; N ready to load without
    tracing, S MB"`` (the program cache's entries of this source whose header, length and key check out, nothing
    loaded), the damaged ones and those of another source, and the bound (:func:`limit`)."""
    entries = glob.glob(os.path.join(glob.escape(directory), "*" + SUFFIX))
    line = f"{directory}: {_count(entries, 'program')}, {_mb(_size(entries))}"
    kinds: dict = {"ready": [], "damaged": [], "other": [], "gone": []}
    for path in glob.glob(os.path.join(glob.escape(directory), PROGRAMS, "*.program")):
        kinds[_kind(path)].append(path)
    if kinds["ready"]:
        line += f"; {len(kinds['ready']):,} ready to load without tracing, {_mb(_size(kinds['ready']))}"
    if kinds["damaged"]:
        line += f"; {len(kinds['damaged']):,} damaged, {_mb(_size(kinds['damaged']))}, removed at the next save"
    if kinds["other"]:
        line += f"; {len(kinds['other']):,} of another source, {_mb(_size(kinds['other']))}"
    bound = limit()
    return line + (f"; bound {bound / 2**20:,.6g} MB" if bound is not None else "; no size bound") + \
        " (JAXTREES_CACHE_MAX_MB)"


def _count(items, noun: str) -> str:
    return f"{len(items):,} {noun}{'s' * (len(items) != 1)}"


def _mb(size: int) -> str:
    return f"{size / 2**20:,.1f} MB"


def _size(paths) -> int:
    size = 0
    for path in paths:
        try:
            size += os.path.getsize(path)
        except OSError:
            pass
    return size


# The bound on the cache's size, and emptying it.

#: ``$JAXTREES_CACHE_MAX_MB`` unset: the cache's bound in MB.
MAX_MB = 2048
#: An entry used (loaded or written) this recently is never evicted: a concurrent run may be about to load it.
KEEP_SECONDS = 600
#: Eviction goes down to this share of the bound, so that the saves after it do not look again at once.
LOW_WATER = 0.9

#: Per cache directory: its size when last looked at plus what this process wrote into it since (:func:`_trim`).
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
        import warnings

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
    import time

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


def _trim(directory: str, written: int = 0, force: bool = False) -> None:
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


def _touch(path: str) -> None:
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
    the program compiled again takes its place) and records the use of one it returns (:func:`_touch`);
    ``put`` writes a temporary file, fsyncs it and renames it over the entry, so readers (other processes
    too) see a whole entry or none, then keeps the directory in its bound (:func:`_trim`)."""

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
        _touch(path)
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
        _trim(str(self.path), len(value))



# The program cache: executables found by a key of the run's own, loaded without tracing.

#: The program cache's folder inside the compilation cache's directory.
PROGRAMS = "programs"
#: The first bytes of a program entry; then its key and a newline, the body's length (8 bytes, big-endian), a SHA-256
#: of the body and the body: the pickled entry, zlib-compressed (level 1: a quarter of the size, for tens of
#: milliseconds; docs/benchmarks.md). The header alone tells a damaged or foreign entry (:func:`_kind`).
MAGIC = b"jaxtrees-program-3\n"
#: The most bytes of a program entry's header read to check it.
HEADER_BYTES = 512
#: JAX settings that cannot change a program (logging, dumps, the caches' own settings); every other
#: one is part of a program's key.
UNKEYED = ("jax_compilation_cache", "jax_persistent_cache", "jax_enable_compilation_cache", "jax_raise_persistent",
           "jax_explain_cache", "jax_log", "jax_debug_log", "jax_dump", "jax_pprint", "jax_traceback",
           "jax_tracer_error", "jax_include_", "jax_source_url", "jax_captured_constants", "jax_compiler_detailed")


def programs_directory() -> str | None:
    """The program cache's folder (inside JAX's persistent compilation cache), None where that is off."""
    import jax

    directory = jax.config.jax_compilation_cache_dir
    return os.path.join(directory, PROGRAMS) if directory else None


def source_digest() -> str:
    """SHA-256 of the jaxtrees package's source (every ``.py`` file, by path): a code change is a new key."""
    if _digest:
        return _digest[0]
    import hashlib
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]  # the jaxtrees package
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    _digest.append(digest.hexdigest())
    return _digest[0]


_digest: list = []


def program_key(parts: dict, devices) -> str:
    """A program's key: SHA-256 of ``parts`` (what the run knows of it: study, static values, group,
    inputs, options) with what else can change the executable: the devices and backend, jax and jaxlib,
    the JAX settings (x64, PRNG, precision, ...; not :data:`UNKEYED`), XLA_FLAGS, the host CPU and the
    package's source."""
    import hashlib
    import json

    import jax
    import jaxlib

    client = devices[0].client
    settings = {name: repr(value) for name, value in jax.config.values.items() if not name.startswith(UNKEYED)}
    whole = {"parts": parts, "jax": jax.__version__, "jaxlib": jaxlib.__version__, "settings": settings,
             "devices": [(d.id, d.platform, d.device_kind, d.process_index) for d in devices],
             "backend": (client.platform, client.platform_version), "processes": jax.process_count(),
             "xla_flags": os.environ.get("XLA_FLAGS", ""), "cpu": _host_cpu(), "source": source_digest()}
    return hashlib.sha256(json.dumps(whole, sort_keys=True, default=repr).encode()).hexdigest()


def _host_cpu() -> str:
    """The host's CPU model and features (XLA:CPU compiles for them)."""
    import platform

    lines = []
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith(("model name", "flags", "Features")):
                    lines.append(line.strip())
                elif not line.strip() and lines:
                    break  # the first processor's
    except OSError:
        pass
    return platform.machine() + "|" + "|".join(lines)


#: An entry of another package source not used for this long is removed when an entry is saved (the
#: program, if JAX's cache still holds it, is then traced and loaded once, and kept again).
STALE_SECONDS = 24 * 3600


class Programs:
    """Serialized executables by :func:`program_key`, one file ``SOURCE-KEY.program`` each in ``directory``
    (SOURCE: the start of :func:`source_digest`).

    :meth:`save` writes an entry whole (a temporary file, fsync, rename); :meth:`load` returns None for an
    entry missing, damaged (its checksum), foreign (another key inside) or one that fails to load,
    removing a bad one, so the program is compiled again: never an error; a load records the entry's use
    (:func:`_touch`, for :func:`evict`). An entry holds a fresh compile's bytes only (:func:`serialize`). Saving
    removes this source's damaged entries and stale ones (:data:`STALE_SECONDS`), and keeps the cache in its bound
    (:func:`limit`)."""

    def __init__(self, directory: str):
        self.directory = directory

    def path(self, key: str) -> str:
        return os.path.join(self.directory, f"{source_digest()[:12]}-{key}.program")

    def has(self, key: str) -> bool:
        return os.path.exists(self.path(key))

    def load(self, key: str, devices):
        """The entry's executable, loaded onto ``devices`` (taken from :func:`prefetched`'s thread where it began
        loading it); None where there is none or it cannot serve."""
        ahead = _ahead.pop(key, None)
        if ahead is not None and ahead.devices == list(devices):
            ahead.done.wait()
            if ahead.executable is not None:
                _used.append(key)
                return ahead.executable
        executable = self._load(key, devices)
        if executable is not None:
            _used.append(key)
        return executable

    def _load(self, key: str, devices):
        import hashlib
        import pickle
        import zlib

        from jax.experimental import serialize_executable

        path = self.path(key)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            return None
        try:
            header = _header(data, len(data))
            if header is None or header[0] != key:
                raise ValueError("damaged or foreign")
            body = data[header[1]:]
            if hashlib.sha256(body).digest() != header[2]:
                raise ValueError("damaged")
            entry = pickle.loads(zlib.decompress(body))
            if entry["key"] != key:
                raise ValueError("foreign")
            executable = serialize_executable.deserialize_and_load(
                entry["payload"], entry["in_tree"], entry["out_tree"], backend=devices[0].client,
                execution_devices=devices)
        except Exception:  # noqa: BLE001 (damaged, foreign, another format: compiled again)
            with contextlib.suppress(OSError):
                os.remove(path)
            return None
        _touch(path)
        return executable

    def save(self, key: str, payload: bytes, in_tree, out_tree) -> bool:
        """Write the entry of a freshly compiled executable (``serialize_executable.serialize``'s three
        values) whole; False where it cannot be written (a full disk, a read-only cache: not an error)."""
        import hashlib
        import pickle
        import zlib

        body = zlib.compress(pickle.dumps({"key": key, "payload": payload, "in_tree": in_tree, "out_tree": out_tree},
                                          protocol=pickle.HIGHEST_PROTOCOL), 1)
        temporary = os.path.join(self.directory, f"{TEMPORARY}{os.getpid()}-{threading.get_ident()}-{key}")
        head = MAGIC + key.encode() + b"\n" + len(body).to_bytes(8, "big") + hashlib.sha256(body).digest()
        try:
            os.makedirs(self.directory, exist_ok=True)
            with open(temporary, "wb") as fh:
                fh.write(head + body)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(temporary, self.path(key))
        except OSError:
            with contextlib.suppress(OSError):
                os.remove(temporary)
            return False
        _used.append(key)
        self._remove_stale()
        if os.path.basename(os.path.normpath(self.directory)) == PROGRAMS:  # inside a compilation cache: bound it
            _trim(os.path.dirname(os.path.normpath(self.directory)), len(head) + len(body))
        return True

    def recent(self, invocation: str) -> list[str]:
        """The keys the last run of ``invocation`` loaded or saved, in that order (:func:`prefetched`)."""
        import json

        try:
            with open(self._recent_path(invocation)) as fh:
                keys = json.load(fh)["keys"]
        except (OSError, ValueError, KeyError, TypeError):
            return []
        return [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []

    def remember(self, invocation: str, keys: list[str]) -> None:
        """Record ``keys`` as the last run of ``invocation``'s (written whole; a failure only skips it)."""
        import json

        path = self._recent_path(invocation)
        temporary = os.path.join(self.directory, f"{TEMPORARY}{os.getpid()}-{threading.get_ident()}-recent")
        try:
            os.makedirs(self.directory, exist_ok=True)
            with open(temporary, "w") as fh:
                json.dump({"keys": keys}, fh)
            os.replace(temporary, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.remove(temporary)

    def _recent_path(self, invocation: str) -> str:
        import hashlib

        return os.path.join(self.directory, f"recent-{hashlib.sha256(invocation.encode()).hexdigest()[:32]}.json")

    def _remove_stale(self):
        """This source's damaged entries (:func:`_kind`), and entries of another source (an edited or other version of
        the package) and the records of the programs runs used (:meth:`remember`; rewritten when they change) unused
        for :data:`STALE_SECONDS`."""
        import time

        cutoff = time.time() - STALE_SECONDS
        for path in glob.glob(os.path.join(glob.escape(self.directory), "*.program")) + glob.glob(
                os.path.join(glob.escape(self.directory), "recent-*.json")):
            with contextlib.suppress(OSError):
                kind = _kind(path) if path.endswith(".program") else "other"
                if kind == "damaged" or (kind == "other" and os.path.getmtime(path) < cutoff):
                    os.remove(path)


def _header(data: bytes, size: int) -> tuple[str, int, bytes] | None:
    """``(key, where the body starts, its SHA-256)`` from the first bytes ``data`` of a program entry of ``size``
    bytes; None where they are no header of this format or the size is not the one it gives."""
    end = data.find(b"\n", len(MAGIC), HEADER_BYTES)
    if not data.startswith(MAGIC) or end < 0 or len(data) < end + 41:
        return None
    start = end + 41
    if size != start + int.from_bytes(data[end + 1:end + 9], "big"):
        return None
    try:
        return data[len(MAGIC):end].decode("ascii"), start, data[end + 9:start]
    except UnicodeDecodeError:
        return None


def _kind(path: str) -> str:
    """A program entry at ``path``, from its name, size and header (nothing loaded): "ready" (this source's, whole
    as far as its header tells: its length and key), "damaged" (this source's, not so) or "other" (another
    source's, of a format this one need not read) or "gone" (removed meanwhile)."""
    name = os.path.basename(path)
    source, _, key = name[: -len(".program")].partition("-")
    if source != source_digest()[:12]:
        return "other"
    try:
        with open(path, "rb") as fh:
            data, size = fh.read(HEADER_BYTES), os.fstat(fh.fileno()).st_size
    except FileNotFoundError:
        return "gone"
    except OSError:
        return "damaged"
    header = _header(data, size)
    return "ready" if header is not None and header[0] == key else "damaged"


_serializing = threading.Lock()


def serialize(executable, entry: bytes | None = None):
    """``jax.experimental.serialize_executable.serialize(executable)``; for an executable loaded from JAX's
    persistent cache, its ``entry`` there (:attr:`Seen.entries`: the bytes of the fresh compile, serialized
    when JAX stored it) stands in for serializing it again, which jaxlib 0.10.2 on a CPU turned into an
    executable that failed to run (NOT_FOUND bitcast_copy_fusion). ValueError where it cannot."""
    from jax._src.lib import _jax
    from jax._src.lib import xla_client as xc
    from jax.experimental import serialize_executable as serializing

    if entry is None:
        with _serializing:
            return serializing.serialize(executable)
    from jax._src.compilation_cache import decompress_executable, extract_executable_and_time

    original, _ = extract_executable_and_time(decompress_executable(entry))
    base, swapped = serializing._JaxPjrtPickler, []

    class Stored(base):
        def persistent_id(self, obj):
            if isinstance(obj, (xc.LoadedExecutable, _jax.Executable)):
                swapped.append(obj)
                return ("exec", original)
            return super().persistent_id(obj)

    with _serializing:  # serialize's pickler, swapped for this call only
        serializing._JaxPjrtPickler = Stored
        try:
            result = serializing.serialize(executable)
        finally:
            serializing._JaxPjrtPickler = base
    if len(swapped) != 1:
        raise ValueError(f"an executable of {len(swapped)} XLA executables, not one, cannot take its cache entry's")
    return result


class _Ahead:
    """A program :func:`prefetched` loads: for ``devices``; ``done`` once tried (``executable`` None: it could not)."""

    def __init__(self, devices):
        self.devices, self.done, self.executable = list(devices), threading.Event(), None


#: Programs being loaded ahead of the run (:func:`prefetched`), by key, until :meth:`Programs.load` takes them.
_ahead: dict = {}
#: Keys the program cache loaded or saved in this process (:func:`prefetched` remembers a run's).
_used: list = []


@contextlib.contextmanager
def prefetched(invocation: str, devices):
    """Within: the programs the last run of ``invocation`` (a command line's study and parameters) loaded or saved
    are loaded from the program cache on a daemon thread, beside the run's start-up (imports, planning; loading
    releases the GIL), for :meth:`Programs.load` to take. On leaving, that thread is waited for (none outlives the
    run), what was not taken is dropped, and the keys this run used are remembered for the next. Nothing where the
    program cache is off or ``devices`` is None."""
    store = programs()
    if store is None or devices is None:
        yield
        return
    keys = store.recent(invocation)
    mine = {key: _Ahead(devices) for key in dict.fromkeys(keys)}
    _ahead.update(mine)
    first = len(_used)

    def work():
        for key, ahead in mine.items():
            try:
                ahead.executable = store._load(key, ahead.devices)
            except BaseException:  # noqa: BLE001 - the run loads or compiles it itself
                pass
            finally:
                ahead.done.set()

    thread = threading.Thread(target=work, name="jaxtrees-prefetch", daemon=True) if mine else None
    if thread is not None:
        thread.start()
    try:
        yield
    finally:
        if thread is not None:
            thread.join()
        for key in mine:
            _ahead.pop(key, None)
        used = list(dict.fromkeys(_used[first:]))
        if used and used != keys:
            store.remember(invocation, used)


def programs() -> Programs | None:
    """The program cache of this process (beside JAX's persistent cache), None where that is off."""
    directory = programs_directory()
    return None if directory is None else Programs(directory)
