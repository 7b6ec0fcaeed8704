"""How much of a long path a board's outstanding data fills: the protocol alone, in
virtual time, at the Versa's DRAM geometry.

    python -m netblt.sim.outstanding_bench        (make bench-outstanding, about a minute)

Each case is a whole transfer between the real host engines (sim/virtual.py) with the
board's geometry: 4 MiB buffers, 16 outstanding (its 16 DRAM slots of 4 MiB each way),
1448-byte packets, paced at the 900 Mb/s the board offers (hw/boards.py, driver/board.py).
The board's own run of this, ``make bench-long-path``, takes hours of real time a case;
this shows in seconds what the protocol makes of that geometry on each path, and where
more would help. Figures only.
"""

from __future__ import annotations

import os

from rich.console import Console
from rich.table import Table

from netblt.host.params import Params, burst_for_rate, burst_rate_bps

from .netem import PathConfig
from .virtual import simulate

MIB = 1 << 20
PACKET = 1448
BOARD_BPS = 900e6
"""What a board paces DATA at when asked for more (90% of its wire)."""
CASES = [
    # round trip (s), MiB, loss each way, buffers outstanding, MiB a buffer
    (0.1, 64, 0.001, 16, 4),
    (0.1, 256, 0.001, 16, 4),
    (0.3, 256, 0.001, 16, 4),
    (0.6, 64, 0.001, 16, 4),
    (0.6, 256, 0.0, 16, 4),
    (0.6, 256, 0.001, 16, 4),
    (0.6, 256, 0.001, 32, 4),
    (0.6, 256, 0.001, 16, 8),
]


def middle_bps(done_at: list[tuple[float, int]]) -> float:
    """The rate data reached the receiving client between a quarter and three quarters
    of it: the sustained rate, without the start and the end."""
    total = sum(n for _, n in done_at)
    reached, times = 0, []
    for t, n in done_at:
        reached += n
        if reached >= total / 4 and not times or reached >= 3 * total / 4 and len(times) == 1:
            times.append((t, reached))
    (t0, r0), (t1, r1) = times
    return 8 * (r1 - r0) / (t1 - t0) if t1 > t0 else 0.0


def run(rtt: float, mib: int, loss: float, buffers: int, buffer_mib: int) -> tuple[float, float, int]:
    """(Mb/s over the whole transfer, over its middle half, packets resent)."""
    burst_size, burst_interval = burst_for_rate(BOARD_BPS, PACKET)
    params = Params(buffer_size=buffer_mib * MIB, packet_size=PACKET, burst_size=burst_size, burst_interval=burst_interval,
                    max_buffers=buffers, data_checksum=False, death_timer=600)
    data = os.urandom(mib * MIB)
    path = PathConfig(delay=rtt / 2, loss=loss)
    result = simulate(data, params, forward=path, backward=path, time_limit=600)
    if not result.ok or result.received != data:
        raise SystemExit(f"the transfer failed: {result.reason}")
    return (8 * len(data) / result.duration / 1e6, middle_bps(result.receiver.progress.done_at) / 1e6,
            result.sender.dp.tx.resent)


def main() -> int:
    burst_size, burst_interval = burst_for_rate(BOARD_BPS, PACKET)
    paced = burst_rate_bps(burst_size, burst_interval, PACKET) / 1e6
    table = Table(title=f"Paced at {paced:.1f} Mb/s of data, 1448-byte packets (virtual time; the Versa's DRAM "
                        "build holds 16 buffers of 4 MiB each way)")
    for column in ("round trip", "MiB", "loss each way", "outstanding", "path needs (rate x RTT)",
                   "whole transfer Mb/s", "middle half Mb/s", "of the pace", "resent"):
        table.add_column(column, justify="right")
    for rtt, mib, loss, buffers, buffer_mib in CASES:
        whole, middle, resent = run(rtt, mib, loss, buffers, buffer_mib)
        table.add_row(f"{rtt * 1e3:.0f} ms", str(mib), f"{loss:.1%}", f"{buffers} x {buffer_mib} MiB",
                      f"{paced * 1e6 * rtt / 8 / MIB:.1f} MiB", f"{whole:.1f}", f"{middle:.1f}",
                      f"{middle / paced:.0%}", str(resent))
    Console(width=160).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
