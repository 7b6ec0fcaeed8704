"""Tops that put a component with a DRAM port on LiteDRAM's model of a board's chip, for
the tests (tests/gateware) and the gateware benchmark, until the engine itself builds
with slots in DRAM: each side with its store in DRAM, and the stores alone."""

from __future__ import annotations

from collections.abc import Callable

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from netblt.gateware.config import EngineConfig
from netblt.gateware.dram_dma import NativePort
from netblt.gateware.receive_store import DramReceiveStore
from netblt.gateware.receiver import Receiver
from netblt.gateware.transmit_store import DramTransmitStore
from netblt.gateware.transmitter import Transmitter
from netblt.hw.litedram import LiteDram

STORE_LINE_WORDS = 512
"""Engine words per staging line: 2 KiB, a 1500-byte packet at any phase."""


def dram_port(description: dict) -> NativePort:
    return NativePort(description["address_bits"], description["data_bits"])


def dram_receive_store(config: EngineConfig, description: dict) -> DramReceiveStore:
    """A receive store on the core's second port, in the upper half of the chip (so an
    address gone wrong does not land on the first port's data)."""
    return DramReceiveStore(config, dram_port(description), line_words=STORE_LINE_WORDS,
                            base=1 << description["address_bits"] - 1, region_words=config.rx_slots * config.slot_words)


TRANSMIT_STORE_BASE = 4096
"""DRAM words before a transmit store on the core's first port: a run offset wrongly shows."""


def dram_transmit_store(config: EngineConfig, description: dict) -> DramTransmitStore:
    """A transmit store on the core's first port, past its first words."""
    return DramTransmitStore(config, dram_port(description), line_words=STORE_LINE_WORDS,
                             base=TRANSMIT_STORE_BASE, region_words=config.tx_slots * config.slot_words)


class DramTop(wiring.Component):
    """``inner``'s members as the top's, and ``ready``; with the core's ``description``,
    the port ``dram(inner)`` names is the core's ``port`` (the other one idle), else there
    is no DRAM and ``ready`` is high."""

    def __init__(self, inner: wiring.Component, description: dict | None,
                 dram: Callable[[wiring.Component], wiring.PureInterface] = lambda inner: inner.dram,
                 port: int = 0) -> None:
        self.inner, self.description, self.dram, self.port = inner, description, dram, port
        members = {name: member for name, member in inner.signature.members.items() if name != "dram"}
        super().__init__({**members, "ready": Out(1)})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.inner = inner = self.inner
        for name, member in inner.signature.members.items():
            if name == "dram":
                continue
            ours, theirs = getattr(self, name), getattr(inner, name)
            if member.is_signature:
                wiring.connect(m, wiring.flipped(ours), theirs)
            elif member.flow == wiring.In:
                m.d.comb += theirs.eq(ours)
            else:
                m.d.comb += ours.eq(theirs)
        if self.description is None:
            m.d.comb += self.ready.eq(1)
            return m
        m.submodules.dram = dram = LiteDram(self.description)
        wiring.connect(m, self.dram(inner), dram.ports[self.port])
        idle = dram.ports[1 - self.port]
        m.d.comb += [self.ready.eq(dram.ready), idle.cmd.valid.eq(0), idle.wdata.valid.eq(0)]
        return m


def dram_receiver(config: EngineConfig, description: dict) -> DramTop:
    """The Receiver with its store in DRAM."""
    return DramTop(Receiver(config, dram_receive_store(config, description)), description,
                   lambda receiver: receiver.store.dram, port=1)


def dram_transmitter(config: EngineConfig, description: dict) -> DramTop:
    """The Transmitter with its store in DRAM."""
    return DramTop(Transmitter(config, dram_transmit_store(config, description)), description,
                   lambda transmitter: transmitter.store.dram)
