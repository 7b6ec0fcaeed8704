"""SIGINT and SIGTERM held back while a block that must not be cut short runs."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

STOPPING = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def stops_deferred(hurry: Callable[[], None] = lambda: None) -> Iterator[None]:
    """SIGINT and SIGTERM that come while the block runs act once it has ended, by the
    handlers it found; ``hurry`` is called as one comes (a board's data path then waits
    on its board no longer than a moment). (Blocking them is not enough: another thread
    of the process, a progress bar's or the metrics server's, takes the signal, and
    Python runs the handler in the main thread at once.) Off the main thread, where no
    handler can be set, the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def held(signum: int, frame: object) -> None:
        pending.append(signum)
        hurry()

    handlers = {signum: signal.signal(signum, held) for signum in STOPPING}
    try:
        yield
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        if pending:
            handler = handlers[pending[0]]
            if callable(handler):
                handler(pending[0], None)
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), pending[0])
