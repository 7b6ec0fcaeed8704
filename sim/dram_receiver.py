"""The receive side with its store in LiteDRAM's model of a board's chip: a top for the
receive tests (tests/gateware/rx_tb.py) and the gateware benchmark, until the engine
itself builds with slots in DRAM."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from netblt.gateware.config import EngineConfig
from netblt.gateware.dram_dma import NativePort
from netblt.gateware.receive_store import DramReceiveStore
from netblt.gateware.receiver import Receiver
from netblt.hw.litedram import LiteDram

STORE_LINE_WORDS = 512
"""Engine words per staging line: 2 KiB, a 1500-byte packet at any phase."""


def dram_receive_store(config: EngineConfig, description: dict) -> DramReceiveStore:
    """A receive store on the core's second port, in the upper half of the chip (so an
    address gone wrong does not land on the first port's data)."""
    port = NativePort(description["address_bits"], description["data_bits"])
    return DramReceiveStore(config, port, line_words=STORE_LINE_WORDS, base=1 << description["address_bits"] - 1,
                            region_words=config.rx_slots * config.slot_words)


class DramReceiver(wiring.Component):
    """The Receiver with its store in DRAM: its own members, and the core's ``ready``."""

    def __init__(self, config: EngineConfig, description: dict) -> None:
        self.description = description
        self.receiver = Receiver(config, dram_receive_store(config, description))
        super().__init__({**self.receiver.signature.members, "ready": Out(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.receiver = rx = self.receiver
        m.submodules.dram = dram = LiteDram(self.description)
        wiring.connect(m, rx.store.dram, dram.ports[1])
        m.d.comb += [self.ready.eq(dram.ready), dram.ports[0].cmd.valid.eq(0), dram.ports[0].wdata.valid.eq(0)]
        for name, member in rx.signature.members.items():
            ours, theirs = getattr(self, name), getattr(rx, name)
            if member.is_signature:
                wiring.connect(m, wiring.flipped(ours), theirs)
            elif member.flow == wiring.In:
                m.d.comb += theirs.eq(ours)
            else:
                m.d.comb += ours.eq(theirs)
        return m
