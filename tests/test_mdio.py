"""The PHY management bus, against a PHY model in Amaranth's simulator.

The expected frame is written out here from IEEE 802.3 clause 22, not taken from
hw/mdio.py, and the PHY model answers only a read of its own address and register.
"""

from amaranth.sim import Simulator

from netblt.hw.mdio import LINK_UP, MdioLinkMonitor

PHY_ADDRESS = 1
STATUS_REGISTER = 1


def clause22_read(phy: int, register: int) -> list[int | None]:
    """The station's bits of a clause-22 read: 32 ones of preamble, ST = 01, OP = 10 (read),
    5 bits of PHY address and 5 of register address, most significant first; then the
    station lets go for the turnaround and the PHY's 16 data bits (None)."""
    bits = "1" * 32 + "01" + "10" + format(phy, "05b") + format(register, "05b")
    return [int(b) for b in bits] + [None] * 18


class PhyModel:
    """Answers a frame only when it is a read of ``address``'s ``register``; otherwise the
    line stays high (its pull-up), as with no PHY there."""

    def __init__(self, address: int, register: int, value: int) -> None:
        self.address, self.register, self.value = address, register, value
        self.frame: list = []

    def answering(self) -> bool:
        f = self.frame
        return (len(f) >= 46 and f[32:34] == [0, 1] and f[34:36] == [1, 0]
                and int("".join(map(str, f[36:41])), 2) == self.address
                and int("".join(map(str, f[41:46])), 2) == self.register)

    def bit(self, position: int) -> int:
        """The PHY's level for frame bit ``position`` (set up on the falling edge before it)."""
        if position == 47 and self.answering():
            return 0  # the turnaround's second bit
        data_bit = position - 48
        if 0 <= data_bit < 16 and self.answering():
            return (self.value >> (15 - data_bit)) & 1
        return 1


def run(status: int) -> tuple[list, int, int]:
    """The bits the monitor drove in two reads, its link output, and reset cycles seen."""
    dut = MdioLinkMonitor(phy_address=PHY_ADDRESS, half_period=2, reset_cycles=20)
    phy = PhyModel(PHY_ADDRESS, STATUS_REGISTER, status)
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
                bit = ctx.get(dut.mdio_o) if ctx.get(dut.mdio_oe) else None
                seen.append(bit)
                phy.frame.append(bit)
                position = (position + 1) % 64
                if position == 0:
                    phy.frame = []
            elif mdc and not now:
                ctx.set(dut.mdio_i, phy.bit(position))
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
    assert seen[:64] == seen[64:] == clause22_read(PHY_ADDRESS, STATUS_REGISTER)
    assert link == 1


def test_link_down_shows_off():
    _, link, _ = run(0x7949 & ~LINK_UP)
    assert link == 0


def test_the_phy_model_answers_only_a_read_of_its_own_register():
    for frame, answers in ((clause22_read(1, 1), True), (clause22_read(2, 1), False),
                           (clause22_read(1, 0), False)):
        phy = PhyModel(1, 1, 0)
        phy.frame = frame[:46]
        assert phy.answering() is answers
    write = clause22_read(1, 1)
    write[34:36] = [0, 1]
    phy = PhyModel(1, 1, 0)
    phy.frame = write[:46]
    assert not phy.answering()
