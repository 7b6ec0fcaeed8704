"""Named deadlines for a sans-IO state machine: time is only ever passed in."""

from __future__ import annotations

from collections.abc import Hashable


class Timers:
    def __init__(self) -> None:
        self._at: dict[Hashable, float] = {}

    def set(self, key: Hashable, at: float) -> None:
        self._at[key] = at

    def shorten(self, key: Hashable, at: float) -> None:
        """Move ``key`` earlier to ``at``; a timer that is not running is left alone."""
        if key in self._at and at < self._at[key]:
            self._at[key] = at

    def cancel(self, key: Hashable) -> None:
        self._at.pop(key, None)

    def keep_only(self, *keys: Hashable) -> None:
        self._at = {k: at for k, at in self._at.items() if k in keys}

    def __contains__(self, key: Hashable) -> bool:
        return key in self._at

    @property
    def next(self) -> float | None:
        return min(self._at.values(), default=None)

    def pop_expired(self, now: float) -> list[Hashable]:
        """Keys whose deadline is at or before ``now``, earliest first, now cancelled."""
        due = sorted((at, i, key) for i, (key, at) in enumerate(self._at.items()) if at <= now)
        for _, _, key in due:
            del self._at[key]
        return [key for _, _, key in due]
