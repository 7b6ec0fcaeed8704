"""The management link: the host reaches the engine's registers in UDP datagrams.

It sits between the engine and LiteEth's IP streams. Received datagrams to the
management port are taken out of the engine's stream; every other packet passes
untouched and is never held up. A request is stored whole and checked before any of it
runs, so a frame that is cut short or fails its frame check changes no register; the
reply (the request with read values filled in, driver/management.py) goes out ahead of
the engine's next packet. Both directions carry a UDP checksum: a short request's
Ethernet padding can take its frame-check error with it, so the FCS alone is not
enough. While one request runs, another is dropped and counted: the host resends on a
timeout.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from netblt.driver import management as M

from .headers import UDP, fold, halfwords, header_bytes, lanes, to_beats
from .registers import RegisterBus
from .segmenter import UDP_PROTOCOL
from .streams import ip_stream

BUFFER_WORDS = 128
"""Tag and operations of the largest request, in 32-bit words."""
UDP_WORDS = UDP.end // 4


def _swap(value) -> Signal:
    """A beat's four bytes in wire order as a big-endian number, and back again."""
    return Cat(*reversed(lanes(value, 4)))


class Management(wiring.Component):
    """``net_rx``/``net_tx`` face LiteEth; ``engine_rx``/``engine_tx`` face the engine."""

    def __init__(self, address: int, port: int = M.MANAGEMENT_PORT) -> None:
        if not 0 < port < 1 << 16:
            raise ValueError(f"management port {port} is not a UDP port")
        self.address, self.port = address, port
        """The board's IPv4 address (for the UDP checksum) and its management port."""
        super().__init__({
            "net_rx": In(ip_stream(32)),
            "engine_rx": Out(ip_stream(32)),
            "engine_tx": In(ip_stream(32)),
            "net_tx": Out(ip_stream(32)),
            "bus": Out(RegisterBus()),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.buffer = buffer = memory.Memory(shape=32, depth=BUFFER_WORDS, init=[])
        write, read = buffer.write_port(), buffer.read_port()

        requester, requester_port = Signal(32), Signal(16)
        length = Signal(16)
        """UDP length of the request, and so of the reply."""
        operations = Signal(range(M.MAX_OPERATIONS + 1))
        dropped, dropped_count = Signal(), Signal(32)
        """A request dropped this cycle, and how many since reset (opcode DROPPED reads it)."""
        busy = Signal()
        with m.If(dropped):
            m.d.sync += dropped_count.eq(dropped_count + 1)

        def pseudo_header(source, destination, udp_length) -> Value:
            """The UDP checksum's pseudo-header, summed (RFC 768)."""
            return (source[16:] + source[:16] + destination[16:] + destination[:16]
                    + UDP_PROTOCOL + udp_length)

        def beat_sum(data) -> Value:
            return sum(halfwords(lanes(data, 4)))

        # Receive: route each packet whole on its first beat; store a request's words.
        rx, beat = self.net_rx, self.net_rx.payload
        first, routed_to_us = Signal(init=1), Signal()
        words = Signal(range(BUFFER_WORDS + UDP_WORDS + 1))
        """Whole words of the request so far; beats past the IP length (padding) add none."""
        broken = Signal()
        """The request so far does not fit or does not add up."""
        rx_sum = Signal(32)
        """The UDP checksum's sum over the words before this beat, pseudo-header included."""
        word = _swap(beat.data)
        is_request = (beat.protocol == UDP_PROTOCOL) & (word[:16] == self.port)
        ours = Mux(first, is_request, routed_to_us)
        m.d.comb += [self.engine_rx.payload.eq(beat), self.engine_rx.valid.eq(rx.valid & ~ours),
                     rx.ready.eq(Mux(ours, 1, self.engine_rx.ready))]
        with m.If(rx.valid & rx.ready):
            m.d.sync += [first.eq(beat.last), routed_to_us.eq(ours)]
        with m.If(rx.valid & ours):
            full = beat.keep == 0b1111
            now_sum = Mux(first, pseudo_header(beat.address, Const(self.address, 32), beat.length), rx_sum) + \
                Mux(full, beat_sum(beat.data), 0)
            m.d.sync += rx_sum.eq(now_sum)
            with m.If(full):
                m.d.sync += words.eq(words + 1)
            with m.If(first):
                m.d.sync += broken.eq(busy | ~full)
                with m.If(~busy):
                    m.d.sync += [requester.eq(beat.address), requester_port.eq(word[16:]),
                                 length.eq(beat.length)]
            with m.Elif(words == 1):
                # A request must carry a checksum: a short frame's FCS error can be lost
                # with its Ethernet padding, so the FCS alone does not guard it.
                m.d.sync += broken.eq(broken | (word[16:] != length) | (word[:16] == 0))
            with m.Elif(words < BUFFER_WORDS + UDP_WORDS):
                m.d.comb += [write.addr.eq(words - UDP_WORDS), write.data.eq(beat.data),
                             write.en.eq(full & ~busy)]
            with m.Else():
                m.d.sync += broken.eq(broken | full)
            with m.If(~full & (beat.keep != 0)):
                m.d.sync += broken.eq(1)
            with m.If(beat.last):
                body = Signal(16)
                m.d.comb += body.eq(length - UDP.end - M.TAG_BYTES)
                whole = (words + full) * 4 == length
                good = (~broken & whole & ~beat.error & ~busy & ~first & (fold(now_sum) == 0xFFFF)
                        & (length > UDP.end + M.TAG_BYTES) & (body[:3] == 0)
                        & (body <= M.MAX_OPERATIONS * M.OPERATION_BYTES))
                m.d.sync += words.eq(0)
                with m.If(good):
                    m.d.sync += [busy.eq(1), operations.eq(body >> 3)]
                with m.Else():
                    m.d.comb += dropped.eq(1)

        # Execute: one operation at a time; a read's value replaces the request's.
        op_index = Signal(range(M.MAX_OPERATIONS + 1))
        opcode, address = Signal(8), Signal(8)
        op_word = 1 + 2 * op_index
        known = Cat(opcode == op for op in M.Opcode).any()
        body_words = (length - UDP.end) >> 2
        reply_word = Signal(range(BUFFER_WORDS + UDP_WORDS + 1))
        tx_sum = Signal(32)
        checksum = Signal(16)
        m.d.comb += checksum.eq(~fold(tx_sum))
        udp = to_beats(header_bytes([UDP], {"source_port": self.port, "dest_port": requester_port, "length": length,
                                            "checksum": Mux(checksum == 0, 0xFFFF, checksum)}), 4)
        reply = self.net_tx.payload
        m.d.comb += [reply.address.eq(requester), reply.protocol.eq(UDP_PROTOCOL),
                     reply.length.eq(length), reply.keep.eq(0b1111),
                     reply.last.eq((reply_word + 1) * 4 == length)]
        reply_valid, reply_ready = Signal(), Signal()
        with m.FSM():
            with m.State("IDLE"):
                with m.If(busy):
                    m.d.sync += op_index.eq(0)
                    m.next = "OPCODE"
            with m.State("OPCODE"):
                m.d.comb += read.addr.eq(op_word)
                with m.If(op_index == operations):
                    m.d.comb += read.addr.eq(0)
                    m.d.sync += [reply_word.eq(0), tx_sum.eq(
                        pseudo_header(Const(self.address, 32), requester, length)
                        + self.port + requester_port + length)]
                    m.next = "CHECKSUM"
                with m.Else():
                    m.next = "VALUE"
            with m.State("VALUE"):
                m.d.comb += read.addr.eq(op_word + 1)
                m.d.sync += [opcode.eq(_swap(read.data)[24:]), address.eq(_swap(read.data)[16:24])]
                m.next = "ACCESS"
            with m.State("ACCESS"):
                # The bus is driven from registers: the buffer's output is too slow to
                # reach the engine's register block in the same cycle.
                m.d.sync += [self.bus.addr.eq(address), self.bus.w_data.eq(_swap(read.data)),
                             self.bus.w_en.eq(opcode == M.Opcode.WRITE),
                             self.bus.r_en.eq(opcode == M.Opcode.READ)]
                m.next = "STROBE"
            with m.State("STROBE"):
                m.d.sync += [self.bus.w_en.eq(0), self.bus.r_en.eq(0)]
                m.next = "RESULT"
            with m.State("RESULT"):
                result = Mux(opcode == M.Opcode.READ, self.bus.r_data, dropped_count)
                m.d.comb += [write.addr.eq(op_word + 1), write.data.eq(_swap(result)),
                             write.en.eq((opcode == M.Opcode.READ) | (opcode == M.Opcode.DROPPED))]
                m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += [write.addr.eq(op_word), write.en.eq(1),
                             write.data.eq(Cat(Mux(known, opcode | M.DONE, opcode), address, Const(0, 16)))]
                m.d.sync += op_index.eq(op_index + 1)
                m.next = "OPCODE"
            with m.State("CHECKSUM"):
                # reply_word counts the body's words here, one a cycle.
                m.d.comb += read.addr.eq(reply_word + 1)
                m.d.sync += [tx_sum.eq(tx_sum + beat_sum(read.data)), reply_word.eq(reply_word + 1)]
                with m.If(reply_word + 1 == body_words):
                    m.d.comb += read.addr.eq(0)
                    m.d.sync += reply_word.eq(0)
                    m.next = "REPLY"
            with m.State("REPLY"):
                # The buffer's read port runs a word ahead: it addresses the next beat's word.
                next_word = reply_word + reply_ready
                m.d.comb += [reply_valid.eq(1),
                             read.addr.eq(Mux(next_word < UDP_WORDS, 0, next_word - UDP_WORDS)),
                             reply.data.eq(Mux(reply_word == 0, udp[0], Mux(reply_word == 1, udp[1], read.data)))]
                with m.If(reply_ready):
                    m.d.sync += reply_word.eq(next_word)
                    with m.If(reply.last):
                        m.d.sync += busy.eq(0)
                        m.next = "IDLE"

        # Transmit: the reply goes at the engine's next packet boundary.
        engine_owns = Signal()
        with m.If(engine_owns | ~reply_valid):
            m.d.comb += [self.net_tx.payload.eq(self.engine_tx.payload), self.net_tx.valid.eq(self.engine_tx.valid),
                         self.engine_tx.ready.eq(self.net_tx.ready)]
            with m.If(self.engine_tx.valid & self.net_tx.ready):
                m.d.sync += engine_owns.eq(~self.engine_tx.payload.last)
        with m.Else():
            m.d.comb += [self.net_tx.valid.eq(1), reply_ready.eq(self.net_tx.ready)]
        return m

