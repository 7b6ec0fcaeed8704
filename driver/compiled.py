"""The data paths' compiled parts, where the install built them with the system's C
compiler: driver/_fastpath.c (DATA packed and placed, the test pattern) and
driver/_linkpath.c (the host link's bulk runs). None where it could not: the same work
then runs in Python, slower, and the tests hold the two to the same results."""

try:
    from . import _fastpath as fastpath
except ImportError:
    fastpath = None  # type: ignore[assignment]  # an optional extension: None where not built

try:
    from . import _linkpath as linkpath
except ImportError:
    linkpath = None  # type: ignore[assignment]

__all__ = ["fastpath", "linkpath"]
