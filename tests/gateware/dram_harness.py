"""Harnesses around LiteDRAM's model: DramDma between a staging memory and the DRAM,
for dram_dma_tb.py (the testbench loads and unloads staging through ports of its own),
a DramSlots store for dram_slots_tb.py, receive stores for receive_store_tb.py and
transmit stores for transmit_store_tb.py (sim/rtl/dram_tops.py puts them on the core, and
the whole receive side for rx_tb.py and the benchmark)."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from netblt.gateware.dram_dma import DramDma, NativePort
from netblt.gateware.config import DramGeometry, EngineConfig
from netblt.gateware.dram_slots import DramSlots
from netblt.gateware.receive_store import receive_store
from netblt.gateware.transmit_store import transmit_store
from netblt.sim.rtl.dram_tops import DramTop, in_dram
from netblt.hw.litedram import RECEIVE_PORT, TRANSMIT_PORT, LiteDram

STAGING_WORDS = 512


class DmaHarness(wiring.Component):
    def __init__(self, description: dict) -> None:
        self.description = description
        self.dma = DramDma(NativePort(description["address_bits"], description["data_bits"]), STAGING_WORDS)
        bits = (STAGING_WORDS - 1).bit_length()
        super().__init__({
            "copy": In(stream.Signature(self.dma.copy.payload.shape())),
            "done": Out(1),
            "read_sum": Out(16),
            "dram_ready": Out(1),
            # The memory's own port shapes: the testbench drives them.
            "load": Out(memory.WritePort.Signature(addr_width=bits, shape=description["data_bits"])),
            "unload": Out(memory.ReadPort.Signature(addr_width=bits, shape=description["data_bits"])),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.dram = dram = LiteDram(DramGeometry.of(self.description))
        m.submodules.dma = dma = self.dma
        m.submodules.staging = staging = memory.Memory(shape=self.description["data_bits"], depth=STAGING_WORDS, init=[])
        wiring.connect(m, dma.dram, dram.ports[0])
        wiring.connect(m, wiring.flipped(self.copy), dma.copy)
        load, dma_write = staging.write_port(), staging.write_port()
        unload, dma_read = staging.read_port(), staging.read_port()
        for port, outside in ((load, self.load), (dma_write, dma.staging_write), (unload, self.unload),
                              (dma_read, dma.staging_read)):
            m.d.comb += port.addr.eq(outside.addr)
            if isinstance(port, memory.WritePort):
                m.d.comb += [port.data.eq(outside.data), port.en.eq(outside.en)]
            else:
                m.d.comb += [outside.data.eq(port.data), port.en.eq(outside.en)]
        m.d.comb += [self.done.eq(dma.done), self.read_sum.eq(dma.read_sum), self.dram_ready.eq(dram.dram_ready)]
        # The second port is unused here.
        m.d.comb += [dram.ports[1].cmd.valid.eq(0), dram.ports[1].wdata.valid.eq(0)]
        return m


SLOT_LINES, SLOT_LINE_WORDS, SLOT_REGION_WORDS = 2, 512, 1 << 16


class SlotsHarness(wiring.Component):
    """A DramSlots store on the core's first port, its engine side the testbench's; the
    region starts past the first DRAM words, so a run wrapped or offset wrongly shows."""

    def __init__(self, description: dict) -> None:
        self.description = description
        port = NativePort(description["address_bits"], description["data_bits"])
        self.base = 4096
        self.slots = DramSlots(port, lines=SLOT_LINES, line_words=SLOT_LINE_WORDS, base=self.base,
                               region_words=SLOT_REGION_WORDS)
        members = {name: member for name, member in self.slots.signature.members.items() if name != "dram"}
        super().__init__({**members, "dram_ready": Out(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.dram = dram = LiteDram(DramGeometry.of(self.description))
        m.submodules.slots = slots = self.slots
        wiring.connect(m, slots.dram, dram.ports[0])
        for name in ("commit", "fetch", "write", "read"):
            wiring.connect(m, wiring.flipped(getattr(self, name)), getattr(slots, name))
        m.d.comb += [self.committed.eq(slots.committed), self.fetched.eq(slots.fetched), self.dram_ready.eq(dram.dram_ready),
                     dram.ports[1].cmd.valid.eq(0), dram.ports[1].wdata.valid.eq(0)]
        return m


STORE_CONFIG = EngineConfig(rx_slots=4, slot_bytes=16384)


def receive_store_harness(description: dict | None) -> DramTop:
    """A receive store for receive_store_tb.py: in DRAM (on the core's second port, in
    the upper half of the chip) when given the core's description, else in block RAM."""
    config = in_dram(STORE_CONFIG, description) if description else STORE_CONFIG
    return DramTop(receive_store(config), description, {"dram": RECEIVE_PORT} if description else {})


TX_STORE_CONFIG = EngineConfig(tx_slots=4, slot_bytes=16384)


def transmit_store_harness(description: dict | None) -> DramTop:
    """A transmit store for transmit_store_tb.py: in DRAM (on the core's first port, in
    the lower half of the chip) when given the core's description, else in block RAM."""
    config = in_dram(TX_STORE_CONFIG, description) if description else TX_STORE_CONFIG
    return DramTop(transmit_store(config), description, {"dram": TRANSMIT_PORT} if description else {})
