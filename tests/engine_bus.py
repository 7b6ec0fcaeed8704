"""The engine's register bus (gateware/register_bus.py) from an Amaranth testbench, by
register name: a write takes a cycle, a read two (its data comes a cycle after r_en)."""

from __future__ import annotations

from netblt.formats.registers import ADDRESS


class EngineBus:
    def __init__(self, ctx, bus) -> None:
        self.ctx, self.bus = ctx, bus

    async def write(self, name: str, value: int) -> None:
        ctx, bus = self.ctx, self.bus
        ctx.set(bus.addr, ADDRESS[name])
        ctx.set(bus.w_data, value)
        ctx.set(bus.w_en, 1)
        await ctx.tick()
        ctx.set(bus.w_en, 0)

    async def read(self, name: str) -> int:
        ctx, bus = self.ctx, self.bus
        ctx.set(bus.addr, ADDRESS[name])
        ctx.set(bus.r_en, 1)
        await ctx.tick()
        ctx.set(bus.r_en, 0)
        await ctx.tick()
        return ctx.get(bus.r_data)
