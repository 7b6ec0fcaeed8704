"""The host link's MTU: which datagram sizes reach a board, probed at a session's start
(:meth:`~.link.BoardLink.fit_mtu`)."""

from __future__ import annotations

import errno
import select
import socket
import time

from ..formats import host_link as F
from .transport import waiting_datagrams

JUMBO = 9000
"""The largest IP datagram a host link carries where the host, the board and everything
between take jumbo frames (the Versa does; the Colorlight holds 8 KiB requests at most)."""
LINK_MTUS = (576, JUMBO)
"""The host-link MTUs a host may ask for: from IPv4's least to jumbo frames."""
PROBE_WAIT = 0.05
"""Seconds between the first two sends of the probes (then doubling until the small one is
answered), and between sends of a large one at least, once the small one has been."""
PROBE_ROUND_TRIPS = 20
"""The same in round trips of the small one: a board simulated thousands of times slower
than real time takes that much longer to take a jumbo frame off its wire."""
PROBE_TRIES = 6
"""Sends of a large probe once the small one is answered: a lossy link loses some (a tenth
lost each way leaves one in 20,000 unanswered after six, a third lost each way one in
50), and one that never reaches the board is named after six waits (a third of a second
on a LAN)."""


def reaches(sock: socket.socket, sizes: list[int], give_up: float) -> dict[int, bool] | None:
    """Which of ``sizes`` (IP datagrams) reach the board ``sock`` is connected to: a STATUS
    padded to each size (a board reads no STATUS body) and a small one, sent until the
    small one is answered, PROBE_WAIT apart and twice that at each send after (as the
    retry timer backs off). Each send's probes carry an ID of their own, so the small
    one's reply times its own round trip, not the losses before it; from then on the
    others are sent :data:`PROBE_TRIES` times, :data:`PROBE_ROUND_TRIPS` of that round trip
    apart (:data:`PROBE_WAIT` at least). None if none is answered in ``give_up`` seconds
    (no board there). (A wait of the time to the first answer, twenty times over, once
    held a session's start 10 s after one lost datagram.)"""
    numbers = [0, *sizes]  # a probe's ID: its send's number times len(numbers), plus its place here
    waiting = list(range(len(numbers)))
    sent_at: list[float] = []
    reached: set[int] = set()
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    now = time.monotonic()
    end, resend, apart, tries = now + give_up, now, PROBE_WAIT, 0
    while waiting and now < end:
        if now >= resend:
            if tries == PROBE_TRIES:
                break
            for place in list(waiting):
                size = numbers[place]
                probe = F.encode(F.Header(F.Type.STATUS, id=len(sent_at) * len(numbers) + place),
                                 bytes(max(0, size - F.IP_UDP_HEADERS - F.HEADER.end)))
                if not _sent(sock, probe):
                    waiting.remove(place)  # larger than this host's interface takes
            sent_at.append(now)
            resend = now + apart
            if 0 in reached:
                tries += 1
            else:
                apart = min(2 * apart, give_up / 8)
        poller.poll(max(0.0, min(resend, end) - time.monotonic()) * 1000)
        came = waiting_datagrams(sock)
        now = time.monotonic()
        for datagram in came:
            try:
                header, _ = F.decode(datagram)
            except F.FormatError:
                continue
            sent, place = divmod(header.id, len(numbers))
            if header.type != F.Type.STATUS | F.REPLY or sent >= len(sent_at) or place not in waiting:
                continue
            waiting.remove(place)
            reached.add(numbers[place])
            if place == 0:  # the board is there: the larger ones have a while to come
                apart = max(PROBE_WAIT, PROBE_ROUND_TRIPS * (now - sent_at[sent]))
                resend, tries = now + apart, 1
    if 0 not in reached:
        return None
    return {size: size in reached for size in sizes}


def _sent(sock: socket.socket, probe: bytes) -> bool:
    """False where this host's interface cannot send a datagram that large."""
    try:
        sock.send(probe)
    except BlockingIOError:
        pass
    except OSError as exc:
        if exc.errno != errno.EMSGSIZE:
            raise
        return False
    return True
