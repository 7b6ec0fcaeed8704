"""The PHY management bus, against a PHY model in Amaranth's simulator."""

from amaranth.sim import Simulator

from netblt.hw.mdio import LINK_UP, MdioLinkMonitor, read_frame

PHY_ADDRESS = 1


def run(status: int) -> tuple[list, int, int]:
    """The bits the monitor drove in one read, its link output, and reset cycles seen."""
    dut = MdioLinkMonitor(phy_address=PHY_ADDRESS, half_period=2, reset_cycles=20)
    seen: list = []
    result = {}

    async def bench(ctx):
        reset = 0
        while ctx.get(dut.phy_reset):
            reset += 1
            await ctx.tick()
        result["reset"] = reset
        position = 0
        mdc = 0
        while len(seen) < 2 * 64:
            await ctx.tick()
            now = ctx.get(dut.mdc)
            if now and not mdc:  # rising edge: the PHY's bit is sampled, the station's seen
                seen.append(ctx.get(dut.mdio_o) if ctx.get(dut.mdio_oe) else None)
                position = (position + 1) % 64
            elif mdc and not now:
                data_bit = position - 48
                ctx.set(dut.mdio_i, (status >> (15 - data_bit)) & 1 if 0 <= data_bit < 16 else 1)
            mdc = now
        for _ in range(8):
            await ctx.tick()
        result["link"] = ctx.get(dut.link)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return seen, result["link"], result["reset"]


def test_reads_the_status_register_and_shows_the_link():
    seen, link, reset = run(0x7949 | LINK_UP)
    assert reset == 20
    assert seen[:64] == read_frame(PHY_ADDRESS, 1)
    assert link == 1


def test_link_down_shows_off():
    _, link, _ = run(0x7949 & ~LINK_UP)
    assert link == 0
