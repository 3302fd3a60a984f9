"""The ``jaxtrees`` command's entry point, outside the package so that it loads before JAX: Ctrl-C at any moment ends
the command with one line and exit 130, and too little memory to load jaxtrees and JAX with one line and exit 1.

Its handler, installed by its first instruction, raises KeyboardInterrupt only where that is safe: inside a C
extension's initialization (numpy's ImportError), a garbage collector's callback or a finalizer (where the interrupt is
printed and lost: JAX's ``_xla_gc_callback``), or before :func:`console` runs, the signal is sent again :data:`RETRY`
seconds later, until it lands where it is raised; interrupted while loading, the process ends without the teardown of
its half-imported modules. A KeyboardInterrupt raised is sent again every :data:`RESEND` seconds until it is seen
being handled (C code that clears every error, calling Python, can drop it), and a command that ends with exit 0
after one was raised ends with exit 130.
"""

import _thread
import gc
import os
import signal
import sys
import threading

#: Seconds after which a Ctrl-C that landed where it could not be raised is sent again.
RETRY = 0.02
#: ... at most this many times before :func:`console` runs.
EARLY = 100
#: Seconds after which a Ctrl-C raised as KeyboardInterrupt is sent again, unless it is being handled by then.
RESEND = 0.5
#: Code objects that run inside the garbage collector or a finalizer: an exception there is printed and dropped.
_DROPPED = frozenset({"__del__", "_xla_gc_callback"})
_state = {"entered": False, "pending": False, "finished": False, "early": 0}


def _unsafe(frame) -> bool:
    """Whether a KeyboardInterrupt raised in ``frame`` would be lost, or break a C extension being initialized."""
    if not _state["entered"]:  # between this module's import and console() (held a while only: a process that
        _state["early"] += 1   # imports it without calling console keeps its Ctrl-C)
        return _state["early"] <= EARLY
    callbacks = {getattr(c, "__code__", None) for c in gc.callbacks}
    while frame is not None:
        code = frame.f_code
        if (code.co_name in _DROPPED or code in callbacks or code.co_filename.endswith("weakref.py")
                or type(frame.f_locals.get("self")).__name__ == "ExtensionFileLoader"):
            return True
        frame = frame.f_back
    return False


def _interrupt(number, frame):
    """SIGINT: KeyboardInterrupt where it is safe (:func:`_unsafe`), else the same signal again in RETRY seconds;
    sent again in RESEND seconds while none is seen being handled (one dropped by C code that clears errors)."""
    if _state["finished"]:
        return  # the command's work is done: it ends with its own code
    _state["pending"] = True
    if _unsafe(frame):
        signal.setitimer(signal.ITIMER_REAL, RETRY)
        return
    signal.setitimer(signal.ITIMER_REAL, RESEND)  # sent again unless seen being handled by then
    if not (isinstance(sys.exc_info()[1], KeyboardInterrupt) or frame is None or frame.f_code is console.__code__):
        raise KeyboardInterrupt  # else one is being handled, or console() reports it: not lost


def _settled():
    """The timer of :func:`_interrupt` stopped (it would end the process by SIGALRM once the handler is gone)."""
    signal.setitimer(signal.ITIMER_REAL, 0)


def _again(number, frame):
    """The timer of :func:`_interrupt`: SIGINT to whatever handles it now (a run holds it until its calls end)."""
    if _state["pending"] and not _state["finished"]:
        _thread.interrupt_main(signal.SIGINT)


if threading.current_thread() is threading.main_thread():
    signal.signal(signal.SIGALRM, _again)
    signal.signal(signal.SIGINT, _interrupt)
    if os.environ.get("JAXTREES_TEST_HANDLER_READY"):  # signal tests only: this file says the handler is in place
        open(os.environ["JAXTREES_TEST_HANDLER_READY"], "a").close()

#: The address space (``ulimit -v``) below which the command refuses to start: loading JAX and running a quick study
#: reserved 2.0-2.1 GB of it with malloc's arenas capped (:data:`ARENAS`; 2.9 GB uncapped, 24 threads on 2 cores), and
#: near that the failures are out of Python's reach (glibc's "cannot allocate memory for thread-local data", XLA's
#: std::bad_alloc or a segmentation fault in the process).
MIN_ADDRESS_SPACE_MB = 2560
#: Under ``ulimit -v``, glibc's malloc arenas are capped at this many (each reserves 64 MB of address space per thread
#: that gets one), in the command's process and the compile workers it starts (MALLOC_ARENA_MAX, unless set).
ARENAS = 2


def console() -> None:
    """:func:`jaxtrees.cli.main`, then :func:`jaxtrees.cli.exit_now` with its code; an interrupt anywhere before its
    end is one line and exit 130, and so is an address space too small to load JAX in (exit 1)."""
    try:
        _state["entered"] = True
        _address_space()
        from jaxtrees.cli import exit_now, main
        if _state["pending"]:  # a Ctrl-C held during the imports: raised here, while loading
            raise KeyboardInterrupt
    except KeyboardInterrupt:  # modules half imported: ended at once, their teardown not run
        _settled()
        print("jaxtrees: interrupted while loading", file=sys.stderr, flush=True)
        os._exit(130)
    except (ImportError, MemoryError) as e:  # a library that cannot be mapped: out of (address) space
        if not isinstance(e, MemoryError) and "failed to map segment" not in str(e):
            raise
        print(f"jaxtrees: error: out of memory while loading jaxtrees, JAX and their libraries ({e})", file=sys.stderr)
        raise SystemExit(1) from None
    try:
        code = main()
    except KeyboardInterrupt:  # outside the commands' own handling (parsing the arguments)
        code = None
    _state["finished"] = True
    if code is None or (_state["pending"] and code == 0):  # a Ctrl-C held or dropped as the command ended: not lost
        print("jaxtrees: interrupted", file=sys.stderr)
        code = 130
    _settled()
    exit_now(code)


def _address_space() -> None:
    """SystemExit(1) with one line where ``ulimit -v`` leaves less than :data:`MIN_ADDRESS_SPACE_MB` (read here, not
    through ``jaxtrees.experiments.run.workers.address_limit``: this runs before the package is imported); above it,
    malloc's arenas capped (:data:`ARENAS`)."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit == resource.RLIM_INFINITY:
        return
    if limit < MIN_ADDRESS_SPACE_MB * 2**20:
        print(f"jaxtrees: error: the address space is limited to {limit // 2**20:,} MB (ulimit -v); loading JAX and "
              f"compiling a program needs at least {MIN_ADDRESS_SPACE_MB:,} MB: raise the limit (ulimit -v "
              f"{MIN_ADDRESS_SPACE_MB * 1024} or more)", file=sys.stderr)
        raise SystemExit(1)
    os.environ.setdefault("MALLOC_ARENA_MAX", str(ARENAS))  # read by the workers' glibc as they start
    try:
        import ctypes

        ctypes.CDLL(None).mallopt(-8, int(os.environ["MALLOC_ARENA_MAX"]))  # M_ARENA_MAX, for this process's threads
    except (OSError, AttributeError, ValueError):  # not glibc, or a value it cannot take: arenas as they are
        pass
