"""Data-area checksums summed as a slot is written, so a packet is read once, not twice.
(Slots in block RAM; a store in DRAM sums each run as it fetches it, gateware/dram_dma.py.)

With data checksums negotiated (RFC 998's C flag) a DATA header carries the sum of the
packet's data, and the header leaves first. Summing the data in a pass of its own
before sending it would halve the transmit rate for large packets. Instead this block
watches the slot memory's write port: while a slot is written in order from its first
word (a pattern fill, or the host's upload with its auto-incrementing address), it keeps
a running ones'-complement sum for each packet-sized chunk of the slot.

The answer is trusted only when it must be right: the slot was written in order with
today's packet size, and the writes reached exactly as far as the packet (or past it,
for a full-size packet), so no byte outside the packet is counted. Otherwise ``known``
is low and the segmenter sums the packet itself.
"""

from __future__ import annotations

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from .config import EngineConfig
from .headers import fold, halfwords, lanes

CHECKSUM_QUERY = data.StructLayout({"slot": 4, "packet": 16, "end": 32, "full": 1})
"""Packet ``packet`` of ``slot`` ends at byte ``end`` of the slot; ``full``: it holds a
whole packet size of data (only a buffer's last packet may hold less)."""

ChecksumLookup = wiring.Signature({"query": Out(CHECKSUM_QUERY), "sum": In(16), "known": In(1)})
"""The segmenter's side: a query in one cycle, ``sum`` and ``known`` in the next."""


class ChecksumTable(wiring.Component):
    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        super().__init__({
            # The slot memory's write port, watched: its members are inputs here.
            "write": Out(memory.WritePort.Signature(addr_width=config.tx_address_width, shape=config.data_width)),
            "packet_size": In(16),  # data bytes per packet, whole beats (control.py rounds it)
            "lookup": In(ChecksumLookup),
        })

    def elaborate(self, platform) -> Module:
        cfg = self.config
        W = cfg.beat_bytes
        m = Module()
        m.submodules.sums = sums = memory.Memory(shape=16, depth=cfg.tx_slots * cfg.max_packets, init=[])
        store = sums.write_port()
        read = sums.read_port()

        n = cfg.tx_slots
        in_order = Array(Signal(name=f"in_order{i}") for i in range(n))
        extent = Array(Signal(range(cfg.slot_words + 1), name=f"extent{i}") for i in range(n))
        size = Array(Signal(16, name=f"size{i}") for i in range(n))
        chunk = Array(Signal(16, name=f"chunk{i}") for i in range(n))
        filled = Array(Signal(16, name=f"filled{i}") for i in range(n))
        partial = Array(Signal(16, name=f"partial{i}") for i in range(n))

        packet_size = self.packet_size

        # Writes: each word in order adds to its chunk's sum, stored as it grows.
        shift = (cfg.slot_words - 1).bit_length()
        slot, word = self.write.addr[shift:], self.write.addr[:shift]
        starts = word == 0
        continues = in_order[slot] & (word == extent[slot]) & (size[slot] == packet_size)
        before = Signal(16)  # the chunk's bytes before this word
        base = Signal(16)   # the chunk's sum before this word
        current = Signal(16)
        at = Signal(16)     # the chunk this word belongs to
        m.d.comb += [
            before.eq(Mux(starts, 0, filled[slot])),
            base.eq(Mux(starts, 0, partial[slot])),
            at.eq(Mux(starts, 0, chunk[slot])),
            current.eq(fold(base + sum(halfwords(lanes(self.write.data, W))))),
        ]
        with m.If(self.write.en & (slot < n)):
            with m.If(starts | continues):
                done = before + W == packet_size
                m.d.comb += [store.addr.eq(slot * cfg.max_packets + at), store.data.eq(current),
                             store.en.eq(at < cfg.max_packets)]
                m.d.sync += [in_order[slot].eq(1), extent[slot].eq(word + 1), size[slot].eq(packet_size),
                             chunk[slot].eq(Mux(done, at + 1, at)),
                             filled[slot].eq(Mux(done, 0, before + W)),
                             partial[slot].eq(Mux(done, 0, current))]
            with m.Else():
                m.d.sync += in_order[slot].eq(0)

        # Lookups: the stored sum, and whether it covers exactly the packet's bytes.
        q = self.lookup.query
        reach = extent[q.slot] * W
        known = (q.slot < n) & in_order[q.slot] & (size[q.slot] == packet_size) & \
            (q.packet < cfg.max_packets) & ((reach == q.end) | (q.full & (reach >= q.end)))
        m.d.comb += [read.addr.eq(q.slot * cfg.max_packets + q.packet), self.lookup.sum.eq(read.data)]
        m.d.sync += self.lookup.known.eq(known)
        return m
