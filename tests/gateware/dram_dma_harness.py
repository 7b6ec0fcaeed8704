"""DramDma between a staging memory and LiteDRAM's model, for dram_dma_tb.py: the
testbench loads and unloads staging through ports of its own."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out

from netblt.gateware.dram_dma import DramDma, NativePort
from netblt.hw.litedram import LiteDram

STAGING_WORDS = 512


class DmaHarness(wiring.Component):
    def __init__(self, description: dict) -> None:
        self.description = description
        self.dma = DramDma(NativePort(description["address_bits"], description["data_bits"]), STAGING_WORDS)
        bits = (STAGING_WORDS - 1).bit_length()
        super().__init__({
            "copy": In(stream.Signature(self.dma.copy.payload.shape())),
            "done": Out(1),
            "ready": Out(1),
            # The memory's own port shapes: the testbench drives them.
            "load": Out(memory.WritePort.Signature(addr_width=bits, shape=description["data_bits"])),
            "unload": Out(memory.ReadPort.Signature(addr_width=bits, shape=description["data_bits"])),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.dram = dram = LiteDram(self.description)
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
        m.d.comb += [self.done.eq(dma.done), self.ready.eq(dram.ready)]
        # The second port is unused here.
        m.d.comb += [dram.ports[1].cmd.valid.eq(0), dram.ports[1].wdata.valid.eq(0)]
        return m
