"""A search of a network for boards (``netblt board find``): a STATUS to each address,
which needs no session, so no host using a board is disturbed."""

from __future__ import annotations

import select
import socket
import time

from ..formats import host_link as F
from ..formats.registers import decode_snapshot

FIND_MOST = 4096
"""Addresses one search asks at most: a /20; a board's segment is a LAN."""


def find(addresses: list[str], port: int, timeout: float) -> dict[tuple[str, int], dict[str, int] | str]:
    """Boards that answer a STATUS (which needs no session, so no host is disturbed) at
    ``port`` of any of ``addresses``, within ``timeout`` seconds, by the address that
    answered: their registers, or why they cannot be read (another register table)."""
    found: dict[tuple[str, int], dict[str, int] | str] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        ask = F.encode(F.Header(F.Type.STATUS))
        for address in addresses:
            try:
                sock.sendto(ask, (address, port))
            except OSError:
                pass  # unreachable from here (no route): no board there for this host
        end = time.monotonic() + timeout
        while (left := end - time.monotonic()) > 0:
            if not select.select([sock], [], [], left)[0]:
                break
            try:
                datagram, source = sock.recvfrom(65536)
                header, body = F.decode(datagram)
            except (OSError, F.FormatError):
                continue  # an ICMP error from an address with no board, or not a board's answer
            if header.type == F.Type.STATUS | F.REPLY:
                try:
                    found[source] = decode_snapshot(body)
                except F.FormatError as exc:
                    found[source] = str(exc)
    return found
