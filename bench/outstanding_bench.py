"""How much of a long path a board's outstanding data fills: the protocol alone, in
virtual time, at the Versa's DRAM geometry.

    python -m netblt.bench.outstanding_bench        (make bench-outstanding, about a minute)

Each case is a whole transfer between the real protocol cores (sim/wan/virtual.py) with the
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

from ..driver.board import DATA_SHARE
from ..driver.board_session import WIRE_BPS
from ..driver.transport import default_packet_size
from ..hw.boards import BOARDS
from ..protocol.params import Params, burst_for_rate, burst_rate_bps
from ..sim.wan.netem import PathConfig
from ..sim.wan.virtual import simulate

MIB = 1 << 20
PACKET = default_packet_size("127.0.0.1", "udp")
VERSA = BOARDS["versa_ecp5"].dram_slots
"""The geometry: its slots each way, each a buffer."""
BURST = burst_for_rate(DATA_SHARE * WIRE_BPS, PACKET)
"""Burst size and interval at what a board paces DATA at when asked for more."""
CASES = [
    # round trip (s), MiB, loss each way, buffers outstanding (in the Versa's), buffer size (in its slot's)
    (0.1, 64, 0.001, 1, 1),
    (0.1, 256, 0.001, 1, 1),
    (0.3, 256, 0.001, 1, 1),
    (0.6, 64, 0.001, 1, 1),
    (0.6, 256, 0.0, 1, 1),
    (0.6, 256, 0.001, 1, 1),
    (0.6, 256, 0.001, 2, 1),
    (0.6, 256, 0.001, 1, 2),
]


def middle_bps(done_at: list[tuple[float, int]]) -> float:
    """The rate data reached the receiving client between a quarter and three quarters
    of it: the sustained rate, without the start and the end."""
    total = sum(n for _, n in done_at)
    reached, crossed = 0, []
    for t, n in done_at:
        reached += n
        if len(crossed) < 2 and reached >= total * (1 + 2 * len(crossed)) / 4:
            crossed.append((t, reached))
    (t0, r0), (t1, r1) = crossed
    return 8 * (r1 - r0) / (t1 - t0) if t1 > t0 else 0.0


def run(rtt: float, mib: int, loss: float, buffers: int, buffer_size: int) -> tuple[float, float, float, int]:
    """(Mb/s over the whole transfer, from the OPEN out to the last OK in, over the
    middle half, packets resent). The second is what the board's runs (make
    bench-long-path) measure at its wire; the first waits for both ends to close too."""
    params = Params(buffer_size=buffer_size, packet_size=PACKET, burst_size=BURST[0], burst_interval=BURST[1],
                    max_buffers=buffers, data_checksum=False, death_timer=600)
    data = os.urandom(mib * MIB)
    path = PathConfig(delay=rtt / 2, loss=loss)
    result = simulate(data, params, forward=path, backward=path, time_limit=600)
    if not result.ok or result.received != data:
        raise SystemExit(f"the transfer failed: {result.reason}")
    last_ok = result.sender.progress.done_at[-1][0]  # the sender's OPEN left at 0
    return (8 * len(data) / result.duration / 1e6, 8 * len(data) / last_ok / 1e6,
            middle_bps(result.receiver.progress.done_at) / 1e6, result.sender.dp.tx.resent)


def main() -> int:
    paced = burst_rate_bps(*BURST, PACKET) / 1e6
    table = Table(title=f"Paced at {paced:.1f} Mb/s of data, {PACKET}-byte packets (virtual time; the Versa's DRAM "
                        f"build holds {VERSA.tx_slots} buffers of {VERSA.slot_bytes // MIB} MiB each way)")
    for column in ("round trip", "MiB", "loss each way", "outstanding", "path needs (rate x RTT)",
                   "whole transfer Mb/s", "OPEN to last OK Mb/s", "middle half Mb/s", "of the pace", "resent"):
        table.add_column(column, justify="right")
    for rtt, mib, loss, more_buffers, larger in CASES:
        buffers, buffer_size = VERSA.tx_slots * more_buffers, VERSA.slot_bytes * larger
        whole, to_last_ok, middle, resent = run(rtt, mib, loss, buffers, buffer_size)
        table.add_row(f"{rtt * 1e3:.0f} ms", str(mib), f"{loss:.1%}", f"{buffers} x {buffer_size // MIB} MiB",
                      f"{paced * 1e6 * rtt / 8 / MIB:.1f} MiB", f"{whole:.1f}", f"{to_last_ok:.1f}", f"{middle:.1f}",
                      f"{middle / paced:.0%}", str(resent))
    Console(width=160).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
