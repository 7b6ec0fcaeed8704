"""The host link's executor: docs/host-link.md's rules, as the engine's register-bus master.

One request at a time from the intake's FIFO. Its header decides (owner, session, ID
window); an executed request's reply is written into the store at the place its ID
names, with the sum its checksum needs, and kept there for replay; the sender sends it.
Bulk data moves over the engine's own memory registers a word a cycle (UPLOAD_DATA
writes and DOWNLOAD_DATA reads step their addresses). Between requests the executor
builds event pushes for the owner: EVENT words and received control packets, popped
over the bus once and kept in the store until the owner's ``ack`` covers the push.

The bus is driven from registers (the engine's register block is far away on the
chip), so a read's value arrives two cycles after it is decided; reads are pipelined,
one a cycle, where many are wanted (a status snapshot, a push, a download).
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.asserts import AnyConst
from amaranth.hdl import Assert, Assume, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from ..formats import host_link as F
from ..formats.registers import ADDRESS, ENGINE_REGISTERS, LINK_BASE, LINK_REGISTERS, REGISTER_MAP
from .headers import header_bytes, header_fields, lanes, to_beats
from .link_intake import big_endian
from .link_sender import (AREA_WORDS, PUSH_AREA, PUSH_WORDS, SCRATCH, SEND_COMMAND, STATUS_AREA, STATUS_WORDS,
                          STORE_ADDRESS_WIDTH)
from .packet_fifo import CONTROL_META
from .readout import CounterBank, register_select
from .receive_store import READ_AHEAD
from .register_bus import RegisterBus
from .transmit_path import UPLOAD_ROOM

HEADER_WORDS = F.HEADER.end // 4
DOWNLOAD_QUEUE = 8
"""Words read from slot memory and not yet taken by the sender, where slot memory is
block RAM: it gives a word a cycle, faster than the wire takes them."""
STAGED_DOWNLOAD_QUEUE = 512
"""The same where slot memory is DRAM: a reply's body, up to a 1500-byte frame's 370
words, is read whole before the reply starts. LiteEth sends a frame as it comes, so a
word late mid-frame cuts the frame short (a bad FCS on the wire); and after a seek, or
at a staging line's end, DRAM's words can come late."""
UPLOADS_UNSEEN = 2
"""UPLOAD_DATA writes on their way that the engine's UPLOAD_ROOM does not show yet."""
KEPT = data.StructLayout({"words": 12, "sum": 32, "count": 16, "step": 16, "value": 32})
"""A kept reply's record: its stored words and their sum; for a DOWNLOAD, its data's word
count (0: none), words a reply datagram and address, read again on replay."""
VALUE_WORD = F.HEADER.field("value").offset // 4
"""The link header's word that a DOWNLOAD's each reply rewrites: where its words start."""
ID_FIELD = F.HEADER.field("id")
PUSH_STATES = ("PUSH_EVENTS", "PUSH_CONTROL", "PUSH_LENGTH", "PUSH_FROM", "PUSH_PORT", "PUSH_PACKET", "PUSH_DONE")
STATUS_STATES = ("STATUS", "STATUS_ENGINE", "STATUS_LINK")
OPEN_STATES = ("OPEN", "OPEN_OWNER", "OPEN_PORT", "OPEN_SILENT")
REGISTER_STATES = {"REGISTERS": 0, "OP_VALUE": 1, "OP_ACCESS": 2, "OP_WAIT": 2, "OP_RESULT": 2, "OP_REPLY": 2,
                   "OP_REPLY_VALUE": 1}
"""The states of a REGISTERS request, each with the request words it has taken for
reply words it has not yet appended (the proof's invariants)."""
READING_STATES = ("STATUS_ENGINE", "OP_WAIT", "OP_RESULT", "PUSH_EVENTS", "PUSH_LENGTH", "PUSH_FROM", "PUSH_PORT",
                  "PUSH_PACKET", "STREAM_WORDS")
"""The states with bus reads on their way (the proof's invariants)."""
EXECUTING_STATES = (*REGISTER_STATES, "UPLOAD", "UPLOAD_WORDS", "DOWNLOAD", "DOWNLOAD_STEP", "FIRST_PART")
"""The states of a request that runs, before its reply's header is written."""
SNAPSHOT = [ADDRESS[r.name] if r.access in ("r", "rw") else None for r in ENGINE_REGISTERS]
"""What a status snapshot reads of the engine: registers that neither pop nor strobe."""
COUNTERS = ("LINK_EXECUTED", "LINK_REPLAYED", "LINK_REFUSED", "LINK_STALE", "LINK_DROPPED", "LINK_PUSHES",
            "LINK_PUSH_RETRIES")


@dataclass(frozen=True)
class BoardIdentity:
    """What the board tells a host about itself, fixed when the bitstream is built."""

    ip_address: int
    mac_address: int
    board: int = 0
    netmask: int = 0xFFFF_FF00
    gateway: int = 0
    clock_hz: int = 50_000_000


def wire(value: Value) -> Value:
    """A number of up to 32 bits as the store keeps it: its four bytes in wire order, big-endian."""
    return big_endian(Cat(value, Const(0, 32))[:32])


class LinkExecutor(wiring.Component):
    def __init__(self, identity: BoardIdentity, download_queue: int = DOWNLOAD_QUEUE, formal: bool = False) -> None:
        """``formal``: with the properties (:meth:`properties`), for SymbiYosys (sim/rtl/formal.py)."""
        self.identity, self.download_queue, self.formal = identity, download_queue, formal
        super().__init__({
            "payload": In(stream.Signature(32)),
            "meta": In(stream.Signature(CONTROL_META)),
            "bus": Out(RegisterBus()),
            "store": In(memory.WritePort.Signature(addr_width=STORE_ADDRESS_WIDTH, shape=32)),
            "send": Out(stream.Signature(SEND_COMMAND)),
            "body": Out(stream.Signature(32)),
            "sender_busy": In(1),
            "sender_start": In(STORE_ADDRESS_WIDTH),
            "events_waiting": In(1),
            "control_next": In(16),  # bytes of the next control packet waiting (0: none)
            "download_level": In(range(READ_AHEAD + 1)),  # the engine's DOWNLOAD_LEVEL, as a wire
            "upload_room": In(range(UPLOAD_ROOM + 1)),  # the engine's UPLOAD_ROOM, as a wire
            "dropped": In(2),
            "link_up": In(1),
            "netmask": Out(32),
            "gateway": Out(32),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        self.m = m
        ident = self.identity
        defaults = {"NETMASK": ident.netmask, "GATEWAY": ident.gateway,
                    "PUSH_TIMEOUT": ident.clock_hz // 1000, "TAKEOVER_AFTER": 10_000,
                    "PUSH_LIMIT": F.push_limit(1500),
                    # Under proof a hold after reset, so that a search finds a push that skips it in few steps.
                    "PUSH_HOLD": 2 if self.formal else 0}
        self.regs = regs = {r.name: Signal(r.width, name=r.name.lower(), init=defaults.get(r.name, 0))
                            for r in LINK_REGISTERS if r.name not in COUNTERS}
        m.d.comb += [self.netmask.eq(regs["NETMASK"]), self.gateway.eq(regs["GATEWAY"])]
        self._constants()
        self._clocks()
        self._bus()
        self._state()
        self._store()
        self._link_read()
        with m.FSM() as self.fsm:
            self._receive()
            self._decide()
            self._registers()
            self._upload()
            self._download()
            self._snapshot()
            self._open()
            self._push()
            self._reply()
        if self.formal:
            self.properties()
        return m

    def properties(self) -> None:
        """docs/host-link.md's promises, whatever datagrams come (the harness leaves every
        input free): a request runs only when its ID is the one expected next, in the
        owner's session, and the expected ID then moves on by one (so each runs at most
        once, in order); the pushes are numbered without gaps; another host takes a
        session over only after its owner was silent for TAKEOVER_AFTER; and the store's
        side (:meth:`_reply_properties`); events alone wait PUSH_HOLD (:meth:`_hold_properties`)."""
        m, regs, f = self.m, self.regs, self.fields
        was = {name: Signal.like(regs[name], name=f"was_{name.lower()}")
               for name in ("LINK_SESSION", "LINK_NEXT_ID", "LINK_PUSH_NUMBER", "LINK_OWNER_ADDRESS", "LINK_OWNER_PORT")}
        ran, pushed, silent_long, started = Signal(), Signal(), Signal(), Signal()
        m.d.sync += [*(was[name].eq(regs[name]) for name in was), started.eq(1),
                     ran.eq(self.strobes["LINK_EXECUTED"]), pushed.eq(self.strobes["LINK_PUSHES"]),
                     silent_long.eq(self.fsm.ongoing("OPEN") & f["flags"][0]
                                    & (regs["LINK_OWNER_SILENT"] > regs["TAKEOVER_AFTER"]))]
        owner = (self.source == regs["LINK_OWNER_ADDRESS"]) & (self.source_port == regs["LINK_OWNER_PORT"])
        with m.If(self.strobes["LINK_EXECUTED"]):
            m.d.comb += Assert((f["id"] == regs["LINK_NEXT_ID"]) & owner & regs["LINK_SESSION"].any()
                               & (f["session"] == regs["LINK_SESSION"]), "a request runs only if it is the one expected")
        new_session = regs["LINK_SESSION"] != was["LINK_SESSION"]
        moved = (regs["LINK_OWNER_ADDRESS"] != was["LINK_OWNER_ADDRESS"]) | (regs["LINK_OWNER_PORT"] != was["LINK_OWNER_PORT"])
        with m.If(started):
            m.d.comb += [
                Assert(regs["LINK_NEXT_ID"] == Mux(new_session, 1, was["LINK_NEXT_ID"] + ran)[:16],
                       "the expected ID moves on by one as a request runs, and only then"),
                Assert(regs["LINK_PUSH_NUMBER"] == Mux(new_session, 0, was["LINK_PUSH_NUMBER"] + pushed)[:16],
                       "pushes are numbered without gaps"),
                Assert(~moved | ~was["LINK_SESSION"].any() | silent_long,
                       "a session changes hands only after its owner's silence")]
        self._hold_properties()
        self._reply_properties()
        self.invariants()

    def _hold_properties(self) -> None:
        """Events go in a new push without a control packet only once they have waited
        PUSH_HOLD cycles: ``waited`` counts the cycles they have waited (one short of the
        clock's count from ``events_since``, which :meth:`invariants` ties it to)."""
        m, regs = self.m, self.regs
        self.waited = waited = Signal(32, init=-1)
        m.d.sync += waited.eq(Mux(self.events_waiting, waited + 1, 0))
        with m.If(self.fsm.ongoing("IDLE") & self.push_due & ~self.push_pending & ~self.control_next.any()):
            m.d.comb += Assert(waited >= regs["PUSH_HOLD"], "events alone wait PUSH_HOLD for a control packet")

    def _reply_properties(self) -> None:
        """The store's side: every word written stays inside its reply's area; a reply
        leaves a request's area only with the ID of the request that ran there last in
        this session; a replay is of the request it names. One area is watched, the
        solver's choice (so every one is): what ran there (``watched_ran``,
        ``watched_id``) and the ID its stored header holds (``stored_id``)."""
        m, f = self.m, self.fields
        self.watched = watched = AnyConst(range(F.WINDOW))
        self.watched_ran, self.watched_id, self.stored_id = Signal(), Signal(16), Signal(16)
        with m.If(self.strobes["LINK_EXECUTED"] & (self.slot == watched)):
            m.d.sync += [self.watched_ran.eq(1), self.watched_id.eq(f["id"])]
        with m.Elif(self.session_opened):
            m.d.sync += self.watched_ran.eq(0)
        id_bytes = lanes(self.store.data, 4)[ID_FIELD.offset % 4:][:ID_FIELD.width]
        with m.If(self.store.en & (self.store.addr == watched * AREA_WORDS + ID_FIELD.offset // 4)):
            m.d.sync += self.stored_id.eq(Cat(*reversed(id_bytes)))
        # The engine's promises: no control packet longer than its FIFO holds (hw/node.py),
        # and the length read is the one seen waiting (only the executor pops).
        self.seen = Signal(16)
        m.d.comb += Assume(self.control_next <= F.CONTROL_MOST)
        with m.If(self.fsm.ongoing("PUSH_CONTROL")):
            m.d.sync += self.seen.eq(self.control_next)
        with m.If(self.fsm.ongoing("PUSH_LENGTH") & self.returned):
            m.d.comb += Assume(self.bus.r_data <= self.seen)

        room = Mux(self.area == PUSH_AREA, PUSH_WORDS, Mux(self.area == STATUS_AREA, STATUS_WORDS, AREA_WORDS))
        with m.If(self.store_en):
            m.d.comb += Assert(self.store_index < room, "a reply's words stay inside its area")
        with m.If(self.send.valid & self.send.ready & (self.send.payload.start == watched * AREA_WORDS)):
            m.d.comb += Assert(self.watched_ran & (self.stored_id == self.watched_id),
                               "a reply is sent only for a request that ran")
        with m.If(self.fsm.ongoing("REPLAY") & (self.slot == watched)):
            m.d.comb += Assert(self.watched_ran & (self.watched_id == f["id"]) & (self.stored_id == f["id"]),
                               "a replay is of the request it names")

    def _ongoing(self, *states: str) -> Value:
        return Cat(*(self.fsm.ongoing(state) for state in states)).any()

    def invariants(self) -> None:
        """What makes the proof close by induction: a push being built is numbered the one
        after the last; each reply is built in its kind's area, with room for what its
        state still appends; bus reads are on their way only in the states that wait for
        them; what :meth:`_reply_properties` watches agrees with the store; and the events'
        wait counted as the executor counts it."""
        m, regs = self.m, self.regs
        with m.If(self._ongoing(*PUSH_STATES)):
            m.d.comb += Assert(self.reply_id == (regs["LINK_PUSH_NUMBER"] + 1)[:16], "a new push is the next number")
        m.d.comb += Assert((self.cycles - self.events_since)[:32] == (self.waited + 1)[:32],
                           "events' wait is counted from their start")
        self._area_invariants()
        self._room_invariants()
        self._push_invariants()
        self._read_invariants()
        self._watched_invariants()

    def _area_invariants(self) -> None:
        """Each state's reply is in its kind's area; a request's reply kept, streamed or
        quiet only where its kind allows."""
        m, ongoing, request_area = self.m, self._ongoing, self.slot * AREA_WORDS
        replying = ongoing("HEAD", "HEAD_WORDS", "SEND")
        for states, area in (((*PUSH_STATES, "PUSH"), PUSH_AREA), (STATUS_STATES, STATUS_AREA), (OPEN_STATES, SCRATCH),
                             (EXECUTING_STATES, request_area)):
            with m.If(ongoing(*states)):
                m.d.comb += Assert((self.area == area) & (self.streamed == 0), "a reply is built in its kind's area")
        with m.If(replying):
            m.d.comb += Assert(Cat(*(self.area == area for area in (request_area, SCRATCH, STATUS_AREA, PUSH_AREA))).any(),
                               "a reply is built in its kind's area")
        with m.If(ongoing("PART", "STREAM", "STREAM_WORDS") | replying & (self.streamed != 0)):
            m.d.comb += Assert(self.area == request_area, "a DOWNLOAD's reply is in its request's area")
        with m.If(self.keep):
            m.d.comb += Assert(ongoing(*EXECUTING_STATES, "HEAD", "HEAD_WORDS", "SEND", "STREAM", "STREAM_WORDS")
                               & (self.area == request_area) & ~(self.fsm.ongoing("STREAM_WORDS") & self.primed),
                               "a reply to keep is in its request's area")
        with m.If(self.quiet):
            m.d.comb += Assert(~ongoing("PART", "STREAM", "STREAM_WORDS", "PUSH", *PUSH_STATES, *STATUS_STATES, *OPEN_STATES,
                                        "DOWNLOAD", "DOWNLOAD_STEP", "FIRST_PART")
                               & (self.streamed == 0), "a quiet reply is an UPLOAD's or a REGISTERS request's")
        with m.If(ongoing("STREAM", "STREAM_WORDS")):
            m.d.comb += Assert(self.streamed != 0, "a DOWNLOAD streams words")
        with m.If(self.primed):
            m.d.comb += Assert((self.fsm.ongoing("STREAM_WORDS") | self.fsm.ongoing("SEND") & (self.download_in_flight == 0))
                               & (self.streamed != 0), "a DOWNLOAD's words are queued before its reply")

    def _room_invariants(self) -> None:
        """The words a reply has, against what its state still appends: a header's four,
        two for each register operation, a snapshot's map and registers, OPEN's three."""
        m = self.m
        with m.If(self.fsm.ongoing("HEAD_WORDS")):
            m.d.comb += Assert(self.head_word < HEADER_WORDS, "a header's words")
        for state, owed in REGISTER_STATES.items():
            with m.If(self.fsm.ongoing(state)):
                m.d.comb += Assert(self.at + self.left + owed <= 2 * F.MAX_OPERATIONS, "room for the operations")
        index, written, was_read = self.snapshot_counts
        with m.If(self.fsm.ongoing("STATUS")):
            m.d.comb += Assert(self.at == 0, "a snapshot's first word")
        with m.If(self.fsm.ongoing("STATUS_ENGINE")):
            # Reads run two ahead of the words written, and stop at the last register.
            ahead = Mux(written + 2 > len(SNAPSHOT), len(SNAPSHOT), written + 2)
            m.d.comb += Assert((self.at == 1 + written) & (written < len(SNAPSHOT))
                               & Mux(index < 2, written == 0, index == ahead)
                               & (Cat(*was_read) == Cat(*self.read_issued))
                               & (~was_read[0] | (written + 1 < len(SNAPSHOT))), "a snapshot's engine words")
        with m.If(self.fsm.ongoing("STATUS_LINK")):
            m.d.comb += Assert((self.at == 1 + len(SNAPSHOT) + index) & (index < len(LINK_REGISTERS)),
                               "a snapshot's link words")
        for i, state in enumerate(OPEN_STATES):
            with m.If(self.fsm.ongoing(state)):
                m.d.comb += Assert(self.at == max(i - 1, 0), "an OPEN reply's words")

    def _push_invariants(self) -> None:
        """A push's words: events, then whole control packets while they fit its room (the
        first whatever its size, which PUSH_WORDS leaves room for after the most events)."""
        m, at = self.m, self.at
        issued, in_flight, left, room, event_room, packed = self.push_counts
        record = F.CONTROL_RECORD.end // 4
        m.d.comb += Assert(room <= F.PUSH_WORDS, "a push's room")
        with m.If(self.fsm.ongoing("PUSH")):
            m.d.comb += Assert(at == 0, "a push's first word")
        with m.If(self.fsm.ongoing("PUSH_EVENTS")):
            m.d.comb += Assert(~packed & (at + in_flight <= issued) & (issued <= event_room)
                               & (event_room <= F.EVENTS_PER_PUSH), "a push's events")
        for state, appended in (("PUSH_FROM", 1), ("PUSH_PORT", 2)):
            with m.If(self.fsm.ongoing(state)):
                m.d.comb += Assert(HEADER_WORDS + at + record - appended + left <= F.PUSH_WORDS,
                                   "a push's room for the packet")
        with m.If(self.fsm.ongoing("PUSH_PACKET")):
            m.d.comb += Assert(packed & (HEADER_WORDS + at + left - issued + in_flight <= F.PUSH_WORDS)
                               & (in_flight <= issued) & (issued <= left), "a push's room for the packet's words")
        with m.If(self._ongoing("PUSH_LENGTH", "PUSH_FROM", "PUSH_PORT")):
            m.d.comb += Assert(packed, "a push's packet")

    def _read_invariants(self) -> None:
        """Bus reads on their way (two cycles each) are the ones their state counts."""
        m, ongoing = self.m, self._ongoing
        reads = self.read_issued[0] + self.read_issued[1]
        _, push_in_flight, *_ = self.push_counts
        with m.If(~ongoing(*READING_STATES)):
            m.d.comb += Assert(reads == 0, "reads end where they were issued")
        with m.If(ongoing("PUSH_EVENTS", "PUSH_PACKET")):
            m.d.comb += Assert(push_in_flight == reads, "a push's reads in flight")
        with m.If(self.fsm.ongoing("STREAM_WORDS")):
            m.d.comb += Assert(self.download_in_flight == reads, "a DOWNLOAD's reads in flight")

    def _watched_invariants(self) -> None:
        """The watched area: what ran there last is in the window; a kept reply's header
        has its ID; a reply in hand there is of the request that ran."""
        m, f, regs, ongoing = self.m, self.fields, self.regs, self._ongoing
        watched, watched_id, stored_id = self.watched, self.watched_id, self.stored_id
        kept = self.kept.bit_select(watched, 1)
        behind = (regs["LINK_NEXT_ID"] - watched_id)[:16]
        with m.If(self.watched_ran):
            m.d.comb += Assert((watched_id % F.WINDOW == watched) & (behind >= 1) & (behind <= F.WINDOW),
                               "what ran at the slot is in the window")
        with m.If(kept):
            m.d.comb += Assert(self.watched_ran & (stored_id == watched_id), "a kept reply is of what ran")
        mine = self.area == watched * AREA_WORDS
        in_hand = (self.slot == watched) & self.watched_ran & (watched_id == f["id"])
        with m.If(mine & ongoing(*EXECUTING_STATES)):
            m.d.comb += Assert(in_hand & self.keep & (self.reply_id == f["id"]), "a reply being built is of what ran")
        with m.If(mine & ongoing("HEAD", "HEAD_WORDS", "SEND", "PART", "STREAM", "STREAM_WORDS")):
            header_written = ~self.fsm.ongoing("HEAD") & (~self.fsm.ongoing("HEAD_WORDS")
                                                          | (self.head_word > ID_FIELD.offset // 4))
            m.d.comb += Assert(in_hand & Mux(self.keep, self.reply_id == f["id"], kept & header_written)
                               & (~header_written | (stored_id == watched_id)), "a reply in hand is of what ran")

    # -- what lives beside the FSM -------------------------------------------------------------

    def _constants(self) -> None:
        m, regs, ident = self.m, self.regs, self.identity
        for name, value in {"BOARD": ident.board, "IP_ADDRESS": ident.ip_address,
                            "MAC_HIGH": ident.mac_address >> 32, "MAC_LOW": ident.mac_address & 0xFFFF_FFFF,
                            "REGISTER_MAP": REGISTER_MAP, "LINK_WINDOW": F.WINDOW}.items():
            m.d.comb += regs[name].eq(value)
        m.d.comb += regs["LINK_UP"].eq(self.link_up)
        self.strobes = {name: Signal(name=f"{name.lower()}_strobe") for name in COUNTERS}
        # LINK_DROPPED counts the intake's two drops as well as its own: up to 3 a cycle.
        m.submodules.counters = self.counters = CounterBank(len(COUNTERS), most=3)
        for i, (name, strobe) in enumerate(self.strobes.items()):
            extra = self.dropped[0] + self.dropped[1] if name == "LINK_DROPPED" else 0
            m.d.comb += self.counters.add[i].eq(strobe + extra)

    def _clocks(self) -> None:
        """Cycles, for the push timers; milliseconds, for the owner's silence."""
        m, regs = self.m, self.regs
        self.cycles = Signal(32)
        m.d.sync += self.cycles.eq(self.cycles + 1)
        self.events_since = Signal(32)
        """The cycle before the events waiting began to wait, for PUSH_HOLD."""
        with m.If(~self.events_waiting):
            m.d.sync += self.events_since.eq(self.cycles)
        per_ms = self.identity.clock_hz // 1000
        tick = Signal(range(per_ms))
        m.d.sync += tick.eq(Mux(tick == per_ms - 1, 0, tick + 1))
        self.heard = Signal()
        """The owner was heard this cycle: its silence starts again."""
        silent = regs["LINK_OWNER_SILENT"]
        with m.If(self.heard):
            m.d.sync += silent.eq(0)
        with m.Elif((tick == 0) & (silent != 0xFFFF_FFFF)):
            m.d.sync += silent.eq(silent + 1)

    def _link_read(self) -> None:
        """The link registers' one read mux: ``link_value`` is the one ``link_index`` names
        (0 past the last)."""
        self.link_index = Signal(8)
        self.link_value = register_select(self.m, self.link_index, [self.regs.get(r.name, 0) for r in LINK_REGISTERS],
                                          self.counters, ADDRESS[COUNTERS[0]] - LINK_BASE)

    def _count(self, name: str) -> None:
        self.m.d.comb += self.strobes[name].eq(1)

    def _bus(self) -> None:
        """The bus from registers; ``read(address)`` returns two cycles later as ``returned``."""
        m, bus = self.m, self.bus
        m.d.sync += [bus.w_en.eq(0), bus.r_en.eq(0)]
        self.read_issued = [Signal(name=f"read_issued{i}") for i in range(2)]
        m.d.sync += [self.read_issued[0].eq(0), self.read_issued[1].eq(self.read_issued[0])]
        self.returned = Signal()
        m.d.comb += self.returned.eq(self.read_issued[1])

    def bus_read(self, address) -> None:
        self.m.d.sync += [self.bus.addr.eq(address), self.bus.r_en.eq(1), self.read_issued[0].eq(1)]

    def bus_write(self, address, value) -> None:
        self.m.d.sync += [self.bus.addr.eq(address), self.bus.w_data.eq(value), self.bus.w_en.eq(1)]

    def _state(self) -> None:
        m = self.m
        # The request in hand.
        self.source, self.source_port, self.left = Signal(32), Signal(16), Signal(12)
        self.head = [Signal(32, name=f"head{i}") for i in range(HEADER_WORDS)]
        self.fields = header_fields([F.HEADER], [b for w in self.head for b in lanes(w, 4)])
        # Replies kept for replay, by ID modulo the window: which are, and each one's record
        # (small memories, read as the request's ID names them).
        self.kept = Signal(F.WINDOW)
        self.session_opened = Signal()
        """A new session begins this cycle: no reply is kept (driven for the proof only)."""
        self.slot = Signal(range(F.WINDOW))
        m.d.comb += self.slot.eq(self.fields["id"] % F.WINDOW)
        m.submodules.kept_replies = replies = memory.Memory(shape=KEPT, depth=F.WINDOW, init=[])
        self.kept_record, self.keeping = replies.read_port(domain="comb"), replies.write_port()
        m.d.comb += [self.kept_record.addr.eq(self.slot), self.keeping.addr.eq(self.slot)]
        # The reply being built: its area of the store, its body words so far and their sum.
        self.area, self.at, self.sum = Signal(STORE_ADDRESS_WIDTH), Signal(12), Signal(32)
        self.status, self.reply_type, self.reply_id = Signal(8), Signal(8), Signal(16)
        self.streamed = Signal(12)
        """Words the sender takes from ``body`` after the stored ones."""
        self.keep = Signal()
        """The reply is kept for replay at the request ID's place."""
        self.quiet = Signal()
        """The reply is kept and not sent: an UPLOAD or REGISTERS request that asked for none
        (F.FLAG_QUIET)."""
        # A DOWNLOAD's words from this reply on, in replies of ``step``; this reply's address.
        self.total, self.step, self.value = Signal(16), Signal(16), Signal(32)
        # The event push.
        self.push_pending, self.push_sent_at = Signal(), Signal(32)
        self.push_words, self.push_sum = Signal(12), Signal(32)
        # The store is written only where the sender is not reading.
        self.writable = Signal()
        m.d.comb += self.writable.eq(~(self.sender_busy & (self.sender_start == self.area)))
        with m.If(self.payload.valid & self.payload.ready):
            m.d.sync += self.left.eq(self.left - 1)
        # DOWNLOAD data on its way to the sender.
        m.submodules.queue = self.queue = fifo.SyncFIFOBuffered(width=32, depth=self.download_queue)
        m.d.comb += [self.body.payload.eq(self.queue.r_data), self.body.valid.eq(self.queue.r_rdy),
                     self.queue.r_en.eq(self.body.ready)]

    def _store(self) -> None:
        """One write port into the reply's area and one adder for its sum, whichever state
        writes (a state only names the word and where it goes)."""
        m = self.m
        self.store_index, self.store_data, self.store_en = Signal(12), Signal(32), Signal()
        self.appending = Signal()
        value = big_endian(self.store_data)
        m.d.comb += [self.store.addr.eq(self.area + self.store_index), self.store.data.eq(self.store_data),
                     self.store.en.eq(self.store_en)]
        with m.If(self.store_en):
            m.d.sync += self.sum.eq(self.sum + value[16:] + value[:16])
        with m.If(self.appending):
            m.d.sync += self.at.eq(self.at + 1)

    def store_word(self, index, word) -> None:
        """Write ``word`` (wire order) at ``index`` of the reply's area; it counts in the sum."""
        self.m.d.comb += [self.store_index.eq(index), self.store_data.eq(word), self.store_en.eq(1)]

    def append(self, word) -> None:
        """The body's next word."""
        self.store_word(HEADER_WORDS + self.at, word)
        self.m.d.comb += self.appending.eq(1)

    def take(self, when: Value | int = 1) -> Value:
        """Consume the request's next word now (if it is there and ``when``): true when taken.
        Call it before an If chain, not inside one's condition."""
        ready = (self.left != 0) & when
        self.m.d.comb += self.payload.ready.eq(ready)
        return self.payload.valid & ready

    def begin(self, area, reply_type, status=F.Status.OK, keep=False, quiet=False) -> None:
        """Start building a reply in ``area``."""
        self.m.d.sync += [self.area.eq(area), self.at.eq(0), self.sum.eq(0), self.status.eq(status),
                          self.reply_type.eq(reply_type), self.keep.eq(keep), self.quiet.eq(quiet),
                          self.streamed.eq(0),
                          self.reply_id.eq(self.fields["id"])]

    # -- a request comes in and is judged -------------------------------------------------------------

    def _receive(self) -> None:
        m, regs = self.m, self.regs
        # Events wait PUSH_HOLD for a control packet to go with them (a sender's SENT for
        # its peer's OK: one wake of the host for both); a control packet goes at once.
        events_due = self.events_waiting & ((self.cycles - self.events_since)[:32] > regs["PUSH_HOLD"])
        self.push_due = push_due = regs["LINK_SESSION"].any() & Mux(
            self.push_pending, (self.cycles - self.push_sent_at)[:32] > regs["PUSH_TIMEOUT"],
            events_due | self.control_next.any())
        with m.State("IDLE"):
            # A push goes first: a host keeps requests queued for as long as a file's
            # uploads take, and events waiting behind them would wait that long. Pushes
            # cannot starve requests: the next is due only once the owner's ACK (a
            # request) has come, or after PUSH_TIMEOUT.
            m.d.sync += self.at.eq(0)
            with m.If(push_due):
                self.begin(PUSH_AREA, F.Type.EVENTS)
                m.next = "PUSH"
            with m.Elif(self.meta.valid):
                m.d.comb += self.meta.ready.eq(1)
                m.d.sync += [self.source.eq(self.meta.payload.address), self.source_port.eq(self.meta.payload.port),
                             self.left.eq(self.meta.payload.length >> 2)]
                m.next = "HEADER"
        with m.State("HEADER"):
            taken = self.take()
            with m.If(taken):
                m.d.sync += [self.head[i].eq(self.head[i + 1]) for i in range(HEADER_WORDS - 1)]
                m.d.sync += [self.head[-1].eq(self.payload.payload), self.at.eq(self.at + 1)]
                with m.If(self.at == HEADER_WORDS - 1):
                    m.next = "DECIDE"
        with m.State("DRAIN"):
            self.take()
            with m.If(self.left == 0):
                m.next = "IDLE"

    def _decide(self) -> None:
        m, regs, f = self.m, self.regs, self.fields
        behind = (regs["LINK_NEXT_ID"] - f["id"])[:16]
        kept = (behind >= 1) & (behind <= F.WINDOW) & self.kept.bit_select(self.slot, 1)
        owner = (self.source == regs["LINK_OWNER_ADDRESS"]) & (self.source_port == regs["LINK_OWNER_PORT"])
        in_session = regs["LINK_SESSION"].any() & (f["session"] == regs["LINK_SESSION"])
        words = self.left
        with m.State("DECIDE"):
            with m.If(f["version"] != F.VERSION):
                self._count("LINK_DROPPED")
                m.next = "DRAIN"
            with m.Elif(f["type"] == F.Type.STATUS):
                self.begin(STATUS_AREA, F.Type.STATUS | F.REPLY)
                m.next = "STATUS"
            with m.Elif(f["type"] == F.Type.OPEN):
                self.begin(SCRATCH, F.Type.OPEN | F.REPLY)
                m.next = "OPEN"
            with m.Elif(~in_session):
                self._count("LINK_STALE")
                self._refuse(F.Status.NO_SESSION)
            with m.Elif(~owner):
                self._count("LINK_REFUSED")
                self._refuse(F.Status.NOT_OWNER)
            with m.Else():
                m.d.comb += self.heard.eq(1)
                with m.If(self.push_pending & (f["ack"] == regs["LINK_PUSH_NUMBER"])):
                    m.d.sync += self.push_pending.eq(0)
                with m.If(f["type"] == F.Type.ACK):
                    m.next = "DRAIN"
                with m.Elif((f["type"] == F.Type.RESEND) | (behind != 0)):
                    with m.If(kept):
                        self._count("LINK_REPLAYED")
                        m.next = "REPLAY"
                    with m.Else():
                        self._count("LINK_STALE")
                        self._refuse(F.Status.OUT_OF_WINDOW)
                with m.Elif((f["type"] == F.Type.REGISTERS) & (words != 0) & ~words[0]
                            & (words <= 2 * F.MAX_OPERATIONS)):
                    self._execute(m, "REGISTERS")
                with m.Elif(f["type"] == F.Type.UPLOAD):
                    self._execute(m, "UPLOAD")
                with m.Elif((f["type"] == F.Type.DOWNLOAD) & ((words == 1) | (words == 2))):
                    self._execute(m, "DOWNLOAD")
                with m.Else():
                    self._count("LINK_DROPPED")
                    self._refuse(F.Status.MALFORMED)

    def _execute(self, m: Module, state: str) -> None:
        f, regs = self.fields, self.regs
        quiet = ((f["type"] == F.Type.UPLOAD) | (f["type"] == F.Type.REGISTERS)) & (f["flags"] & F.FLAG_QUIET).any()
        self.begin(self.slot * AREA_WORDS, f["type"] | F.REPLY, keep=True, quiet=quiet)
        m.d.sync += [regs["LINK_NEXT_ID"].eq(regs["LINK_NEXT_ID"] + 1), self.kept.bit_select(self.slot, 1).eq(0)]
        self._count("LINK_EXECUTED")
        m.next = state

    def _refuse(self, status: F.Status) -> None:
        self.begin(SCRATCH, self.fields["type"] | F.REPLY, status)
        self.m.next = "HEAD"

    # -- the requests ---------------------------------------------------------------------------------

    def _registers(self) -> None:
        """Each operation: its two words, the access (engine registers on the bus, the link's
        here), then the two words of its reply."""
        m, regs = self.m, self.regs
        op_words = [Signal(32, name="op_word"), Signal(32, name="op_value")]
        result = Signal(32)
        op = header_fields([F.OPERATION], [*lanes(op_words[0], 4), *lanes(op_words[1], 4)])
        register, opcode, op_value = op["register"], op["opcode"], op["value"]
        local = register >= LINK_BASE
        known = (opcode == F.Opcode.WRITE) | (opcode == F.Opcode.READ)
        with m.State("REGISTERS"):
            taken = self.take(self.writable)
            with m.If(self.left == 0):
                m.next = "HEAD"
            with m.Elif(taken):
                m.d.sync += op_words[0].eq(self.payload.payload)
                m.next = "OP_VALUE"
        with m.State("OP_VALUE"):
            taken = self.take()
            with m.If(taken):
                m.d.sync += op_words[1].eq(self.payload.payload)
                m.next = "OP_ACCESS"
        with m.State("OP_ACCESS"):
            m.d.comb += self.link_index.eq((register - LINK_BASE)[:8])
            m.d.sync += result.eq(op_value)
            with m.If(opcode == F.Opcode.WRITE):
                with m.If(local):
                    with m.Switch(register):
                        for r in LINK_REGISTERS:
                            if r.access == "rw":
                                with m.Case(ADDRESS[r.name]):
                                    m.d.sync += regs[r.name].eq(op_value)
                with m.Else():
                    self.bus_write(register, op_value)
            with m.Elif(opcode == F.Opcode.READ):
                with m.If(local):
                    m.d.sync += result.eq(self.link_value)
                with m.Else():
                    self.bus_read(register)
            m.next = "OP_WAIT"
        with m.State("OP_WAIT"):
            m.next = "OP_RESULT"
        with m.State("OP_RESULT"):
            with m.If(self.returned):
                m.d.sync += result.eq(self.bus.r_data)
            m.next = "OP_REPLY"
        with m.State("OP_REPLY"):
            done = Mux(known, opcode | F.DONE, opcode)
            self.append(to_beats(header_bytes([F.OPERATION], {"opcode": done, "register": register}), 4)[0])
            m.next = "OP_REPLY_VALUE"
        with m.State("OP_REPLY_VALUE"):
            self.append(wire(result))
            m.next = "REGISTERS"

    def _upload(self) -> None:
        """The words go to transmit slot memory as they come, a word a cycle while the
        engine has room. A write reaches its room two cycles after this block decides on
        it (the bus register, then control.py's), so room is counted net of two."""
        m = self.m
        with m.State("UPLOAD"):
            self.bus_write(ADDRESS["UPLOAD_ADDRESS"], self.fields["value"])
            m.next = "UPLOAD_WORDS"
        with m.State("UPLOAD_WORDS"):
            taken = self.take(self.upload_room > UPLOADS_UNSEEN)
            with m.If(self.left == 0):
                m.next = "HEAD"
            with m.Elif(taken):
                self.bus_write(ADDRESS["UPLOAD_DATA"], self.payload.payload)

    def _download(self) -> None:
        """The reply's link header is stored (and kept, with where the data lies and how
        it is cut); its words are read from receive slot memory, again on a replay. A
        reply is sent once the queue holds its words, or is full; the rest are read as
        the sender takes words. A DOWNLOAD of two words asks for its words in parts of
        the second's: a reply each, one after another, the stored header's ``value``
        rewritten for each (formats/host_link.py ``download_parts``)."""
        m, f = self.m, self.fields
        total, step, value = self.total, self.step, self.value
        part, issued, in_flight = Signal(12), Signal(12), Signal(range(3))
        self.download_in_flight = in_flight
        primed = self.primed = Signal()
        """The queue has been filled and the reply sent (SEND then streams the body)."""
        words = Signal(32)
        m.d.comb += words.eq(big_endian(self.payload.payload))
        with m.State("DOWNLOAD"):
            taken = self.take()
            with m.If(taken):
                most = Mux(words > F.DOWNLOAD_MOST, F.DOWNLOAD_MOST, words)
                m.d.sync += [total.eq(most), step.eq(Mux(most > F.PART_MOST, F.PART_MOST, most)),
                             value.eq(f["value"])]
                m.next = "DOWNLOAD_STEP"
                with m.If(self.left == 1):
                    m.next = "FIRST_PART"
        with m.State("DOWNLOAD_STEP"):
            taken = self.take()
            with m.If(taken):
                with m.If((words != 0) & (words < total) & (words <= F.PART_MOST)):
                    m.d.sync += step.eq(words)
                m.next = "FIRST_PART"
        with m.State("FIRST_PART"):
            m.d.sync += [part.eq(Mux(total > step, step, total)), self.streamed.eq(Mux(total > step, step, total))]
            m.next = "HEAD"
        with m.State("REPLAY"):
            kept = self.kept_record.data
            m.d.sync += [self.area.eq(self.slot * AREA_WORDS), self.at.eq(kept.words - HEADER_WORDS),
                         self.sum.eq(kept.sum), self.streamed.eq(0), total.eq(kept.count), step.eq(kept.step),
                         value.eq(kept.value), self.keep.eq(0), self.quiet.eq(0)]
            with m.If(kept.count != 0):
                m.next = "PART"
            with m.Else():
                m.next = "SEND"
        with m.State("PART"):
            # The next reply of a DOWNLOAD (or a replay's first): once the sender is done
            # with this area, the header says where its words start.
            with m.If(self.writable):
                self.store_word(VALUE_WORD, wire(value))
                m.d.sync += [part.eq(Mux(total > step, step, total)), self.streamed.eq(Mux(total > step, step, total))]
                m.next = "SEND"
        with m.State("STREAM"):
            self.bus_write(ADDRESS["DOWNLOAD_ADDRESS"], value)
            m.d.sync += [issued.eq(0), in_flight.eq(0), primed.eq(0)]
            m.next = "STREAM_WORDS"
        with m.State("STREAM_WORDS"):
            room = self.queue.level + in_flight + 1 < self.download_queue
            # Only words the engine has ready: the read issued last cycle (r_en now) takes
            # one of them this cycle, and ``download_level`` shows it gone next cycle.
            ready = self.download_level > self.bus.r_en
            issue = (issued != part) & room & ready
            with m.If(issue):
                self.bus_read(ADDRESS["DOWNLOAD_DATA"])
                m.d.sync += issued.eq(issued + 1)
            m.d.sync += in_flight.eq(in_flight + issue - self.returned)
            m.d.comb += [self.queue.w_data.eq(self.bus.r_data), self.queue.w_en.eq(self.returned)]
            settled = (in_flight == 0) & ~self.returned
            with m.If(~primed & settled & ((issued == part) | ~room)):
                m.d.sync += primed.eq(1)
                m.next = "SEND"
            with m.Elif(primed & settled & (issued == part)):
                m.d.sync += [primed.eq(0), total.eq(total - part), value.eq(value + part)]
                m.next = "DRAIN"
                with m.If(total != part):
                    m.next = "PART"

    def _snapshot(self) -> None:
        """STATUS: REGISTER_MAP, every engine register that does not pop, every link register."""
        m, regs = self.m, self.regs
        readable = Const(sum(1 << i for i, a in enumerate(SNAPSHOT) if a is not None), len(SNAPSHOT))
        index, written = Signal(range(len(SNAPSHOT) + 1)), Signal(range(len(SNAPSHOT) + 1))
        was_read = [Signal(name=f"was_read{i}") for i in range(2)]
        self.snapshot_counts = (index, written, was_read)
        with m.State("STATUS"):
            with m.If(self.writable):
                self.append(wire(regs["REGISTER_MAP"]))
                m.d.sync += [index.eq(0), written.eq(0), was_read[0].eq(0), was_read[1].eq(0)]
                m.next = "STATUS_ENGINE"
        with m.State("STATUS_ENGINE"):
            with m.If(index < len(SNAPSHOT)):
                with m.If(readable.bit_select(index, 1)):
                    self.bus_read(index)
                m.d.sync += [index.eq(index + 1), was_read[0].eq(readable.bit_select(index, 1))]
            with m.Else():
                m.d.sync += was_read[0].eq(0)
            m.d.sync += was_read[1].eq(was_read[0])
            # Two cycles behind the reads: their values (0 where nothing was read), in order.
            with m.If(index >= 2):
                self.append(wire(Mux(was_read[1], self.bus.r_data, 0)))
                m.d.sync += written.eq(written + 1)
            with m.If(written == len(SNAPSHOT) - 1):
                m.d.sync += index.eq(0)
                m.next = "STATUS_LINK"
        with m.State("STATUS_LINK"):
            m.d.comb += self.link_index.eq(index)
            self.append(wire(self.link_value))
            m.d.sync += index.eq(index + 1)
            with m.If(index == len(LINK_REGISTERS) - 1):
                m.next = "HEAD"

    def _open(self) -> None:
        """OPEN: a new owner when there is none, the owner again, or a take-over of a silent one."""
        m, regs, f = self.m, self.regs, self.fields
        owner = (self.source == regs["LINK_OWNER_ADDRESS"]) & (self.source_port == regs["LINK_OWNER_PORT"])
        silent_long = regs["LINK_OWNER_SILENT"] > regs["TAKEOVER_AFTER"]
        taking_over = f["flags"][0] & silent_long
        with m.State("OPEN"):
            with m.If(~regs["LINK_SESSION"].any() | owner | taking_over):
                with m.If(f["session"] != regs["LINK_SESSION"]):
                    if self.formal:  # what the proof watches (a wire more would move the bitstream's placement)
                        m.d.comb += self.session_opened.eq(1)
                    m.d.sync += [regs["LINK_SESSION"].eq(f["session"]), regs["LINK_NEXT_ID"].eq(1),
                                 regs["LINK_PUSH_NUMBER"].eq(0), self.push_pending.eq(0), self.kept.eq(0)]
                m.d.sync += [regs["LINK_OWNER_ADDRESS"].eq(self.source), regs["LINK_OWNER_PORT"].eq(self.source_port)]
                m.d.comb += self.heard.eq(1)
            with m.Else():
                m.d.sync += self.status.eq(F.Status.NOT_OWNER)
                self._count("LINK_REFUSED")
            m.next = "OPEN_OWNER"
        with m.State("OPEN_OWNER"):
            with m.If(self.writable):
                self.append(wire(regs["LINK_OWNER_ADDRESS"]))
                m.next = "OPEN_PORT"
        with m.State("OPEN_PORT"):
            self.append(wire(regs["LINK_OWNER_PORT"]))
            m.next = "OPEN_SILENT"
        with m.State("OPEN_SILENT"):
            self.append(wire(regs["LINK_OWNER_SILENT"]))
            m.next = "HEAD"

    def _push(self) -> None:
        """An unacknowledged push again; else a new one: the events waiting, then the
        control packets, each popped over the bus exactly once, while they fit the push's
        words (PUSH_LIMIT, within the store's area: formats/host_link.py ``push_room``),
        the first whatever its size."""
        m, regs = self.m, self.regs
        issued, in_flight, left = Signal(12), Signal(range(3)), Signal(12)
        room, event_room, packed = Signal(range(F.PUSH_WORDS + 1)), Signal(range(F.EVENTS_PER_PUSH + 1)), Signal()
        self.push_counts = (issued, in_flight, left, room, event_room, packed)
        limit = regs["PUSH_LIMIT"]
        words = Mux(limit > F.PUSH_WORDS, F.PUSH_WORDS, Mux(limit < F.PUSH_LEAST, F.PUSH_LEAST, limit))
        with m.State("PUSH"):
            with m.If(self.push_pending):
                m.d.sync += [self.at.eq(self.push_words - HEADER_WORDS), self.sum.eq(self.push_sum),
                             self.reply_id.eq(regs["LINK_PUSH_NUMBER"])]
                self._count("LINK_PUSH_RETRIES")
                m.next = "SEND"
            with m.Elif(self.writable):
                m.d.sync += [issued.eq(0), in_flight.eq(0), self.reply_id.eq(regs["LINK_PUSH_NUMBER"] + 1),
                             room.eq(words), packed.eq(0),
                             event_room.eq(Mux(words - HEADER_WORDS < F.EVENTS_PER_PUSH, words - HEADER_WORDS,
                                               F.EVENTS_PER_PUSH))]
                m.next = "PUSH_EVENTS"
        with m.State("PUSH_EVENTS"):
            # EVENT reads one a cycle while events wait; reading past the last one pops nothing
            # and reads 0 (its valid bit, bit 31, clear), so a read or two too many is harmless.
            issue = (issued != event_room) & self.events_waiting
            with m.If(issue):
                self.bus_read(ADDRESS["EVENT"])
                m.d.sync += issued.eq(issued + 1)
            m.d.sync += in_flight.eq(in_flight + issue - self.returned)
            with m.If(self.returned & self.bus.r_data[31]):
                self.append(wire(self.bus.r_data))
            with m.If((~issue) & (in_flight == 0) & ~self.returned):
                m.next = "PUSH_CONTROL"
        with m.State("PUSH_CONTROL"):
            record = F.CONTROL_RECORD.end // 4 + ((self.control_next + 3) >> 2)
            with m.If(self.control_next.any() & (~packed | (HEADER_WORDS + self.at + record <= room))):
                self.bus_read(ADDRESS["CONTROL_LENGTH"])
                m.d.sync += packed.eq(1)
                m.next = "PUSH_LENGTH"
            with m.Else():
                m.next = "PUSH_DONE"
        with m.State("PUSH_LENGTH"):
            with m.If(self.returned & (self.bus.r_data == 0)):
                m.next = "PUSH_DONE"  # the packet was not there after all
            with m.Elif(self.returned):
                m.d.sync += left.eq((self.bus.r_data + 3) >> 2)
                self.append(wire(self.bus.r_data))
                self.bus_read(ADDRESS["CONTROL_FROM"])
                m.next = "PUSH_FROM"
        with m.State("PUSH_FROM"):
            with m.If(self.returned):
                self.append(wire(self.bus.r_data))
                self.bus_read(ADDRESS["CONTROL_PORT"])
                m.next = "PUSH_PORT"
        with m.State("PUSH_PORT"):
            with m.If(self.returned):
                self.append(wire(self.bus.r_data))
                m.d.sync += [issued.eq(0), in_flight.eq(0)]
                m.next = "PUSH_PACKET"
        with m.State("PUSH_PACKET"):
            issue = issued != left
            with m.If(issue):
                self.bus_read(ADDRESS["CONTROL_DATA"])
                m.d.sync += issued.eq(issued + 1)
            m.d.sync += in_flight.eq(in_flight + issue - self.returned)
            with m.If(self.returned):
                self.append(self.bus.r_data)  # packet words are kept in wire order already
            with m.If(~issue & (in_flight == 0) & ~self.returned):
                m.next = "PUSH_CONTROL"  # the next, if it fits
        with m.State("PUSH_DONE"):
            with m.If(self.at == 0):
                m.next = "IDLE"  # nothing was waiting after all
            with m.Else():
                m.d.sync += [regs["LINK_PUSH_NUMBER"].eq(self.reply_id), self.push_pending.eq(1)]
                self._count("LINK_PUSHES")
                m.next = "HEAD"

    # -- the reply goes out ---------------------------------------------------------------------------

    def _reply(self) -> None:
        m, regs, f = self.m, self.regs, self.fields
        header = to_beats(header_bytes([F.HEADER], {
            "version": F.VERSION, "type": self.reply_type, "status": self.status, "id": self.reply_id,
            "ack": regs["LINK_NEXT_ID"], "session": regs["LINK_SESSION"], "value": f["value"]}), 4)
        word = Signal(range(HEADER_WORDS + 1))
        self.head_word = word
        with m.State("HEAD"):
            with m.If(self.writable):
                m.d.sync += word.eq(0)
                m.next = "HEAD_WORDS"
        with m.State("HEAD_WORDS"):
            with m.Switch(word):
                for i, beat in enumerate(header):
                    with m.Case(i):
                        self.store_word(i, beat)
            m.d.sync += word.eq(word + 1)
            with m.If(word == HEADER_WORDS - 1):
                m.next = "SEND"
        with m.State("SEND"):
            command = self.send.payload
            stored = self.at + HEADER_WORDS
            with m.If((self.streamed != 0) & ~self.primed):
                m.next = "STREAM"  # a DOWNLOAD's body is queued first
            m.d.comb += [self.send.valid.eq(((self.streamed == 0) | self.primed) & ~self.quiet), command.start.eq(self.area),
                         command.stored.eq(stored),
                         command.words.eq(stored + self.streamed), command.sum.eq(self.sum),
                         command.address.eq(Mux(self.area == PUSH_AREA, regs["LINK_OWNER_ADDRESS"], self.source)),
                         command.port.eq(Mux(self.area == PUSH_AREA, regs["LINK_OWNER_PORT"], self.source_port))]
            with m.If((self.send.valid & self.send.ready) | self.quiet):
                with m.If(self.keep):  # a DOWNLOAD's first reply, which has its whole request
                    m.d.sync += [self.kept.bit_select(self.slot, 1).eq(1), self.keep.eq(0)]
                    record = self.keeping.data
                    m.d.comb += [self.keeping.en.eq(1), record.words.eq(stored), record.sum.eq(self.sum),
                                 record.count.eq(Mux(self.streamed != 0, self.total, 0)), record.step.eq(self.step),
                                 record.value.eq(f["value"])]
                with m.If(self.area == PUSH_AREA):
                    m.d.sync += [self.push_words.eq(stored), self.push_sum.eq(self.sum),
                                 self.push_sent_at.eq(self.cycles)]
                with m.If(self.streamed != 0):
                    m.next = "STREAM_WORDS"
                with m.Else():
                    m.next = "DRAIN"
