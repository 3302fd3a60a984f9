"""The program cache: serialized executables under a key of the run's own, loaded without tracing or lowering.

:class:`Programs` keeps each freshly compiled executable (:func:`serialize`) under :func:`program_key` in the folder
``programs`` of JAX's persistent compilation cache (:mod:`~jaxtrees.experiments.run.xla_cache`), which needs a
program lowered before it can look; :func:`prefetched` loads a run's programs ahead of it, and :func:`describe` says
what the cache directory holds. Sizes and load times: docs/benchmarks.md.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import pathlib
import pickle
import platform
import threading
import time
import zlib

from jaxtrees.experiments.run.xla_cache import PROGRAMS, SUFFIX, TEMPORARY, limit, touch, trim

__all__ = ["Programs", "describe", "prefetched", "program_key", "program_source_digest", "programs",
           "programs_directory", "serialize"]

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


def program_source_digest() -> str:
    """SHA-256 of the jaxtrees package's source (every ``.py`` file, by path): a code change is a new key."""
    if _digest:
        return _digest[0]
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
    import jax
    import jaxlib

    client = devices[0].client
    settings = {name: repr(value) for name, value in jax.config.values.items() if not name.startswith(UNKEYED)}
    whole = {"parts": parts, "jax": jax.__version__, "jaxlib": jaxlib.__version__, "settings": settings,
             "devices": [(d.id, d.platform, d.device_kind, d.process_index) for d in devices],
             "backend": (client.platform, client.platform_version), "processes": jax.process_count(),
             "xla_flags": os.environ.get("XLA_FLAGS", ""), "cpu": _host_cpu(), "source": program_source_digest()}
    return hashlib.sha256(json.dumps(whole, sort_keys=True, default=repr).encode()).hexdigest()


def _host_cpu() -> str:
    """The host's CPU model and features (XLA:CPU compiles for them)."""
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
    (SOURCE: the start of :func:`program_source_digest`).

    :meth:`save` writes an entry whole (a temporary file, fsync, rename); :meth:`load` returns None for an
    entry missing, damaged (its checksum), foreign (another key inside) or one that fails to load,
    removing a bad one, so the program is compiled again: never an error; a load records the entry's use
    (:func:`~jaxtrees.experiments.run.xla_cache.touch`, for :func:`~jaxtrees.experiments.run.xla_cache.evict`).
    An entry holds a fresh compile's bytes only (:func:`serialize`). Saving removes this source's damaged entries
    and stale ones (:data:`STALE_SECONDS`), and keeps the cache in its bound
    (:func:`~jaxtrees.experiments.run.xla_cache.limit`)."""

    def __init__(self, directory: str):
        self.directory = directory

    def path(self, key: str) -> str:
        return os.path.join(self.directory, f"{program_source_digest()[:12]}-{key}.program")

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
        touch(path)
        return executable

    def save(self, key: str, payload: bytes, in_tree, out_tree) -> bool:
        """Write the entry of a freshly compiled executable (``serialize_executable.serialize``'s three
        values) whole; False where it cannot be written (a full disk, a read-only cache: not an error)."""
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
            trim(os.path.dirname(os.path.normpath(self.directory)), len(head) + len(body))
        return True

    def recent(self, invocation: str) -> list[str]:
        """The keys the last run of ``invocation`` loaded or saved, in that order (:func:`prefetched`)."""
        try:
            with open(self._recent_path(invocation)) as fh:
                keys = json.load(fh)["keys"]
        except (OSError, ValueError, KeyError, TypeError):
            return []
        return [k for k in keys if isinstance(k, str)] if isinstance(keys, list) else []

    def remember(self, invocation: str, keys: list[str]) -> None:
        """Record ``keys`` as the last run of ``invocation``'s (written whole; a failure only skips it)."""
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
        return os.path.join(self.directory, f"recent-{hashlib.sha256(invocation.encode()).hexdigest()[:32]}.json")

    def _remove_stale(self):
        """This source's damaged entries (:func:`_kind`), and entries of another source (an edited or other version of
        the package) and the records of the programs runs used (:meth:`remember`; rewritten when they change) unused
        for :data:`STALE_SECONDS`."""
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
    if source != program_source_digest()[:12]:
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
    persistent cache, its ``entry`` there (:attr:`~jaxtrees.experiments.run.xla_cache.Seen.entries`: the bytes of
    the fresh compile, serialized when JAX stored it) stands in for serializing it again, which jaxlib 0.10.2 on a
    CPU turned into an executable that failed to run (NOT_FOUND bitcast_copy_fusion). ValueError where it cannot."""
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


def run_key(invocation: str, devices) -> str:
    """What :func:`prefetched` remembers a run's programs under: the invocation and the devices (a program loaded
    onto more or fewer devices than it was compiled for aborts the process)."""
    return json.dumps([invocation, [(d.id, d.platform, d.device_kind, d.process_index) for d in devices]])


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
    invocation = run_key(invocation, devices)
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
