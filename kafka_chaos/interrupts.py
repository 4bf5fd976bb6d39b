"""Interrupts: Ctrl-C (SIGINT) and SIGTERM (what CI sends on cancel) end a run, a campaign or a shrink the same way.

The first signal sets `STOPPING` (client, observer and nemesis threads shorten their waits when it is set) and
raises KeyboardInterrupt in the main thread, which unwinds through every context manager, so clusters are
removed. A cleanup step that must run whole (removing a cluster) runs inside `deferred()`: a signal arriving
there is held and raised when the step ends. Later signals do not cut the cleanup short; the third one exits at
once (say so, and leave `kafka-chaos clean` to the user).

Exit codes: 130 after SIGINT, 143 after SIGTERM (128 + the signal's number, as shells report a process a signal
ended). This module imports nothing of the project, so every layer may poll `STOPPING`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

STOPPING = threading.Event()
"""Set by the first SIGINT or SIGTERM: every waiting loop of the harness ends its wait early."""

STOP_GRACE_S = 3.0
"""How long a stop waits for a thread once interrupted, before leaving it (a daemon) behind."""

FORCE_AFTER = 3
"""The signal that exits at once, without cleanup."""

_signals: list[int] = []
_deferring = 0
_pending = False


def _handle(signum: int, frame: FrameType | None) -> None:
    global _pending
    _signals.append(signum)
    STOPPING.set()
    if len(_signals) >= FORCE_AFTER:
        sys.stderr.write(f"\n{signal.Signals(signum).name} again: exiting without cleanup; "
                         "run `kafka-chaos clean` to remove what is left\n")
        sys.stderr.flush()
        os._exit(exit_code())
    if len(_signals) > 1:
        sys.stderr.write(f"\n{signal.Signals(signum).name}: already stopping (cleaning up); "
                         f"{FORCE_AFTER - len(_signals)} more to exit without cleanup\n")
        sys.stderr.flush()
        return
    if _deferring:
        _pending = True
        return
    raise KeyboardInterrupt


@contextlib.contextmanager
def handling() -> Iterator[None]:
    """SIGINT and SIGTERM handled as above while the block runs (in the main thread; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _handle) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A signal arriving inside the block is raised (as KeyboardInterrupt) only when the block has ended."""
    global _deferring, _pending
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
        if not _deferring and _pending:
            _pending = False
            raise KeyboardInterrupt


def interrupted() -> bool:
    return STOPPING.is_set()


def received() -> int | None:
    """The first signal received, if any."""
    return _signals[0] if _signals else None


def exit_code() -> int:
    """143 after SIGTERM, otherwise (SIGINT, or a KeyboardInterrupt raised some other way) 130."""
    return 128 + signal.SIGTERM if received() == signal.SIGTERM else 128 + signal.SIGINT


def bounded(timeout_s: float | None) -> float | None:
    """A wait's timeout, shortened to STOP_GRACE_S once interrupted."""
    if not STOPPING.is_set():
        return timeout_s
    return STOP_GRACE_S if timeout_s is None else min(timeout_s, STOP_GRACE_S)


def join(thread: threading.Thread, timeout_s: float | None = None) -> bool:
    """Join the thread within `bounded(timeout_s)`; whether it ended (a daemon left behind does not hold exit)."""
    if thread.ident is None:
        return True  # never started
    thread.join(bounded(timeout_s))
    return not thread.is_alive()


def outcome(left: dict[str, list[str]] | None, error: str | None = None) -> str:
    """What an interrupted command says last: only what was checked. `left`: what is still there, by kind."""
    signum = received()
    what = f"interrupted ({signal.Signals(signum).name})" if signum else "interrupted"
    if error is not None or left is None:
        return (f"{what}: could not check that everything it started was removed ({error}); "
                "run `kafka-chaos clean`")
    remaining = {kind: names for kind, names in left.items() if names}
    if not remaining:
        return (f"{what}: checked, no container, network or volume it started is left "
                "(runs cut short are marked incomplete)")
    listed = "; ".join(f"{len(names)} {kind} ({', '.join(sorted(names))})" for kind, names in remaining.items())
    return f"{what}: still left: {listed}; run `kafka-chaos clean` to remove them"


def reset() -> None:
    """Forget earlier signals (a process that goes on after an interrupt it handled, e.g. a test)."""
    global _pending, _deferring
    _signals.clear()
    STOPPING.clear()
    _pending = False
    _deferring = 0
