"""A host's session with its board: the host link, what the board holds, its clock, and
register operations.

The transmit and receive sides (driver/board_transmit.py, driver/board_receive.py) and
the data path that joins them (driver/board.py) reach the board only through this.

Time: everything measured in board cycles reaches the host through :class:`BoardClock`,
the measured rate of the board's cycle counter in host seconds. On hardware that is the
board's clock; a simulated board runs thousands of times slower, and the same conversion
makes its arrival gaps, its pacing and what it can take meaningful in real time
(docs/architecture.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ..formats import host_link as F
from ..formats.dram_csr import DramPhy
from ..formats.registers import (ADDRESS, COMMAND_WORD, DRAM_LEVELS_WORD, ENGINE_STATE, GEOMETRY_WORD, Command,
                                 dotted_quad)
from .dram_levelling import Injector, LevellingFailed, level
from .link import BoardLink
from .link_client import BoardInUse, LinkError, Pushed
from .link_requests import Part, Request

WIRE_BPS = 1e9
"""The board's Ethernet: gigabit."""
CLOCK_BASELINE = 0.3
"""Seconds of host time over which the board's clock is first measured."""
HARDWARE_MATCH = 0.05
"""A measured clock this close to CLOCK_HZ is the board's own: real hardware."""
RETRY_DATAGRAMS = 4
"""What the shortest retry time allows between replies, in full datagrams' time: the board
runs requests as they come, so with a whole window in flight each reply still follows the
one before within a few datagrams (the timer then follows the round trips it measures)."""
HOLD = 5.0
"""Seconds without a word from this host after which another may take the board: a
host that ends its session lets the next one in at once; one that died, after this."""
WAIT_FOR_BOARD = 3 * HOLD
"""Seconds a host waits for a board another host holds: a dead one's HOLD, and the
board's own millisecond after a host leaves (thousands of real ones when simulated)."""
LAST_WORDS = 0.5
"""Seconds a host told to stop still talks to its board: within a second of the signal it
is gone, whatever the board does."""
DRAM_CSR_SETTLE = 4
"""DRAM_CSR_BUSY reads after each access to the DRAM core's registers: its round trip
across the clocks takes about as long as four register reads."""

Operations = list[F.Operation]


class BoardClock:
    """Board cycles against host seconds, from (host time, CYCLES) samples.

    The 32-bit counter is unwrapped between samples. The rate is measured from the
    first sample, so it grows more exact as the transfer goes on.
    """

    def __init__(self, clock_hz: int) -> None:
        self.clock_hz = clock_hz
        self.first: tuple[float, int] | None = None
        self.last: tuple[float, int] | None = None
        self.rate = float(clock_hz)
        """Board cycles per host second."""
        self.measured = False

    def sample(self, now: float, cycles: int) -> None:
        if self.first is None or self.last is None:
            self.first = self.last = (now, cycles)
            return
        total = self.last[1] + ((cycles - self.last[1]) & 0xFFFF_FFFF)
        self.last = (now, total)
        span = now - self.first[0]
        if span > 0.05:
            measured = (total - self.first[1]) / span
            self.rate = self.clock_hz if abs(measured / self.clock_hz - 1) < HARDWARE_MATCH else measured
            self.measured = True

    @property
    def scale(self) -> float:
        """How fast the board runs against real time: 1 on hardware."""
        return self.rate / self.clock_hz

    def seconds(self, cycles: float) -> float:
        return cycles / self.rate

    def cycles(self, seconds: float) -> int:
        return max(1, round(seconds * self.rate))


@dataclass(frozen=True)
class Geometry:
    """What the board holds, from its registers."""

    tx_slots: int
    rx_slots: int
    slot_bytes: int
    max_packets: int
    beat_bytes: int
    clock_hz: int
    address: str
    fill: bool = False
    """FILL runs: the board makes the test pattern itself."""
    take: bool = False
    """TAKE runs: the board's source port fills slots from its source."""
    sink: bool = False
    """DRAIN runs: the board hands received buffers to gateware on its sink port."""
    check: bool = False
    """A pattern checker watches the sink port."""

    @classmethod
    def read(cls, values: dict[str, int]) -> Geometry:
        """Raises LinkError for registers that describe no engine (a board built from other
        sources, or not a netblt engine), which no transfer could use."""
        g = GEOMETRY_WORD.unpack(values["GEOMETRY"])
        if not (values["CLOCK_HZ"] and g["tx_slots"] and g["rx_slots"] and values["SLOT_BYTES"] and g["data_width"]):
            raise LinkError(f"the board describes no engine: {g['tx_slots']} transmit and {g['rx_slots']} receive "
                            f"slots of {values['SLOT_BYTES']} bytes, {g['data_width']}-bit data, "
                            f"a {values['CLOCK_HZ']} Hz clock")
        return cls(tx_slots=g["tx_slots"], rx_slots=g["rx_slots"], slot_bytes=values["SLOT_BYTES"],
                   max_packets=1 << g["log2_max_packets"], beat_bytes=g["data_width"] // 8,
                   clock_hz=values["CLOCK_HZ"], address=dotted_quad(values["IP_ADDRESS"]),
                   fill=bool(g["fill"]), take=bool(g["take"]), sink=bool(g["sink"]), check=bool(g["check"]))


class BoardSession:
    """The board at ``link`` (an open session): its geometry and clock read, the link's
    timers set from them. The pushes the link takes while waiting for
    replies are held until :meth:`listen` names who hears them."""

    def __init__(self, link: BoardLink, notice: Callable[[str], None] = lambda text: None) -> None:
        self.link, self.notice = link, notice
        self._held: list[Pushed] = []
        self.pushed: Callable[[Pushed], None] = self._held.append
        values = self.get("GEOMETRY", "SLOT_BYTES", "CLOCK_HZ", "IP_ADDRESS", "CYCLES")
        self.geometry = Geometry.read(values)
        self.clock = BoardClock(self.geometry.clock_hz)
        self._measure_clock(values["CYCLES"])
        self.link.client.timer.least, self.link.client.give_up = self._link_timers()
        # Each push as large as the link takes: every control packet waiting, one wake for all.
        self.set(TAKEOVER_AFTER=max(1, round(HOLD * 1000 * self.clock.scale)), PUSH_LIMIT=F.push_limit(link.mtu))

    @property
    def shown(self) -> str:
        return self.link.shown

    def listen(self, pushed: Callable[[Pushed], None]) -> None:
        """From now on each push goes to ``pushed`` as the link takes it, those taken so far
        (a previous host's events, which the board may still hold) first."""
        for held in self._held:
            pushed(held)
        self._held.clear()
        self.pushed = pushed

    # -- register operations -------------------------------------------------------------------

    def operations(self, operations: Operations, wait: bool = False, urgent: bool = False) -> list[int]:
        """Queue register operations (as few requests as fit); with ``wait``, their read
        values. Urgent ones go ahead of uploads and downloads queued (settings, reads,
        resends and control packets: none needs a transfer of data done first); commands
        on slots keep their place behind the data they follow."""
        requests = self.submit(operations, urgent)
        if not wait:
            return []
        replies = self.link.wait(requests)
        self.pushed(self.link.client.take_pushed())
        return [op.value for _, body in replies for op in F.decode_operations(body)
                if op.opcode & ~F.DONE == F.Opcode.READ]

    def submit(self, operations: Operations, urgent: bool = False) -> list[Request | Part]:
        return self.link.submit([(F.Type.REGISTERS, F.encode_operations(operations[at:at + F.MAX_OPERATIONS]), 0)
                                 for at in range(0, len(operations), F.MAX_OPERATIONS)], join=True, urgent=urgent)

    def write_words(self, name: str, data: bytes, then: Operations) -> None:
        """``data`` written to register ``name`` a word at a time (formats/host_link.py
        ``word_writes``), then ``then``, urgent: as :meth:`operations` would queue them,
        and QUIET where they write only (a control packet: nobody waits for its replies,
        which cost a receiving host a tenth of its CPU, four a CONTROL packet of 32
        messages)."""
        body, most = F.word_writes(ADDRESS[name], data) + F.encode_operations(then), F.MAX_OPERATIONS * F.OPERATION.end
        self.link.submit([(F.Type.REGISTERS, body[at:at + most], 0) for at in range(0, len(body), most)],
                         join=True, urgent=True, quiet=True)

    def set(self, **registers: int) -> None:
        self.operations([write(name, value) for name, value in registers.items()], urgent=True)

    def get(self, *names: str) -> dict[str, int]:
        return dict(zip(names, self.operations([read(n) for n in names], wait=True, urgent=True)))

    # -- slot memory ---------------------------------------------------------------------------------

    def upload(self, slot: int, data: bytes | memoryview, then: Operations | None = None) -> None:
        """``data`` into transmit slot ``slot`` once every request queued before has run,
        and the operations ``then`` (a SEND of it: one request's worth) just after, in the
        same run: its reply says the upload ran too, one wake for both."""
        after = Request(F.Type.REGISTERS, F.encode_operations(then)) if then else None
        self.link.upload(slot * self.geometry.slot_bytes // 4, data, after)

    def download(self, slot: int, size: int, reads: Operations) -> tuple[bytearray, list[int]]:
        """``size`` bytes of receive slot ``slot`` and the values of ``reads``, which run just
        before the download, in its run."""
        first = Request(F.Type.REGISTERS, F.encode_operations(reads))
        data = self.link.download(slot * self.geometry.slot_bytes // 4, size, first=first)
        assert first.reply is not None  # the download returns once it came
        values = [op.value for op in F.decode_operations(first.reply[1]) if op.opcode & ~F.DONE == F.Opcode.READ]
        return data, values

    # -- the session's life -----------------------------------------------------------------------

    def interrupt(self) -> None:
        """A signal came: what is left to tell the board has :data:`LAST_WORDS` seconds, then
        each wait is an error."""
        self.link.deadline = time.monotonic() + LAST_WORDS

    def close(self, **registers: int) -> None:
        """Let what is queued reach the board (a last QUIT or ABORT among it) with these
        settings written last (TAKEOVER_AFTER 0: the next host need not wait), then end."""
        client = self.link.client
        try:
            self.set(TAKEOVER_AFTER=0, **registers)
            self.link.wait([*client.urgent, *client.waiting, *client.unanswered_requests()])
        except LinkError:
            pass  # the board is gone; there is nothing more to tell it
        finally:
            self.link.close()

    def _measure_clock(self, cycles: int) -> None:
        """Sample CYCLES until the rate is known: at once on hardware, a baseline when simulated."""
        self.clock.sample(time.monotonic(), cycles)
        started = time.monotonic()
        while True:
            time.sleep(0.02)
            (cycles,) = self.operations([read("CYCLES")], wait=True)
            self.clock.sample(time.monotonic(), cycles)
            hardware = self.clock.measured and self.clock.rate == self.clock.clock_hz
            if hardware or time.monotonic() - started > CLOCK_BASELINE:
                return

    def _link_timers(self) -> tuple[float, float]:
        """The host link's shortest retry time: RETRY_DATAGRAMS full datagrams on the wire
        and back, three times over, in the board's time, plus a millisecond for the host. It
        gives up after 20 of them without a reply (at least 3 s), well inside a NETBLT death
        timer."""
        datagrams = RETRY_DATAGRAMS * (self.link.mtu + 38) * 8 / WIRE_BPS
        retry = 0.001 + 3 * datagrams / self.clock.scale
        return retry, max(3.0, 20 * retry)

    def ready_dram(self) -> None:
        """Slots in DRAM whose reads need levelling, not yet levelled since power-up: level
        them and hand the DRAM to its controller (driver/dram_levelling.py)."""
        values = self.get("DRAM_PHY", "STATE")
        phy = DramPhy.read(values["DRAM_PHY"])
        if not phy.levelling or ENGINE_STATE.unpack(values["STATE"])["slots_ready"]:
            return
        self.notice("levelling the board's DRAM reads (once after power-up: a few seconds)")
        injector = self.dram_injector(phy)
        try:
            levels = level(injector)
        except LevellingFailed as error:
            raise LinkError(f"the board's DRAM: {error}; its slots cannot be used") from None
        self.set(DRAM_LEVELS=DRAM_LEVELS_WORD.pack(**{
            f"{name}{m}": value for m, module in enumerate(levels)
            for name, value in (("delay", module.delay), ("bitslip", module.bitslip), ("levelled", 1))}))
        injector.hand_over()

    def dram_injector(self, phy: DramPhy) -> Injector:
        """LiteDRAM's injector on the board's DRAM core, through the DRAM_CSR registers: an
        access at a time, each waited for (one started while another crosses is ignored)."""

        def access(operations: Operations) -> int:
            # A few reads give the access time to cross and come back within the request.
            values = self.operations(operations + [read("DRAM_CSR_BUSY")] * DRAM_CSR_SETTLE + [read("DRAM_CSR_DATA")],
                                     wait=True)
            while values[-2]:
                values = self.operations([read("DRAM_CSR_BUSY"), read("DRAM_CSR_DATA")], wait=True)
            return values[-1]

        def store(address: int, value: int) -> None:
            access([write("DRAM_CSR_ADDRESS", address), write("DRAM_CSR_WRITE", value)])

        def load(address: int) -> int:
            return access([write("DRAM_CSR_ADDRESS", address), write("DRAM_CSR_READ", 1)])

        return Injector(phy, store, load)


def take(address: tuple[str, int], *, mtu: int | None = None,
         notice: Callable[[str], None] = lambda text: None) -> BoardLink:
    """A session with the board at ``address`` in datagrams of ``mtu`` bytes (None: the
    largest that reach it, :meth:`BoardLink.fit_mtu`), taken from a host that left or has
    been silent for HOLD seconds, waiting WAIT_FOR_BOARD at most (and saying so); raises
    LinkError."""
    link = BoardLink(address, give_up=2 * HOLD)  # until the board's clock is known
    try:
        link.fit_mtu(mtu)
        # A host that just left has given the board up, but only after one more of the
        # board's milliseconds: thousands of real ones on a simulated board.
        deadline, told = time.monotonic() + WAIT_FOR_BOARD, False
        while True:
            try:
                link.open(take_over=True)
                return link
            except BoardInUse as exc:
                if time.monotonic() > deadline:
                    raise BoardInUse(f"{exc}, after {WAIT_FOR_BOARD:g} s of waiting (a netblt host frees it "
                                     f"as it ends, or by {HOLD:g} s of silence if it died)") from None
                if not told:
                    notice(f"{exc}; waiting up to {WAIT_FOR_BOARD:g} s for it to end its session or go "
                           f"silent for {HOLD:g} s")
                    told = True
                time.sleep(0.1)
    except BaseException:
        link.close()
        raise


def leave(link: BoardLink) -> None:
    """End a session as a netblt host does: what is queued reaches the board, and the next
    host may take it at once."""
    try:
        link.many([(F.Type.REGISTERS, F.encode_operations([write("TAKEOVER_AFTER", 0)]), 0)])
    finally:
        link.close()


def command(op: Command, index: int, arg0: int = 0, arg1: int = 0, flag: int = 0) -> Operations:
    """A command on slot ``index``: its two arguments, then the COMMAND word that runs it."""
    return [write("ARG0", arg0), write("ARG1", arg1), write("COMMAND", COMMAND_WORD.pack(op=op, slot=index, flag=flag))]


def write(name: str, value: int) -> F.Operation:
    return F.Operation(F.Opcode.WRITE, ADDRESS[name], value & 0xFFFF_FFFF)


def read(name: str) -> F.Operation:
    return F.Operation(F.Opcode.READ, ADDRESS[name])
