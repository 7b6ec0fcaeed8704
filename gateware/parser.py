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
from .headers import DATA_LAYOUTS, UDP, fold, halfwords, header_fields, lanes, layouts_size
from .segmenter import UDP_PROTOCOL
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
        W = self.config.beat_bytes
        s = self.settings
        m = Module()
        header_size = layouts_size(DATA_LAYOUTS)
        H, U = header_size // W, 8 // W

        inp = self.input.payload
        beat = Signal(16)
        """Beats of this IP payload so far."""
        udp_bytes = [Signal(8, name=f"udp{i}") for i in range(8)]
        head = [Signal(8, name=f"head{i}") for i in range(header_size)]
        hdr = header_fields(DATA_LAYOUTS, head)
        udp = header_fields([UDP], udp_bytes)
        received = Signal(16)
        """NETBLT bytes so far, before this beat (after the last, until the packet is judged)."""
        total = Signal(32)
        """Ones'-complement sum of the NETBLT bytes before this beat."""
        data_sum = Signal(32)
        """Ones'-complement sum of the data beats sent on; kept until the last is judged."""
        kind = Signal(range(4))
        NONE, DATA, CONTROL, DROPPING = range(4)

        udp_mode = s.udp

        def netblt_beat(n: int) -> Value:
            """Beat ``n`` of the NETBLT packet, counted in beats of the IP payload: the
            route and drop decisions compare ``beat`` with it, not subtract from it (the
            engine clock's slowest path ran through that subtraction)."""
            return Mux(udp_mode, U + n, n)

        in_udp = udp_mode & (beat < U)
        payload_bytes = lanes(inp.data, W)
        kept = [Mux(inp.keep[i], b, 0) for i, b in enumerate(payload_bytes)]
        count = sum(inp.keep[i] for i in range(W))
        now_total = total + sum(halfwords(kept))
        now_received = received + count
        take = self.input.valid & self.input.ready

        def drop(reason) -> None:
            m.d.comb += self.drops.eq(1 << reason)

        def length_disagrees(netblt_bytes):
            """More bytes than the length field beyond the padding, or fewer (A15)."""
            return (netblt_bytes < hdr["length"]) | (netblt_bytes - hdr["length"] > 3)

        # Keep the UDP and NETBLT headers and the sums as the beats go by.
        with m.If(take):
            m.d.sync += beat.eq(Mux(inp.last, 0, beat + 1))
            for i in range(W):
                for u in range(U):
                    with m.If(udp_mode & (beat == u)):
                        m.d.sync += udp_bytes[u * W + i].eq(kept[i])
                for h in range(H):
                    with m.If(beat == netblt_beat(h)):
                        m.d.sync += head[h * W + i].eq(kept[i])
            with m.If(~in_udp):
                m.d.sync += [total.eq(now_total), received.eq(now_received)]

        # The first NETBLT beat decides the route: type is byte 3.
        kind_now = Signal.like(kind)
        wrong_protocol = Mux(udp_mode,
                             (inp.protocol != UDP_PROTOCOL) | (udp["dest_port"] != s.udp_local_port),
                             inp.protocol != L.IP_PROTOCOL)
        packet_type = payload_bytes[3]
        m.d.comb += kind_now.eq(kind)
        with m.If(beat == netblt_beat(0)):
            with m.If(wrong_protocol):
                m.d.comb += kind_now.eq(DROPPING)
            with m.Elif((packet_type == L.PacketType.DATA) | (packet_type == L.PacketType.LDATA)):
                m.d.comb += kind_now.eq(DATA)
            with m.Elif(packet_type <= max(L.PacketType)):
                m.d.comb += kind_now.eq(CONTROL)
            with m.Else():
                m.d.comb += kind_now.eq(DROPPING)
        with m.If(take & ~inp.last):
            m.d.sync += kind.eq(kind_now)

        # DATA/LDATA: the header is whole when its first data beat arrives.
        data_length = hdr["length"] - header_size
        header_checks = [
            (hdr["version"] != L.VERSION, Drop.VERSION),
            (fold(total) != 0xFFFF, Drop.CHECKSUM),
            (hdr["length"] <= header_size, Drop.LENGTH),
            ((inp.address != s.peer_address) | (hdr["local_port"] != s.peer_port)
             | (hdr["foreign_port"] != s.local_port)
             | (udp_mode & (udp["source_port"] != s.udp_peer_port)), Drop.CONNECTION),
        ]
        header_bad = Signal()
        header_reason = Signal(4)
        for bad, reason in reversed(header_checks):
            with m.If(bad):
                m.d.comb += [header_bad.eq(1), header_reason.eq(reason)]

        beat_layout = rx_data(self.config.data_width)
        beat_out = Signal(beat_layout)
        data_index = beat - netblt_beat(H)
        data_kept = [Mux(data_index * W + i < data_length, b, 0) for i, b in enumerate(kept)]
        now_data_sum = data_sum + sum(halfwords(data_kept))
        m.d.comb += [
            beat_out.data.eq(Cat(*data_kept)),
            beat_out.keep.eq(Cat(*(data_index * W + i < data_length for i in range(W)))),
            beat_out.last.eq(inp.last),
            beat_out.header.buffer.eq(hdr["buffer"]), beat_out.header.packet.eq(hdr["packet"]),
            beat_out.header.high_ack.eq(hdr["high_ack"]), beat_out.header.length.eq(data_length),
            beat_out.header.ldata.eq(hdr["type"] == L.PacketType.LDATA),
            beat_out.header.last_buffer.eq((hdr["flags"] & L.FLAG_LAST_BUFFER) != 0),
        ]

        # The output register, and the verdict on the packet whose last beat it holds.
        held = Signal(data.StructLayout({"beat": beat_layout, "frame_bad": 1, "length_bad": 1, "checksum": 16}))
        held_valid = Signal()
        space = ~held_valid | self.data.ready
        blocked = Signal()
        load = Signal()
        data_bad = Signal()
        data_reason = Signal(4)
        with m.If(held.frame_bad):
            m.d.comb += [data_bad.eq(1), data_reason.eq(Drop.FRAME)]
        with m.Elif(held.length_bad):
            m.d.comb += [data_bad.eq(1), data_reason.eq(Drop.LENGTH)]
        with m.Elif(s.data_checksum & ((~fold(data_sum))[:16] != held.checksum)):
            m.d.comb += [data_bad.eq(1), data_reason.eq(Drop.DATA_CHECKSUM)]
        m.d.comb += [self.data.valid.eq(held_valid), self.data.payload.eq(held.beat),
                     self.data.payload.bad.eq(data_bad)]
        with m.If(self.data.ready):
            m.d.sync += held_valid.eq(0)
            with m.If(held_valid & held.beat.last):
                m.d.sync += data_sum.eq(0)
        with m.If(load):
            m.d.sync += [
                held_valid.eq(1), held.beat.eq(beat_out), held.checksum.eq(hdr["data_checksum"]),
                data_sum.eq(now_data_sum), held.frame_bad.eq(inp.error),
                held.length_bad.eq(length_disagrees(now_received)),
            ]

        # Control packets: every beat to the host's FIFO through one register, so the
        # verdict on the last beat reads the finished sums, in the cycle after it.
        held_control = Signal(control_beat(self.config.data_width))
        control_bad = Signal()
        control_reason = Signal(4)
        frame_bad = Signal()
        for bad, reason in reversed([
                (frame_bad, Drop.FRAME),
                (received < L.HEADER.end, Drop.SHORT),
                (hdr["version"] != L.VERSION, Drop.VERSION),
                (length_disagrees(received), Drop.LENGTH),
                (fold(total) != 0xFFFF, Drop.CHECKSUM)]):
            with m.If(bad):
                m.d.comb += [control_bad.eq(1), control_reason.eq(reason)]
        m.d.sync += [
            held_control.data.eq(Cat(*kept)), held_control.keep.eq(inp.keep),
            held_control.last.eq(inp.last), held_control.length.eq(hdr["length"]), frame_bad.eq(inp.error),
            held_control.address.eq(inp.address), held_control.port.eq(udp["source_port"]),
            self.control.valid.eq(0),
        ]
        m.d.comb += [self.control.payload.eq(held_control), self.control.payload.bad.eq(control_bad)]

        # The cycle after a packet's last beat judges it; the next packet waits for it.
        ending = Signal()
        m.d.sync += ending.eq(take & inp.last)
        with m.If(ending):
            m.d.sync += [total.eq(0), received.eq(0)]
        m.d.comb += blocked.eq(ending | (held_valid & held.beat.last))

        m.d.comb += self.input.ready.eq(~blocked)
        with m.If(self.input.valid & ~in_udp):
            with m.Switch(kind_now):
                with m.Case(DATA):
                    with m.If(beat < netblt_beat(H)):
                        with m.If(inp.last & take):
                            drop(Drop.SHORT)
                    with m.Elif((beat == netblt_beat(H)) & header_bad):
                        with m.If(take):
                            drop(header_reason)
                            m.d.sync += kind.eq(DROPPING)
                    with m.Else():
                        m.d.comb += [load.eq(space & ~blocked), self.input.ready.eq(space & ~blocked)]
                with m.Case(CONTROL):
                    m.d.sync += self.control.valid.eq(take)
                with m.Case(DROPPING):
                    with m.If(take & (beat == netblt_beat(0))):
                        drop(Mux(wrong_protocol, Drop.CONNECTION, Drop.TYPE))
        with m.If(self.input.valid & in_udp & inp.last & take):
            drop(Drop.SHORT)
        with m.If(self.data.valid & self.data.ready & held.beat.last & data_bad):
            drop(data_reason)
        with m.If(self.control.valid & held_control.last & control_bad):
            drop(control_reason)
        with m.If(take & inp.last):
            m.d.sync += kind.eq(NONE)
        return m
