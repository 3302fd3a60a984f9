"""A process's clean end: the package's threads joined and pyarrow's thread pools idle before the interpreter finalizes.

A thread that takes the GIL after finalization has begun is ended by ``pthread_exit``; inside C++ (an XLA compile
left running, pyarrow's ``PyBuffer`` released by its pool after a threaded Parquet read: apache/arrow#49942) that
unwinding aborts the process ("terminate called without an active exception", exit 134) after its files are written.
:func:`settle` waits for both; :func:`~jaxtrees.experiments.api.run` registers it with ``atexit`` (the command ends
with ``os._exit``, without finalizing).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading

__all__ = ["PREFIX", "arrow_idle", "settle"]

#: The names of the threads the package starts (writer, fetcher, compile, prefetch, matplotlib's import).
PREFIX = "jaxtrees"
#: pyarrow's thread pools (CPU, I/O) and ``ThreadPool::WaitForIdle``, exported by libarrow (mangled C++ names).
_POOLS = ("_ZN5arrow8internal16GetCpuThreadPoolEv", "_ZN5arrow2io8internal15GetIOThreadPoolEv")
_WAIT = "_ZN5arrow8internal10ThreadPool11WaitForIdleEv"


def settle() -> None:
    """Join the package's threads still alive (a compile left running by an interrupt: until it ends), then wait
    until pyarrow's pools have no task queued or running (:func:`arrow_idle`)."""
    for thread in threading.enumerate():
        if thread.name.startswith(PREFIX) and thread is not threading.current_thread() and thread.is_alive():
            thread.join()
    arrow_idle()


def arrow_idle() -> bool:
    """Wait (the GIL released) until pyarrow's CPU and I/O pools are idle, a task's captured state released; False
    where pyarrow is not loaded or its library does not export the pools."""
    lib = sys.modules.get("pyarrow.lib")
    if lib is None:
        return False
    try:
        arrow = ctypes.CDLL(_libarrow(os.path.dirname(lib.__file__)), mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        wait = getattr(arrow, _WAIT)
        pools = [getattr(arrow, name) for name in _POOLS]
    except (OSError, AttributeError, TypeError):
        return False
    wait.argtypes, wait.restype = [ctypes.c_void_p], None
    for get in pools:
        get.restype = ctypes.c_void_p
        pool = get()
        if pool:
            wait(pool)
    return True


def _libarrow(folder: str) -> str:
    """The path of the libarrow that pyarrow loaded (``libarrow.so.NNNN`` beside it)."""
    names = sorted(n for n in os.listdir(folder) if n.startswith("libarrow.so"))
    if not names:
        raise OSError(f"no libarrow.so in {folder}")
    return os.path.join(folder, min(names, key=len))
