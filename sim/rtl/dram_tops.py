"""Tops that put a component with DRAM ports on LiteDRAM's model of a board's chip, for
the tests (tests/gateware) and the gateware benchmark: the engine with its slots in DRAM,
each side alone, and the stores alone."""

from __future__ import annotations

import dataclasses

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from ...gateware.config import DramGeometry, EngineConfig
from ...gateware.engine import Engine
from ...gateware.receive_path import Receiver
from ...gateware.transmit_path import Transmitter
from ...hw.litedram import COMMAND_COUNTS, RECEIVE_PORT, TRANSMIT_PORT, LiteDram
from ...hw.litedram_ports import PORTS


def in_dram(config: EngineConfig, description: dict) -> EngineConfig:
    """The configuration with its slots in the described core's DRAM."""
    return dataclasses.replace(config, dram=DramGeometry.of(description))


CORE_MEMBERS = ("dram_ready", "dram_csr")
"""An inner component's members that go to the core, not out of the top."""


class DramTop(wiring.Component):
    """``inner``'s members as the top's, ``dram_ready`` and ``dram_commands``. With the
    core's ``description``, each member ``ports`` names is connected to the core's port
    of that number (a port left over idles), and ``inner``'s ``dram_ready`` and
    ``dram_csr``, if it has them, to the core's; without, ``inner`` has no DRAM,
    ``dram_ready`` is high and no command is counted."""

    def __init__(self, inner: wiring.Component, description: dict | None, ports: dict[str, int]) -> None:
        self.inner, self.description, self.ports = inner, description, ports
        members = {name: member for name, member in inner.signature.members.items()
                   if name not in (*ports, *CORE_MEMBERS)}
        super().__init__({**members, "dram_ready": Out(1), "dram_commands": Out(COMMAND_COUNTS)})

    def elaborate(self, platform) -> Module:
        m = Module()
        m.submodules.inner = inner = self.inner
        for name, member in inner.signature.members.items():
            if name in (*self.ports, *CORE_MEMBERS):
                continue
            ours, theirs = getattr(self, name), getattr(inner, name)
            if member.is_signature:
                wiring.connect(m, wiring.flipped(ours), theirs)
            elif member.flow == wiring.In:
                m.d.comb += theirs.eq(ours)
            else:
                m.d.comb += ours.eq(theirs)
        if self.description is None:
            m.d.comb += self.dram_ready.eq(1)
            return m
        m.submodules.dram = dram = LiteDram(DramGeometry.of(self.description))
        for name, index in self.ports.items():
            wiring.connect(m, getattr(inner, name), dram.ports[index])
        for index in set(range(PORTS)) - set(self.ports.values()):
            m.d.comb += [dram.ports[index].cmd.valid.eq(0), dram.ports[index].wdata.valid.eq(0)]
        m.d.comb += [self.dram_ready.eq(dram.dram_ready), self.dram_commands.eq(dram.dram_commands)]
        if "dram_ready" in inner.signature.members:
            m.d.comb += inner.dram_ready.eq(dram.dram_ready)
        if "dram_csr" in inner.signature.members:
            wiring.connect(m, inner.dram_csr, dram.csr)
        return m


def dram_engine(config: EngineConfig, description: dict) -> DramTop:
    """The engine with its slots in DRAM."""
    return DramTop(Engine(in_dram(config, description)), description,
                   {"tx_dram": TRANSMIT_PORT, "rx_dram": RECEIVE_PORT})


def dram_receiver(config: EngineConfig, description: dict) -> DramTop:
    """The Receiver with its store in DRAM."""
    return DramTop(Receiver(in_dram(config, description)), description, {"dram": RECEIVE_PORT})


def dram_transmitter(config: EngineConfig, description: dict) -> DramTop:
    """The Transmitter with its store in DRAM."""
    return DramTop(Transmitter(in_dram(config, description)), description, {"dram": TRANSMIT_PORT})
