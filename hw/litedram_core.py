"""The LiteDRAM core a board's slot memory lives in: PHY, controller, native ports, and
its own initialisation at power-up.

    python -m netblt.hw.litedram_core --chip versa --output build/dram/versa_model.v
    python -m netblt.hw.litedram_core --chip colorlight --phy board --output build/colorlight_5a75b-dram/litedram_core.v

LiteDRAM's generator (litedram_gen) builds a whole LiteX SoC whose initialisation a CPU or
an outside bus runs; the engine has no CPU, so this composes LiteDRAM's classes with a
small sequencer that plays LiteDRAM's own init sequence (litedram.init, the same list the
LiteX BIOS plays) on the DFI injector's registers, then hands the DRAM to the controller
and raises ``init_done``. The native ports are in the engine's clock domain, across
LiteDRAM's own clock-domain crossing from the controller's.

The PHY is LiteDRAM's SDRAMPHYModel with the chip's geometry and timings (at the clock that
gives the board PHY's bandwidth: half the controller's for DDR3, which it takes 1:4), for
Verilator (the controller, refresh and bank machines are the real ones, only the pins
and the chips are modelled), or with ``--phy board`` the board's own:

- GENSDRPHY for the Colorlight's SDR chips, its IO registers and tristates on the
  ``sdram_*`` pins (litedram_ports.SDR_PADS), the chip's clock driven by the board top;
- ECP5DDRPHY for the Versa's DDR3 chip on the ``ddram_*`` pins (litedram_ports.DDR3_PADS), with the
  clocks it needs made inside as LiteDRAM's own CRG makes them: a PLL from the board's
  oscillator (``clk``) to twice the controller's clock, then ECLKSYNCB and CLKDIVF,
  which the PHY's init stops and resets. Its reads need levelling: the init sequence
  leaves the DRAM in software control, and the host levels the reads through the
  core's CSR bus (``CsrPort``, ``csr_*``; driver/dram_levelling.py) and hands it over.
  The model cores have that port too, so the host's way to the injector is tested.

The core is generated at build time into build/, never committed. Ports:
``engine_clock``/``engine_reset``, ``init_done``, per native port n
``port<n>_{cmd,wdata,rdata}_*`` (LiteDRAM's names), ``commands_<kind>``, free-running
counts of the commands the controller issued on the DFI, for the benchmark's bandwidth
and refresh figures; the controller's clock (``dram_clock``/``dram_reset``), or for
ECP5DDRPHY the oscillator; with a board PHY its pins.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from amaranth.hdl import Shape
from amaranth.lib.wiring import Out
from litedram import modules
from litedram.core import LiteDRAMCore
from litedram.core.controller import ControllerSettings
from litedram.init import get_sdram_phy_init_sequence, get_sdram_phy_py_header
from litedram.gen import LiteDRAMECP5DDRPHYCRG
from litedram.phy.ecp5ddrphy import ECP5DDRPHY
from litedram.phy.gensdrphy import GENSDRPHY
from litedram.phy.model import SDRAMPHYModel, get_sdram_phy_settings, sdram_module_nphases
from litex.build.generic_platform import Pins, Subsignal
from litex.build.lattice.platform import LatticePlatform
from litex.gen import LiteXModule
from litex.soc.interconnect import csr_bus
from migen import FSM, Array, ClockDomain, Constant, If, NextState, NextValue, Signal
from migen.genlib.cdc import MultiReg

from ..formats.dram_csr import DFII_COMMAND, DFII_CONTROL, csr_map
from ..formats.registers import DRAM_CSR_ADDRESS_BITS, DRAM_PHY_WORD
from ..gateware.register_bus import DramCsrBus
from .litedram_ports import BOARD_PHYS, COMMANDS, COUNT_BITS, PORTS, BoardPhy
from .litex_core import DEVICE, run_generator, write_if_changed, write_verilog

INIT_CLOCK_HZ = 25e6
"""ECP5DDRPHY's init clock (its DLL's reset and its clock-stop steps), as LiteX runs it."""
PHYS = ("model", "board")
CSR_BITS, CSR_ADDRESS_BITS = 32, DRAM_CSR_ADDRESS_BITS
"""The internal register bus the init sequencer drives (LiteX's usual widths)."""
BANKS = {"sdram": 0, "ddrphy": 1}
"""The CSR banks: LiteDRAM's injector, and the PHY's delays where it has them."""


@dataclass(frozen=True)
class Chip:
    """A board's DRAM as LiteDRAM describes it."""

    module: str
    """The chip's class in litedram.modules (geometry and timings)."""
    data_bits: int
    """DQ pins: one x16 chip, or two side by side on a 32-bit bus."""
    clock_hz: float
    """The controller's clock."""
    oscillator_hz: float = 0
    """For a DDR3 board PHY: the board oscillator its own PLL starts from."""

    @property
    def memtype(self) -> str:
        return getattr(modules, self.module).memtype

    @property
    def board_phy(self) -> BoardPhy:
        return BOARD_PHYS[self.memtype]

    @property
    def model_clock_hz(self) -> float:
        """The clock LiteDRAM's model of the chip runs at to move data as the board's PHY
        does: the model takes DDR3 at 1:4 where ECP5DDRPHY takes it at 1:2, so at half the
        controller's clock it gives the same bursts a second, at the same timings in
        nanoseconds (SDR is 1:1 in both)."""
        return self.clock_hz * self.board_phy.phases / sdram_module_nphases[self.memtype]

    def geometry(self, clock_hz: float, phases: int):
        return getattr(modules, self.module)(clock_hz, f"1:{phases}")

    @property
    def bytes(self) -> int:
        g = getattr(modules, self.module)
        return g.nbanks * g.nrows * g.ncols * self.data_bits // 8


CHIPS = {
    # One MT41K64M16 (128 MB) through ECP5DDRPHY (1:2) at 50 MHz, the chip at 100: 3.2 Gb/s
    # raw, of which a board's whole load takes 81-86% (docs/benchmarks.md). litex-boards
    # runs the Versa's at 75 MHz and the OrangeCrab's (the same chip and PHY) at 48.
    # Beside the 16-slot engine the controller's own refresh-to-bank-machine path, 17 ns,
    # missed 75 by 15% and 60 with 4 seeds of 5.
    "versa": Chip("MT41K64M16", 16, 50e6, oscillator_hz=100e6),
    # Two M12L16161A (2 MB each) on a 32-bit bus through GENSDRPHY at 60 MHz, as
    # litex-boards runs it: 1.92 Gb/s at most, more than the engine's 50 MHz would give.
    "colorlight": Chip("M12L16161A", 32, 60e6),
}


def header_constants(settings, timing_settings) -> dict[str, object]:
    """LiteDRAM's own constants for the init sequence, from its Python header."""
    names: dict[str, object] = {}
    exec(get_sdram_phy_py_header(settings, timing_settings), names)  # noqa: S102 (LiteDRAM's own constants)
    return names


def init_program(settings, timing_settings, address: dict[str, int]) -> list[tuple[int, int, int]]:
    """LiteDRAM's init sequence as register writes: (CSR word address, value, cycles to
    wait after it). Software control first, as the BIOS does; the DRAM is handed to the
    controller last, unless its reads need levelling first (the host does that, then
    hands it over: driver/dram_levelling.py). Every command and control value is
    LiteDRAM's, read from its own Python header, never retyped."""
    names = header_constants(settings, timing_settings)

    def value(expression: str) -> int:
        result = 0
        for name in expression.split("|"):
            result |= names[name.strip().lower()]
        return result

    control = address["dfii_control"]
    software = value("DFII_CONTROL_CKE|DFII_CONTROL_ODT|DFII_CONTROL_RESET_N")
    program = [(control, software, 0)]
    sequence, _ = get_sdram_phy_init_sequence(settings, timing_settings)
    for _comment, a, ba, command, delay in sequence:
        program += [(address["dfii_pi0_address"], a, 0), (address["dfii_pi0_baddress"], ba, 0)]
        if command.startswith("DFII_CONTROL"):
            program.append((control, value(command), delay))
        else:
            program += [(address["dfii_pi0_command"], value(command), 0),
                        (address["dfii_pi0_command_issue"], 1, delay)]
    if not settings.read_leveling:
        program.append((control, value("DFII_CONTROL_SEL"), 0))
    return program


def check_host_view(settings, timing_settings, address: dict[str, int], words: int) -> None:
    """The host's copy of the injector's registers and bits (driver/dram_levelling.py)
    is this core's: a LiteDRAM that moved one would level the wrong registers."""
    names = header_constants(settings, timing_settings)
    expected = csr_map(settings.nphases, words, settings.read_leveling)
    ours = {f"dfii_control_{f}": 1 << DFII_CONTROL.offset(f) for f, _ in DFII_CONTROL.fields} | \
           {f"dfii_command_{f}": 1 << DFII_COMMAND.offset(f) for f, _ in DFII_COMMAND.fields}
    if {name: address.get(name) for name in expected} != expected or any(
            names[name] != bit for name, bit in ours.items()):
        raise SystemExit("litedram_core: LiteDRAM's injector registers are not where "
                         "driver/dram_levelling.py has them")


class CsrPort(LiteXModule):
    """The core's CSR bus from the engine's clock, for the host (read levelling).

    A request (``start`` with ``write``, ``address`` and ``write_data``) is held in
    registers and crosses to the controller's clock as a toggle; there it is played on
    ``bus`` once ``free`` (the init sequence is done), and the answer (``read_data``,
    held) crosses back the same way. ``busy`` from the request until the answer is back;
    a ``start`` while busy is ignored (``ignored`` pulses)."""

    def __init__(self, bus, free) -> None:
        # Named as DramCsrBus names them: the core's ``csr_*`` pins are wired by name.
        self.start, self.write, self.busy, self.ignored = Signal(), Signal(), Signal(), Signal()
        self.address, self.write_data, self.read_data = Signal(len(bus.adr)), Signal(32), Signal(32)
        held_write, held_address, held_data = Signal(), Signal(len(bus.adr)), Signal(32)
        asked, answered, asked_seen, answered_seen = Signal(), Signal(), Signal(), Signal()
        self.specials += [MultiReg(asked, asked_seen, "sys"), MultiReg(answered, answered_seen, "engine")]
        self.comb += [self.busy.eq(asked != answered_seen), self.ignored.eq(self.start & self.busy)]
        self.sync.engine += If(self.start & ~self.busy,
                               held_write.eq(self.write), held_address.eq(self.address),
                               held_data.eq(self.write_data), asked.eq(~asked))
        # The held request is steady by the time its toggle is seen, and the answer by
        # the time its own is.
        reading = Signal()
        self.comb += [bus.adr.eq(held_address), bus.dat_w.eq(held_data)]
        self.sync += [reading.eq(0),
                      If(reading, self.read_data.eq(bus.dat_r), answered.eq(~answered)),
                      If(free & (asked_seen != answered) & ~reading,
                         If(held_write, answered.eq(~answered)).Else(reading.eq(1)))]
        self.comb += bus.we.eq(free & (asked_seen != answered) & ~reading & held_write)


class InitSequencer(LiteXModule):
    """Plays an init program on a CSR bus at power-up, then raises ``done``."""

    def __init__(self, bus, program: list[tuple[int, int, int]]) -> None:
        self.done = Signal()
        wait_bits = max(delay for _, _, delay in program).bit_length() + 1
        step = Signal(max=len(program))
        wait = Signal(wait_bits)
        # A table of constants, not a memory: no contents file to find at simulation time.
        addresses, values, waits = (Array(Constant(entry[i]) for entry in program) for i in range(3))
        entry_wait = waits[step]
        self.comb += [bus.adr.eq(addresses[step]), bus.dat_w.eq(values[step])]
        self.fsm = fsm = FSM(reset_state="WRITE")
        fsm.act("WRITE",
                bus.we.eq(1),
                NextValue(wait, entry_wait),
                NextState("WAIT"))
        fsm.act("WAIT",
                NextValue(wait, wait - 1),
                If(wait == 0,
                   NextValue(step, step + 1),
                   If(step == len(program) - 1, NextState("DONE")).Else(NextState("WRITE"))))
        fsm.act("DONE", self.done.eq(1))


def csr_addresses(banks: csr_bus.CSRBankArray) -> dict[str, int]:
    """Each register's first bus word, the bank's own layout: a compound register (a
    storage or status) takes its simple parts' words in order."""
    address = {}
    for _name, csrs, mapaddr, _bank in banks.banks:
        index = 0
        for csr in csrs:
            address[csr.name] = mapaddr * (banks.paging // 4) + index
            index += len(csr.get_simple_csrs()) if hasattr(csr, "get_simple_csrs") else 1
    return address


def native_port_pins(index: int, address_bits: int, data_bits: int) -> tuple:
    wires = [("cmd_valid", 1), ("cmd_ready", 1), ("cmd_we", 1), ("cmd_addr", address_bits),
             ("wdata_valid", 1), ("wdata_ready", 1), ("wdata_we", data_bits // 8), ("wdata_data", data_bits),
             ("rdata_valid", 1), ("rdata_ready", 1), ("rdata_data", data_bits)]
    return (f"port{index}", 0, *(Subsignal(name, Pins(width)) for name, width in wires))


def csr_port_pins() -> tuple:
    """The host's port as the engine's ``DramCsrBus`` defines it."""
    return ("csr", 0, *(Subsignal(name, Pins(Shape.cast(member.shape).width))
                        for name, member in DramCsrBus().members.items()))


def drive(bus, source) -> list:
    """``bus`` driven by ``source``'s address, data and write strobe."""
    return [bus.adr.eq(source.adr), bus.dat_w.eq(source.dat_w), bus.we.eq(source.we)]


COMMON_PINS = [("dram_clock", 0, Pins(1)), ("dram_reset", 0, Pins(1)),
               ("engine_clock", 0, Pins(1)), ("engine_reset", 0, Pins(1)), ("init_done", 0, Pins(1)),
               *((f"commands_{kind}", 0, Pins(COUNT_BITS)) for kind in COMMANDS)]


class CommandCounters(LiteXModule):
    """How many of each DFI command the controller has issued, over every phase."""

    def __init__(self, dfi) -> None:
        self.counts = {kind: Signal(COUNT_BITS) for kind in COMMANDS}
        for kind, (ras_n, cas_n, we_n) in COMMANDS.items():
            issued = [~phase.cs_n & (phase.ras_n == ras_n) & (phase.cas_n == cas_n) & (phase.we_n == we_n)
                      for phase in dfi.phases]
            self.sync += self.counts[kind].eq(self.counts[kind] + sum(issued[1:], issued[0]))


def board_pads(name: str, pads: dict[str, str], module, data_bits: int) -> tuple:
    """The chip's pins as LiteDRAM's PHY names them, ``name``, each its width."""
    widths = {"a": module.geom_settings.addressbits, "ba": module.geom_settings.bankbits, "dq": data_bits,
              "dm": data_bits // 8, "dqs_p": data_bits // 8}
    return (name, 0, *(Subsignal(pad, Pins(widths.get(pad, 1))) for pad in pads))


class LiteDramSoc(LiteXModule):
    def __init__(self, platform, chip: Chip, phy: str) -> None:
        self.cd_engine = ClockDomain()
        # Each reset comes in synchronous to its clock (the Amaranth side's domains).
        self.comb += [self.cd_engine.clk.eq(platform.request("engine_clock")),
                      self.cd_engine.rst.eq(platform.request("engine_reset"))]
        board = chip.board_phy
        clock_hz = chip.clock_hz if phy == "board" else chip.model_clock_hz
        if phy == "board" and board.own_clocks:
            module = chip.geometry(clock_hz, board.phases)
            self.ddrphy = self._ecp5_ddr3_phy(platform, chip, module)
        else:
            self.cd_sys = ClockDomain()
            self.comb += [self.cd_sys.clk.eq(platform.request("dram_clock")),
                          self.cd_sys.rst.eq(platform.request("dram_reset"))]
            if phy == "board":
                module = chip.geometry(clock_hz, board.phases)
                platform.add_extension([board_pads(board.prefix, board.pads, module, chip.data_bits)])
                self.ddrphy = GENSDRPHY(platform.request(board.prefix), sys_clk_freq=chip.clock_hz)
            else:
                # The chip's memory type at LiteDRAM's simulation rate, at the clock that
                # gives the board PHY's bandwidth; its native port is as wide as the board
                # PHY's (128 bits for DDR3, 32 for 32-bit SDR).
                settings = get_sdram_phy_settings(memtype=chip.memtype, data_width=chip.data_bits,
                                                  clk_freq=clock_hz)
                module = chip.geometry(clock_hz, settings.nphases)
                self.ddrphy = SDRAMPHYModel(module=module, settings=settings, clk_freq=clock_hz)
        settings = self.ddrphy.settings
        if phy == "board" and settings.nphases != board.phases:
            raise SystemExit(f"litedram_core: LiteDRAM's {settings.phytype} runs {settings.nphases} phases "
                             f"a cycle, not the {board.phases} litedram_ports.BOARD_PHYS has")
        self.sdram = LiteDRAMCore(self.ddrphy, module.geom_settings, module.timing_settings, clock_hz,
                                  controller_settings=ControllerSettings())

        ready = Signal()
        for index in range(PORTS):
            port = self.sdram.crossbar.get_port(clock_domain="engine")
            platform.add_extension([native_port_pins(index, port.address_width, port.data_width)])
            pins = platform.request(f"port{index}")
            self.comb += [
                port.cmd.valid.eq(pins.cmd_valid & ready), pins.cmd_ready.eq(port.cmd.ready & ready),
                port.cmd.we.eq(pins.cmd_we), port.cmd.addr.eq(pins.cmd_addr),
                port.wdata.valid.eq(pins.wdata_valid & ready), pins.wdata_ready.eq(port.wdata.ready & ready),
                port.wdata.we.eq(pins.wdata_we), port.wdata.data.eq(pins.wdata_data),
                pins.rdata_valid.eq(port.rdata.valid), port.rdata.ready.eq(pins.rdata_ready),
                pins.rdata_data.eq(port.rdata.data),
            ]

        bus, played, asked = (csr_bus.Interface(data_width=CSR_BITS, address_width=CSR_ADDRESS_BITS)
                              for _ in range(3))
        self.csr_banks = csr_bus.CSRBankArray(self, lambda name, memory: BANKS.get(name),
                                              data_width=CSR_BITS, address_width=CSR_ADDRESS_BITS)
        self.csr_interconnect = csr_bus.Interconnect(bus, self.csr_banks.get_buses())
        address = csr_addresses(self.csr_banks)
        words = -(-settings.dfi_databits // CSR_BITS)
        check_host_view(settings, module.timing_settings, address, words)
        self.init = InitSequencer(played, init_program(settings, module.timing_settings, address))
        # The host's port (read levelling), where the host may need it: not on the
        # Colorlight's SDR chips, whose reads need none and whose LUTs are all spoken for.
        host_port = phy == "model" or settings.read_leveling
        if host_port:
            # The bus is the init sequence's until it is done, then the host's.
            self.port = CsrPort(asked, self.init.done)
            platform.add_extension([csr_port_pins()])
            pins = platform.request("csr")
            for name, member in DramCsrBus().members.items():
                ours, theirs = getattr(self.port, name), getattr(pins, name)
                self.comb += ours.eq(theirs) if member.flow == Out else theirs.eq(ours)
            self.comb += [asked.dat_r.eq(bus.dat_r), If(self.init.done, *drive(bus, asked)).Else(*drive(bus, played))]
        else:
            self.comb += drive(bus, played)
        # The user ports open when the controller has the DRAM (the init sequence has
        # handed it over, or the host has after levelling), in the ports' own domain.
        done_meta = Signal()
        controller = self.init.done & self.sdram.dfii._control.fields.sel
        self.sync.engine += [done_meta.eq(controller), ready.eq(done_meta)]
        self.comb += platform.request("init_done").eq(ready)
        self.counters = CommandCounters(self.ddrphy.dfi)
        self.comb += [platform.request(f"commands_{kind}").eq(count) for kind, count in self.counters.counts.items()]
        timing = module.timing_settings
        self.description = {"chip": chip.module, "bytes": chip.bytes, "clock_hz": clock_hz,
                            "address_bits": port.address_width, "data_bits": port.data_width,
                            # Controller cycles: a read or write's burst, a refresh, and
                            # closing and opening a row.
                            "t_ccd": timing.tCCD, "t_rfc": timing.tRFC, "t_rp": timing.tRP, "t_rcd": timing.tRCD,
                            # What the host needs to reach the injector and level reads
                            # (DRAM_PHY; with no host port, 0).
                            "phy": DRAM_PHY_WORD.pack(
                                levelling=int(settings.read_leveling), phases=settings.nphases, words=words,
                                rdphase=settings.rdphase, wrphase=settings.wrphase,
                                modules=settings.databits // 8, bitslips=getattr(settings, "bitslips", 0),
                                delays=getattr(settings, "delays", 0)) if host_port else 0}

    def _ecp5_ddr3_phy(self, platform, chip: Chip, module) -> ECP5DDRPHY:
        """ECP5DDRPHY on the chip's pins, its clocks from LiteDRAM's CRG for it."""
        board = chip.board_phy
        platform.add_extension([board_pads(board.prefix, board.pads, module, chip.data_bits),
                                ("clk", 0, Pins(1)), ("rst", 0, Pins(1)), ("pll_locked", 0, Pins(1))])
        self.crg = LiteDRAMECP5DDRPHYCRG(platform, {"memtype": chip.memtype, "input_clk_freq": chip.oscillator_hz,
                                                   "sys_clk_freq": chip.clock_hz, "init_clk_freq": INIT_CLOCK_HZ})
        phy = ECP5DDRPHY(platform.request(board.prefix), sys_clk_freq=chip.clock_hz)
        self.comb += [self.crg.stop.eq(phy.init.stop), self.crg.reset.eq(phy.init.reset)]
        return phy


def generate(chip: str, output: Path, phy: str = "model") -> dict:
    """Writes the core's Verilog to ``output`` (module ``litedram_core``) and its
    description (port widths, size) beside it as JSON, the same text every time
    (hw/litex_core.py)."""
    run_generator(__name__, ["--chip", chip, "--phy", phy, "--output", str(output)])
    return json.loads(output.with_suffix(".json").read_text())


def write_core(chip: Chip, output: Path, phy: str) -> Path:
    platform = LatticePlatform(DEVICE, COMMON_PINS, toolchain="trellis")
    core = LiteDramSoc(platform, chip, phy)
    data_files = write_verilog(platform, core, "litedram_core", output)
    assert not data_files, "the core must be one self-contained file"  # the testbenches compile the .v alone
    write_if_changed(output.with_suffix(".json"), json.dumps(core.description, indent=1) + "\n")
    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chip", choices=sorted(CHIPS), required=True, help="the board whose DRAM it drives")
    parser.add_argument("--phy", choices=PHYS, default="model",
                        help="LiteDRAM's model of the chip, for Verilator (default), or the board's PHY")
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    print(write_core(CHIPS[args.chip], args.output, args.phy))
    return 0


if __name__ == "__main__":
    sys.exit(main())
