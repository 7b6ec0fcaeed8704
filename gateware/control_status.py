"""The control and status block: registers, the command FIFO and the event FIFO.

Built from the tables in registers.py. Commands queue in order and are handed to the
block they name (segmenter, reassembly, missing-list scanner, pattern source, source
port, sink port) when it is ready; everything the blocks report becomes a 32-bit event word.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from ..formats.drops import Drop
from ..formats.registers import (
    ADDRESS, COMMAND_WORD, CONNECTION_FLAGS, ENGINE_REGISTERS, ENGINE_STATE, EVENT_WORD, GEOMETRY_WORD,
    RECEIVED_FLAGS, Command, Event,
)
from .config import EngineConfig
from .packet_fifo import CONTROL_META
from .parser import RX_SETTINGS
from .pattern import PATTERN_COMMAND
from .readout import CounterBank, register_select
from .reassembly import MISSING, MISSING_QUERY, RX_COMMAND, RX_EVENT, SLOT_STATUS
from .receive_store import READ_AHEAD
from .register_bus import DramCsrBus, RegisterBus, word_layout, word_value
from .segmenter import TX_COMMAND, TX_SETTINGS
from .transmit_path import PACING, UPLOAD_ROOM

QUEUED_COMMAND = data.StructLayout({"word": word_layout(COMMAND_WORD), "arg0": 32, "arg1": 32})


def event_word(m: Module, kind, slot, flags=0, value=0) -> data.View:
    word = Signal(word_layout(EVENT_WORD))
    m.d.comb += [word.kind.eq(kind), word.slot.eq(slot), word.flags.eq(flags),
                 word.value.eq(value), word.valid.eq(1)]
    return word


COMMAND_DEPTH = 16
"""Commands the host can queue ahead; one more is rejected and counted."""

class ControlStatus(wiring.Component):
    COUNTERS = ("TX_PACKETS", "TX_CONTROL", "RX_ACCEPTED", "RX_DUPLICATES", "RX_CONTROL",
                "COMMANDS_REJECTED", "EVENTS_LOST", "SOURCE_TAKEN", "SOURCE_REFUSED", "SOURCE_EARLY_ENDS",
                *(f"DROPPED_{d.name}" for d in Drop))

    DRAM_PORT = ("DRAM_CSR_ADDRESS", "DRAM_LEVELS")
    """The read-write registers built only with a port to the DRAM core's registers."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.dram_port = bool(config.dram and config.dram.phy)
        super().__init__({
            "bus": In(RegisterBus()),
            "tx_settings": Out(TX_SETTINGS),
            "rx_settings": Out(RX_SETTINGS),
            "pacing": Out(PACING),
            "tx_command": Out(stream.Signature(TX_COMMAND)),
            "fill": Out(stream.Signature(PATTERN_COMMAND)),
            "take": Out(stream.Signature(PATTERN_COMMAND)),
            "rx_command": Out(stream.Signature(RX_COMMAND)),
            "query": Out(stream.Signature(MISSING_QUERY)),
            "drain": Out(stream.Signature(PATTERN_COMMAND)),
            "upload": In(memory.WritePort.Signature(addr_width=config.tx_address_width, shape=config.data_width)),
            "upload_room": In(range(UPLOAD_ROOM + 1)),
            # The receive store's reader (receiver.py): seek, then words in order.
            "download_seek": Out(stream.Signature(config.rx_address_width)),
            "download": In(stream.Signature(config.data_width)),
            "download_level": In(range(READ_AHEAD + 1)),
            "rx_event": In(stream.Signature(RX_EVENT)),
            "missing": In(stream.Signature(MISSING)),
            "control": In(stream.Signature(config.data_width)),
            "control_meta": In(stream.Signature(CONTROL_META)),
            "events_waiting": Out(1),
            "control_next": Out(16),  # bytes of the next control packet waiting (0: none)
            "send_word": Out(32),
            "send_push": Out(1),
            "send_length": Out(16),
            "send_commit": Out(1),
            "status_slot": Out(4),
            "status": In(SLOT_STATUS),
            "rx_high_ack": In(16),
            "tx_idle": In(1),
            "slots_ready": In(1),
            "sent": In(1),
            "sent_slot": In(4),
            "filled": In(1),
            "took": In(1),
            "drained": In(1),
            "mismatches": In(32),
            # Counter strobes.
            "tx_packet": In(1),
            "tx_control": In(1),
            "rx_accepted": In(1),
            "rx_duplicate": In(1),
            "rx_control": In(1),
            "rejected": In(1),
            "events_lost": In(1),
            "source_taken": In(1), "source_refused": In(1), "source_early_end": In(1),
            "drops": In(len(Drop)),
            # The built-in stamp source's rate, and a write of it (which restarts it).
            "stamp_every": Out(16),
            "stamp_restart": Out(1),
            # The host's port to a DRAM core's registers, where the core has one.
            **({"dram_csr": Out(DramCsrBus())} if self.dram_port else {}),
        })

    def elaborate(self, platform) -> Module:
        self.m = Module()
        self.rw = {r.name: Signal(r.width, name=r.name.lower()) for r in ENGINE_REGISTERS
                   if r.access == "rw" and (self.dram_port or r.name not in self.DRAM_PORT)}
        self.m.submodules.counters = self.counter_bank = CounterBank(len(self.COUNTERS))
        self.cycles = Signal(32, name="cycles")
        self.m.d.sync += self.cycles.eq(self.cycles + 1)
        self._settings()
        self._queues()
        self._writes()
        self._download_seek()
        self._reads()
        self._dispatch()
        self._events()
        self._counters()
        return self.m

    def _settings(self) -> None:
        """Connection registers out to the data path."""
        m, rw = self.m, self.rw
        connection_flags = data.View(word_layout(CONNECTION_FLAGS), rw["FLAGS"])
        for settings in (self.tx_settings, self.rx_settings):
            m.d.comb += [settings.local_port.eq(rw["LOCAL_PORT"]), settings.peer_port.eq(rw["PEER_PORT"]),
                         settings.peer_address.eq(rw["PEER_ADDRESS"]), settings.udp.eq(connection_flags.udp),
                         settings.udp_local_port.eq(rw["UDP_LOCAL_PORT"]),
                         settings.udp_peer_port.eq(rw["UDP_PEER_PORT"]),
                         settings.data_checksum.eq(connection_flags.data_checksum)]
        # Rounded down to whole beats here, once, for every block that reads it.
        m.d.comb += [self.tx_settings.packet_size.eq(rw["PACKET_SIZE"] & ~(self.config.beat_bytes - 1)),
                     self.tx_settings.high_ack.eq(rw["HIGH_ACK"]),
                     self.pacing.mode.eq(rw["PACING_MODE"]), self.pacing.burst_size.eq(rw["BURST_SIZE"]),
                     self.pacing.interval.eq(rw["BURST_INTERVAL"]),
                     self.status_slot.eq(rw["STATUS_SLOT"]), self.stamp_every.eq(rw["STAMP_EVERY"]),
                     self.stamp_restart.eq(self.bus.w_en & (self.bus.addr == ADDRESS["STAMP_EVERY"]))]

    def _queues(self) -> None:
        """The command FIFO the host fills, the event FIFO it empties, and the strobes that
        count what either had no room for."""
        m = self.m
        m.submodules.commands = self.commands = fifo.SyncFIFOBuffered(width=QUEUED_COMMAND.size, depth=COMMAND_DEPTH)
        m.submodules.events = self.events = fifo.SyncFIFOBuffered(width=32, depth=self.config.fifo_depth)
        self.command_rejected = Signal(name="rejected")
        self.event_lost = Signal(name="lost")
        m.d.comb += [self.events_waiting.eq(self.events.r_rdy),
                     self.control_next.eq(Mux(self.control_meta.valid, self.control_meta.payload.length, 0))]

    def _writes(self) -> None:
        m, rw, bus = self.m, self.rw, self.bus
        control_from, control_port = Signal(32), Signal(16)
        self.control_from, self.control_port = control_from, control_port
        # An upload reaches the slot memory (and the checksum table) a cycle later, from
        # registers: the path from the bus through the decode into the table is too long.
        m.d.sync += self.upload.en.eq(0)
        with m.If(bus.w_en):
            with m.Switch(bus.addr):
                for name, reg in rw.items():
                    with m.Case(ADDRESS[name]):
                        m.d.sync += reg.eq(bus.w_data)
                with m.Case(ADDRESS["COMMAND"]):
                    m.d.comb += [self.commands.w_en.eq(1), self.commands.w_data.eq(Cat(
                        bus.w_data[:COMMAND_WORD.bits], rw["ARG0"], rw["ARG1"]))]
                    m.d.comb += self.command_rejected.eq(~self.commands.w_rdy)
                with m.Case(ADDRESS["UPLOAD_DATA"]):
                    m.d.sync += [self.upload.addr.eq(rw["UPLOAD_ADDRESS"]),
                                 self.upload.data.eq(bus.w_data), self.upload.en.eq(1)]
                    m.d.sync += rw["UPLOAD_ADDRESS"].eq(rw["UPLOAD_ADDRESS"] + 1)
                with m.Case(ADDRESS["SEND_DATA"]):
                    m.d.comb += [self.send_word.eq(bus.w_data), self.send_push.eq(1)]
                with m.Case(ADDRESS["SEND_LENGTH"]):
                    m.d.comb += [self.send_length.eq(bus.w_data), self.send_commit.eq(1)]
                if self.dram_port:
                    with m.Case(ADDRESS["DRAM_CSR_WRITE"]):
                        m.d.comb += [self.dram_csr.start.eq(1), self.dram_csr.write.eq(1)]
                    with m.Case(ADDRESS["DRAM_CSR_READ"]):
                        m.d.comb += self.dram_csr.start.eq(1)
        if self.dram_port:
            m.d.comb += [self.dram_csr.address.eq(rw["DRAM_CSR_ADDRESS"]), self.dram_csr.write_data.eq(bus.w_data)]

    def _download_seek(self) -> None:
        """A download reads from where DOWNLOAD_ADDRESS was last written, and from there
        again once a drain (which had the store's reader) ends."""
        m, bus = self.m, self.bus
        resume, early = Signal(), Signal()
        self.early = early
        m.d.sync += resume.eq(self.drained)
        written = bus.w_en & (bus.addr == ADDRESS["DOWNLOAD_ADDRESS"])
        m.d.comb += [self.download_seek.valid.eq(written | resume),
                     self.download_seek.payload.eq(Mux(written, bus.w_data, self.rw["DOWNLOAD_ADDRESS"]))]

    def _reads(self) -> None:
        """Reads: one cycle after r_en; reading a FIFO's register pops it."""
        m, bus = self.m, self.bus
        value = Signal(32)
        r_data = Signal(32)
        m.d.comb += bus.r_data.eq(r_data)
        self.draining = Signal(name="draining")
        table = [0] * len(ENGINE_REGISTERS)
        for name, v in self._readable().items():
            table[ADDRESS[name]] = v
        m.d.comb += value.eq(register_select(m, bus.addr, table, self.counter_bank, ADDRESS[self.COUNTERS[0]]))
        with m.If(bus.r_en):
            m.d.sync += r_data.eq(value)
            with m.Switch(bus.addr):
                with m.Case(ADDRESS["EVENT"]):
                    m.d.comb += self.events.r_en.eq(1)
                with m.Case(ADDRESS["CONTROL_LENGTH"]):
                    m.d.comb += self.control_meta.ready.eq(1)
                    with m.If(self.control_meta.valid):
                        m.d.sync += [self.control_from.eq(self.control_meta.payload.address),
                                     self.control_port.eq(self.control_meta.payload.port)]
                with m.Case(ADDRESS["CONTROL_DATA"]):
                    m.d.comb += self.control.ready.eq(1)
                with m.Case(ADDRESS["DOWNLOAD_DATA"]):
                    m.d.comb += [self.download.ready.eq(1), self.early.eq(~self.download.valid)]
                    with m.If(self.download.valid):
                        m.d.sync += self.rw["DOWNLOAD_ADDRESS"].eq(self.rw["DOWNLOAD_ADDRESS"] + 1)

    def _readable(self) -> dict:
        """What each readable register reads, by name (the counters apart)."""
        cfg, status = self.config, self.status
        geometry = word_value(GEOMETRY_WORD, data_width=cfg.data_width, tx_slots=cfg.tx_slots, rx_slots=cfg.rx_slots,
                              log2_max_packets=cfg.max_packets.bit_length() - 1, fill=int(cfg.fill),
                              check=int(cfg.check and cfg.sink), take=int(cfg.take), sink=int(cfg.sink))
        readable = {
            **self.rw,
            "COMMAND_LEVEL": self.commands.level, "EVENT_LEVEL": self.events.level,
            "EVENT": Mux(self.events.r_rdy, self.events.r_data, 0),
            "CONTROL_LENGTH": Mux(self.control_meta.valid, self.control_meta.payload.length, 0),
            "CONTROL_FROM": self.control_from, "CONTROL_PORT": self.control_port,
            "CONTROL_DATA": Mux(self.control.valid, self.control.payload, 0),
            "DOWNLOAD_DATA": Mux(self.download.valid, self.download.payload, 0),
            "DOWNLOAD_LEVEL": self.download_level, "UPLOAD_ROOM": self.upload_room,
            "SLOT_BUFFER": status.buffer,
            "SLOT_STATE": Cat(status.active, status.count_known, status.complete),
            "SLOT_RECEIVED": status.received, "SLOT_COUNT": status.count,
            "SLOT_FIRST_AT": status.first_at, "SLOT_LAST_AT": status.last_at,
            "SLOT_MEAN_GAP": status.mean_gap, "RX_HIGH_ACK": self.rx_high_ack,
            "CYCLES": self.cycles, "CHECK_MISMATCHES": self.mismatches,
            "GEOMETRY": geometry, "SLOT_BYTES": cfg.slot_bytes, "CLOCK_HZ": cfg.clock_hz,
        }
        if self.dram_port:
            readable |= {"DRAM_PHY": cfg.dram.phy, "DRAM_CSR_DATA": self.dram_csr.read_data,
                         "DRAM_CSR_BUSY": self.dram_csr.busy}
        readable["STATE"] = word_value(ENGINE_STATE, tx_idle=self.tx_idle, draining=self.draining,
                                       slots_ready=self.slots_ready)
        return readable

    def _dispatch(self) -> None:
        """The oldest command to the block it names; one naming no block or slot is rejected."""
        m, commands = self.m, self.commands
        head = data.View(QUEUED_COMMAND, commands.r_data).word
        self.fill_slot, self.drain_slot, self.take_slot = Signal(4), Signal(4), Signal(4)
        self.fill_quiet, self.take_quiet = Signal(), Signal()
        with m.If(commands.r_rdy):
            with m.Switch(head.op):
                for op, (target, ok, fields) in self._targets().items():
                    with m.Case(op):
                        with m.If(ok):
                            m.d.comb += target.valid.eq(1)
                            m.d.comb += [getattr(target.payload, k).eq(v) for k, v in fields.items()]
                            m.d.comb += commands.r_en.eq(target.ready)
                            with m.If(target.ready & (op == Command.FILL)):
                                m.d.sync += [self.fill_slot.eq(head.slot), self.fill_quiet.eq(head.flag)]
                            with m.If(target.ready & (op == Command.TAKE)):
                                m.d.sync += [self.take_slot.eq(head.slot), self.take_quiet.eq(head.flag)]
                            with m.If(target.ready & (op == Command.DRAIN)):
                                m.d.sync += [self.drain_slot.eq(head.slot), self.draining.eq(1)]
                        with m.Else():
                            m.d.comb += [commands.r_en.eq(1), self.command_rejected.eq(1)]
                with m.Default():
                    m.d.comb += [commands.r_en.eq(1), self.command_rejected.eq(1)]
        with m.If(self.drained):
            m.d.sync += self.draining.eq(0)

    def _targets(self) -> dict:
        """Each command's block, whether its slot is one the block has, and its fields."""
        cfg = self.config
        queued = data.View(QUEUED_COMMAND, self.commands.r_data)
        head = queued.word
        tx_ok = head.slot < cfg.tx_slots
        rx_ok = head.slot < cfg.rx_slots
        targets = {
            Command.SEND: (self.tx_command, tx_ok, {"slot": head.slot, "buffer": queued.arg0,
                                                     "length": queued.arg1, "last_buffer": head.flag}),
            Command.RESEND: (self.tx_command, tx_ok, {"resend": 1, "slot": head.slot,
                                                       "packet": queued.arg0}),
            Command.POST: (self.rx_command, rx_ok, {"post": 1, "slot": head.slot, "buffer": queued.arg0}),
            Command.RELEASE: (self.rx_command, rx_ok, {"slot": head.slot}),
            Command.QUERY_MISSING: (self.query, rx_ok, {"slot": head.slot, "limit": queued.arg0}),
        }
        if cfg.fill:
            targets[Command.FILL] = (self.fill, tx_ok, {"slot": head.slot, "buffer": queued.arg0,
                                                        "length": queued.arg1})
        if cfg.take:
            targets[Command.TAKE] = (self.take, tx_ok, {"slot": head.slot, "length": queued.arg1})
        if cfg.sink:
            targets[Command.DRAIN] = (self.drain, rx_ok, {"slot": head.slot, "buffer": queued.arg0,
                                                          "length": queued.arg1})
        return targets

    def _events(self) -> None:
        """A received-packet event cannot wait; one-shot reports wait in a flag; missing
        packets come last."""
        m, events = self.m, self.events
        pending = {
            Event.SENT: (self.sent, self.sent_slot, 0),
            Event.FILLED: (self.filled & ~self.fill_quiet, self.fill_slot, 0),
            Event.TAKEN: (self.took & ~self.take_quiet, self.take_slot, 0),
            Event.DRAINED: (self.drained, self.drain_slot, Mux(self.mismatches > 0xFFFF, 0xFFFF, self.mismatches)),
        }
        flags = {kind: Signal(name=f"pending_{kind.name.lower()}") for kind in pending}
        slots = {kind: Signal(4, name=f"pending_{kind.name.lower()}_slot") for kind in pending}
        values = {kind: Signal(16, name=f"pending_{kind.name.lower()}_value") for kind in pending}
        for kind, (strobe, slot, v) in pending.items():
            with m.If(strobe):
                m.d.sync += [flags[kind].eq(1), slots[kind].eq(slot), values[kind].eq(v)]
                with m.If(flags[kind]):
                    m.d.comb += self.event_lost.eq(1)
        self._received_event()
        chain = ~self.rx_event.valid
        for kind in pending:
            with m.If(chain & flags[kind]):
                m.d.comb += [events.w_en.eq(1),
                             events.w_data.eq(event_word(m, kind, slots[kind], 0, values[kind]))]
                with m.If(events.w_rdy):
                    m.d.sync += flags[kind].eq(0)
            chain = chain & ~flags[kind]
        missing = self.missing.payload
        with m.If(chain & self.missing.valid):
            m.d.comb += [events.w_en.eq(1), self.missing.ready.eq(events.w_rdy),
                         events.w_data.eq(event_word(m, Mux(missing.end, Event.MISSING_END, Event.MISSING),
                                                     missing.slot, 0, missing.packet))]

    def _received_event(self) -> None:
        m, rx = self.m, self.rx_event.payload
        m.d.comb += [self.rx_event.ready.eq(self.events.w_rdy)]
        with m.If(self.rx_event.valid):
            received = Signal(word_layout(RECEIVED_FLAGS))
            m.d.comb += [received.first.eq(rx.first), received.ldata.eq(rx.ldata),
                         received.complete.eq(rx.complete), received.last_buffer.eq(rx.last_buffer)]
            m.d.comb += [self.events.w_en.eq(1),
                         self.events.w_data.eq(event_word(m, Event.RECEIVED, rx.slot, received, rx.count))]

    def _counters(self) -> None:
        m, bus, counters = self.m, self.bus, self.counter_bank
        strobes = {
            "TX_PACKETS": self.tx_packet, "TX_CONTROL": self.tx_control,
            "RX_ACCEPTED": self.rx_accepted, "RX_DUPLICATES": self.rx_duplicate,
            "RX_CONTROL": self.rx_control,
            "COMMANDS_REJECTED": self.command_rejected | self.rejected | self.early |
                                 (self.dram_csr.ignored if self.dram_port else 0),
            "EVENTS_LOST": self.event_lost | self.events_lost,
            "SOURCE_TAKEN": self.source_taken, "SOURCE_REFUSED": self.source_refused,
            "SOURCE_EARLY_ENDS": self.source_early_end,
            **{f"DROPPED_{d.name}": self.drops[d] for d in Drop},
        }
        clear = bus.w_en & (bus.addr == ADDRESS["COUNTERS_CLEAR"])
        m.d.comb += counters.clear.eq(clear)
        for i, name in enumerate(self.COUNTERS):
            # Counted a cycle late, or two (config.counter_delay): the strobes come from
            # deep in the data path, far from the counters.
            strobe = strobes[name]
            if self.config.counter_delay == 2:
                late = Signal(counters.add[i].shape(), name=f"late_{name.lower()}")
                m.d.sync += late.eq(strobe)
                strobe = late
            m.d.sync += counters.add[i].eq(strobe)
