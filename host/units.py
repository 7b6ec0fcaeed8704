"""Command-line quantities with units: rates, sizes, durations, probabilities; addresses to serve on."""

from __future__ import annotations

import argparse
import re

from ..driver.transport import Address, TransportError, parse_address

_RATE = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*([kKmMgG]?)(?:b(?:it)?(?:/s|ps)?)?\s*")
_SIZE = re.compile(r"\s*(\d+)\s*([kKmMgG]?)i?[bB]?\s*")
_DURATION = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*(us|ms|s)?\s*")


def parse_rate(text: str) -> float:
    """``950M``, ``1.2G``, ``64k`` or plain bits per second."""
    match = _RATE.fullmatch(text)
    if not match or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"bad rate {text!r}: use e.g. 950M, 1.2G or 64k (bits/s)")
    return float(match.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[match.group(2).lower()]


def parse_size(text: str) -> int:
    """``1448``, ``64K``, ``4M`` (binary multiples) bytes, at least 1."""
    match = _SIZE.fullmatch(text)
    if not match or int(match.group(1)) < 1:
        raise argparse.ArgumentTypeError(f"bad size {text!r}: use e.g. 1448, 64K or 4M")
    return int(match.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[match.group(2).lower()]


def parse_port(text: str) -> int:
    """A UDP port, 0..65535 (0: any)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 0xFFFF:
        raise argparse.ArgumentTypeError(f"port {port} is outside 0..65535")
    return port


def parse_duration(text: str) -> float:
    """``200ms``, ``1.5s``, ``30us`` or ``0``; any other bare number is refused (is 100 ms or s meant?)."""
    match = _DURATION.fullmatch(text)
    if not match:
        raise argparse.ArgumentTypeError(f"bad duration {text!r}: use e.g. 200ms, 1.5s or 30us")
    value, unit = float(match.group(1)), match.group(2)
    if unit is None and value != 0:
        raise argparse.ArgumentTypeError(f"duration {text!r} needs a unit: {text}ms or {text}s")
    return value * {"us": 1e-6, "ms": 1e-3, "s": 1.0, None: 1.0}[unit]


def parse_probability(text: str) -> float:
    """``0.05`` or ``5%``."""
    try:
        value = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad probability {text!r}: use e.g. 0.05 or 5%") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"probability {text!r} is outside 0..1")
    return value


def positive(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def parse_listen_address(text: str) -> Address:
    """``ADDR:PORT`` to serve on (``--metrics``): a port is needed."""
    try:
        address = parse_address(text, default_port=0)
    except TransportError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if address[1] == 0:
        raise argparse.ArgumentTypeError(f"{text!r} needs a port")
    return address
