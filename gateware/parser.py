"""The receive side's first stage: every IP payload checked, routed or counted and dropped.

DATA/LDATA packets of this connection leave as payload beats with their header fields;
every other NETBLT type goes whole to the control stream for the host, which decodes
it with the host codec. Checks that need the whole packet (truncation, padding, data
checksum, a control packet's checksum) end in a ``bad`` flag on the last beat, so the
next stage commits nothing it has not seen checked. Both outputs leave through one
register, so that verdict is judged from finished sums in the cycle after the last beat
(timing); the next packet waits for that cycle, which also keeps drops one per cycle.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..formats import rfc998 as L
from ..formats.drops import Drop
from .config import EngineConfig
from ..formats.rfc998 import UDP
from .headers import DATA_LAYOUTS, fold, halfwords, header_fields, lanes, layouts_size
from ..formats.rfc998 import UDP_PROTOCOL
from .streams import CONNECTION, ip_stream, rx_data

RX_SETTINGS = data.StructLayout(CONNECTION)
"""The connection registers the receive side reads."""


def control_beat(data_width: int) -> data.StructLayout:
    """A control packet's beat; ``address``/``port`` name its sender (UDP port if UDP)."""
    return data.StructLayout({"data": data_width, "keep": data_width // 8, "last": 1, "bad": 1,
                              "length": 16, "address": 32, "port": 16})


class Parser(wiring.Component):
    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        super().__init__({
            "settings": In(RX_SETTINGS),
            "input": In(ip_stream(config.data_width)),
            "data": Out(stream.Signature(rx_data(config.data_width))),
            "control": Out(stream.Signature(control_beat(config.data_width), always_ready=True)),
            "drops": Out(len(Drop)),
        })

    def elaborate(self, platform) -> Module:
        self.m = Module()
        self._state()
        self._capture()
        self._route()
        self._check_header()
        self._data_beat()
        self._data_register()
        self._control_register()
        self._judge()
        self._steer()
        return self.m

    NONE, DATA, CONTROL, DROPPING = range(4)
    """What the packet being received is: its route."""

    def _state(self) -> None:
        """What the parser keeps of the packet being received, and this beat seen whole."""
        W = self.config.beat_bytes
        self.header_size = header_size = layouts_size(DATA_LAYOUTS)
        self.H, self.U = header_size // W, 8 // W
        inp = self.input.payload
        beat = Signal(16)
        """Beats of this IP payload so far."""
        self.udp_bytes = [Signal(8, name=f"udp{i}") for i in range(8)]
        self.head = [Signal(8, name=f"head{i}") for i in range(header_size)]
        self.hdr = header_fields(DATA_LAYOUTS, self.head)
        self.udp = header_fields([UDP], self.udp_bytes)
        received = Signal(16)
        """NETBLT bytes so far, before this beat (after the last, until the packet is judged)."""
        total = Signal(32)
        """Ones'-complement sum of the NETBLT bytes before this beat."""
        data_sum = Signal(32)
        """Ones'-complement sum of the data beats sent on; kept until the last is judged."""
        kind = Signal(range(4))
        self.beat, self.received, self.total, self.data_sum, self.kind = beat, received, total, data_sum, kind
        self.in_udp = self.settings.udp & (beat < self.U)
        self.payload_bytes = lanes(inp.data, W)
        self.kept = [Mux(inp.keep[i], b, 0) for i, b in enumerate(self.payload_bytes)]
        count = sum(inp.keep[i] for i in range(W))
        self.now_total = total + sum(halfwords(self.kept))
        self.now_received = received + count
        self.take = self.input.valid & self.input.ready

    def netblt_beat(self, n: int) -> Value:
        """Beat ``n`` of the NETBLT packet, counted in beats of the IP payload: the
        route and drop decisions compare ``beat`` with it, not subtract from it (the
        engine clock's slowest path ran through that subtraction)."""
        return Mux(self.settings.udp, self.U + n, n)

    def drop(self, reason) -> None:
        self.m.d.comb += self.drops.eq(1 << reason)

    def length_disagrees(self, netblt_bytes):
        """More bytes than the length field beyond the padding, or fewer (A15)."""
        return (netblt_bytes < self.hdr["length"]) | (netblt_bytes - self.hdr["length"] > 3)

    def _capture(self) -> None:
        """Keep the UDP and NETBLT headers and the sums as the beats go by."""
        m, beat, W = self.m, self.beat, self.config.beat_bytes
        with m.If(self.take):
            m.d.sync += beat.eq(Mux(self.input.payload.last, 0, beat + 1))
            for i in range(W):
                for u in range(self.U):
                    with m.If(self.settings.udp & (beat == u)):
                        m.d.sync += self.udp_bytes[u * W + i].eq(self.kept[i])
                for h in range(self.H):
                    with m.If(beat == self.netblt_beat(h)):
                        m.d.sync += self.head[h * W + i].eq(self.kept[i])
            with m.If(~self.in_udp):
                m.d.sync += [self.total.eq(self.now_total), self.received.eq(self.now_received)]

    def _route(self) -> None:
        """The first NETBLT beat decides the route: type is byte 3."""
        m, s, inp = self.m, self.settings, self.input.payload
        kind_now = Signal.like(self.kind)
        self.kind_now = kind_now
        self.wrong_protocol = wrong_protocol = Mux(
            s.udp, (inp.protocol != UDP_PROTOCOL) | (self.udp["dest_port"] != s.udp_local_port),
            inp.protocol != L.IP_PROTOCOL)
        packet_type = self.payload_bytes[3]
        m.d.comb += kind_now.eq(self.kind)
        with m.If(self.beat == self.netblt_beat(0)):
            with m.If(wrong_protocol):
                m.d.comb += kind_now.eq(self.DROPPING)
            with m.Elif((packet_type == L.PacketType.DATA) | (packet_type == L.PacketType.LDATA)):
                m.d.comb += kind_now.eq(self.DATA)
            with m.Elif(packet_type <= max(L.PacketType)):
                m.d.comb += kind_now.eq(self.CONTROL)
            with m.Else():
                m.d.comb += kind_now.eq(self.DROPPING)
        with m.If(self.take & ~inp.last):
            m.d.sync += self.kind.eq(kind_now)

    def _check_header(self) -> None:
        """DATA/LDATA: the header is whole when its first data beat arrives."""
        m, s, hdr, inp = self.m, self.settings, self.hdr, self.input.payload
        self.data_length = hdr["length"] - self.header_size
        header_checks = [
            (hdr["version"] != L.VERSION, Drop.VERSION),
            (fold(self.total) != 0xFFFF, Drop.CHECKSUM),
            (hdr["length"] <= self.header_size, Drop.LENGTH),
            ((inp.address != s.peer_address) | (hdr["local_port"] != s.peer_port)
             | (hdr["foreign_port"] != s.local_port)
             | (s.udp & (self.udp["source_port"] != s.udp_peer_port)), Drop.CONNECTION),
        ]
        header_bad = Signal()
        header_reason = Signal(4)
        self.header_bad, self.header_reason = header_bad, header_reason
        for bad, reason in reversed(header_checks):
            with m.If(bad):
                m.d.comb += [header_bad.eq(1), header_reason.eq(reason)]

    def _data_beat(self) -> None:
        """A data beat as it leaves: its data area alone, with the header's fields."""
        W, hdr, data_length = self.config.beat_bytes, self.hdr, self.data_length
        self.beat_layout = rx_data(self.config.data_width)
        beat_out = Signal(self.beat_layout)
        self.beat_out = beat_out
        data_index = self.beat - self.netblt_beat(self.H)
        data_kept = [Mux(data_index * W + i < data_length, b, 0) for i, b in enumerate(self.kept)]
        self.now_data_sum = self.data_sum + sum(halfwords(data_kept))
        self.m.d.comb += [
            beat_out.data.eq(Cat(*data_kept)),
            beat_out.keep.eq(Cat(*(data_index * W + i < data_length for i in range(W)))),
            beat_out.last.eq(self.input.payload.last),
            beat_out.header.buffer.eq(hdr["buffer"]), beat_out.header.packet.eq(hdr["packet"]),
            beat_out.header.high_ack.eq(hdr["high_ack"]), beat_out.header.length.eq(data_length),
            beat_out.header.ldata.eq(hdr["type"] == L.PacketType.LDATA),
            beat_out.header.last_buffer.eq((hdr["flags"] & L.FLAG_LAST_BUFFER) != 0),
        ]

    def _data_register(self) -> None:
        """The output register, and the verdict on the packet whose last beat it holds."""
        m = self.m
        held = Signal(data.StructLayout({"beat": self.beat_layout, "frame_bad": 1, "length_bad": 1, "checksum": 16}))
        held_valid = Signal()
        self.held, self.held_valid = held, held_valid
        self.space = ~held_valid | self.data.ready
        blocked = Signal()
        load = Signal()
        data_bad = Signal()
        data_reason = Signal(4)
        self.blocked, self.load, self.data_bad, self.data_reason = blocked, load, data_bad, data_reason
        with m.If(held.frame_bad):
            m.d.comb += [data_bad.eq(1), data_reason.eq(Drop.FRAME)]
        with m.Elif(held.length_bad):
            m.d.comb += [data_bad.eq(1), data_reason.eq(Drop.LENGTH)]
        with m.Elif(self.settings.data_checksum & ((~fold(self.data_sum))[:16] != held.checksum)):
            m.d.comb += [data_bad.eq(1), data_reason.eq(Drop.DATA_CHECKSUM)]
        m.d.comb += [self.data.valid.eq(held_valid), self.data.payload.eq(held.beat),
                     self.data.payload.bad.eq(data_bad)]
        with m.If(self.data.ready):
            m.d.sync += held_valid.eq(0)
            with m.If(held_valid & held.beat.last):
                m.d.sync += self.data_sum.eq(0)
        with m.If(load):
            m.d.sync += [
                held_valid.eq(1), held.beat.eq(self.beat_out), held.checksum.eq(self.hdr["data_checksum"]),
                self.data_sum.eq(self.now_data_sum), held.frame_bad.eq(self.input.payload.error),
                held.length_bad.eq(self.length_disagrees(self.now_received)),
            ]

    def _control_register(self) -> None:
        """Control packets: every beat to the host's FIFO through one register, so the
        verdict on the last beat reads the finished sums, in the cycle after it."""
        m, hdr, inp = self.m, self.hdr, self.input.payload
        held_control = Signal(control_beat(self.config.data_width))
        control_bad = Signal()
        control_reason = Signal(4)
        frame_bad = Signal()
        self.held_control, self.control_bad, self.control_reason = held_control, control_bad, control_reason
        for bad, reason in reversed([
                (frame_bad, Drop.FRAME),
                (self.received < L.HEADER.end, Drop.SHORT),
                (hdr["version"] != L.VERSION, Drop.VERSION),
                (self.length_disagrees(self.received), Drop.LENGTH),
                (fold(self.total) != 0xFFFF, Drop.CHECKSUM)]):
            with m.If(bad):
                m.d.comb += [control_bad.eq(1), control_reason.eq(reason)]
        m.d.sync += [
            held_control.data.eq(Cat(*self.kept)), held_control.keep.eq(inp.keep),
            held_control.last.eq(inp.last), held_control.length.eq(hdr["length"]), frame_bad.eq(inp.error),
            held_control.address.eq(inp.address), held_control.port.eq(self.udp["source_port"]),
            self.control.valid.eq(0),
        ]
        m.d.comb += [self.control.payload.eq(held_control), self.control.payload.bad.eq(control_bad)]

    def _judge(self) -> None:
        """The cycle after a packet's last beat judges it; the next packet waits for it."""
        m = self.m
        ending = Signal()
        m.d.sync += ending.eq(self.take & self.input.payload.last)
        with m.If(ending):
            m.d.sync += [self.total.eq(0), self.received.eq(0)]
        m.d.comb += self.blocked.eq(ending | (self.held_valid & self.held.beat.last))

    def _steer(self) -> None:
        """Each beat to its route, and each drop counted once, by its reason."""
        m, inp, take, beat = self.m, self.input.payload, self.take, self.beat
        m.d.comb += self.input.ready.eq(~self.blocked)
        with m.If(self.input.valid & ~self.in_udp):
            with m.Switch(self.kind_now):
                with m.Case(self.DATA):
                    with m.If(beat < self.netblt_beat(self.H)):
                        with m.If(inp.last & take):
                            self.drop(Drop.SHORT)
                    with m.Elif((beat == self.netblt_beat(self.H)) & self.header_bad):
                        with m.If(take):
                            self.drop(self.header_reason)
                            m.d.sync += self.kind.eq(self.DROPPING)
                    with m.Else():
                        ready = self.space & ~self.blocked
                        m.d.comb += [self.load.eq(ready), self.input.ready.eq(ready)]
                with m.Case(self.CONTROL):
                    m.d.sync += self.control.valid.eq(take)
                with m.Case(self.DROPPING):
                    with m.If(take & (beat == self.netblt_beat(0))):
                        self.drop(Mux(self.wrong_protocol, Drop.CONNECTION, Drop.TYPE))
        with m.If(self.input.valid & self.in_udp & inp.last & take):
            self.drop(Drop.SHORT)
        with m.If(self.data.valid & self.data.ready & self.held.beat.last & self.data_bad):
            self.drop(self.data_reason)
        with m.If(self.control.valid & self.held_control.last & self.control_bad):
            self.drop(self.control_reason)
        with m.If(take & inp.last):
            m.d.sync += self.kind.eq(self.NONE)
