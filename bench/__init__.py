"""The benchmarks behind docs/benchmarks.md, each a ``python -m netblt.bench.NAME``
script that prints its figures (the Makefile's ``bench-*`` targets run them). They sit
on top of every other layer."""

import os
import signal
import sys


def namespaces_allowed(name: str, needs: str) -> bool:
    """Ready a benchmark that makes network namespaces: SIGTERM then ends it as Ctrl-C does
    (so they go); without root it says so and the answer is False."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    if os.geteuid():
        print(f"{name}: needs root ({needs})", file=sys.stderr)
        return False
    return True
