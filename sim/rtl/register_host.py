"""The host's side of the engine's registers, from cocotb: reads, writes, commands, events.

What the host driver does; the testbenches share it. A ``RegisterPort`` carries each
access: ``BusPort`` drives the engine's register bus cycle by cycle (and pops EVENT for
events), the integrated top's testbench is a host on the host link instead
(sim/rtl/ethernet_wire.py ``LinkPort``, whose events the board pushes).
"""

from __future__ import annotations

from typing import Protocol

from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from ...formats.registers import ADDRESS, COMMAND_WORD, EVENT_WORD, Command, Event


class RegisterPort(Protocol):
    async def write(self, address: int, value: int) -> None: ...

    async def read(self, address: int) -> int: ...

    async def events(self) -> list[int]:
        """EVENT words that have come since the last call."""


class BusPort:
    """Accesses on ``dut.bus__*``, one per cycle; read data follows ``r_en`` by a cycle."""

    def __init__(self, dut) -> None:
        self.dut = dut
        dut.bus__w_en.value = 0
        dut.bus__r_en.value = 0

    async def write(self, address: int, value: int) -> None:
        self.dut.bus__addr.value = address
        self.dut.bus__w_data.value = value
        self.dut.bus__w_en.value = 1
        await RisingEdge(self.dut.clk)
        self.dut.bus__w_en.value = 0

    async def read(self, address: int) -> int:
        self.dut.bus__addr.value = address
        self.dut.bus__r_en.value = 1
        await RisingEdge(self.dut.clk)
        self.dut.bus__r_en.value = 0
        await ReadOnly()
        value = int(self.dut.bus__r_data.value)
        await RisingEdge(self.dut.clk)
        return value

    async def events(self) -> list[int]:
        out = []
        while EVENT_WORD.unpack(word := await self.read(ADDRESS["EVENT"]))["valid"]:
            out.append(word)
        return out


class RegisterHost:
    """Registers by name over ``port`` (by default the bus of ``dut``)."""

    def __init__(self, dut, port: RegisterPort | None = None) -> None:
        self.dut = dut
        self.port = port or BusPort(dut)
        self.events: list[tuple[Event, int, int, int]] = []

    async def write(self, name: str, value: int) -> None:
        await self.port.write(ADDRESS[name], value & 0xFFFF_FFFF)

    async def configure(self, **registers: int) -> None:
        for name, value in registers.items():
            await self.write(name, value)

    async def read(self, name: str) -> int:
        return await self.port.read(ADDRESS[name])

    async def download(self, address: int, words: int) -> list[int]:
        """``words`` words of receive memory from ``address``, each read only once
        DOWNLOAD_LEVEL says it is ready (the store fetches after the seek)."""
        await self.write("DOWNLOAD_ADDRESS", address)
        return await self.download_more(words)

    async def download_more(self, words: int) -> list[int]:
        """The next ``words`` words from where the last download stopped."""
        out: list[int] = []
        while len(out) < words:
            ready = await self.read("DOWNLOAD_LEVEL")
            for _ in range(min(ready, words - len(out))):
                out.append(await self.read("DOWNLOAD_DATA"))
        return out

    async def command(self, op: Command, slot: int, arg0: int = 0, arg1: int = 0, flag: int = 0) -> None:
        await self.write("ARG0", arg0)
        await self.write("ARG1", arg1)
        await self.write("COMMAND", COMMAND_WORD.pack(op=op, slot=slot, flag=flag))

    async def poll(self) -> None:
        for word in await self.port.events():
            event = EVENT_WORD.unpack(word)
            self.events.append((Event(event["kind"]), event["slot"], event["flags"], event["value"]))

    async def wait_for(self, kind: Event, limit: int = 100_000) -> tuple[Event, int, int, int]:
        for _ in range(limit):
            await self.poll()
            for event in self.events:
                if event[0] == kind:
                    self.events.remove(event)
                    return event
            await ClockCycles(self.dut.clk, 10)
        raise AssertionError(f"no {kind.name} event")

    async def missing(self, slot: int, limit: int) -> list[int]:
        await self.command(Command.QUERY_MISSING, slot, limit)
        await self.wait_for(Event.MISSING_END)
        listed = [e[3] for e in self.events if e[0] == Event.MISSING and e[1] == slot]
        self.events = [e for e in self.events if e[0] != Event.MISSING]
        return listed
