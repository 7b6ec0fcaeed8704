"""Copies between block-RAM staging and DRAM, a run of DRAM words at a time.

Slots in DRAM keep block RAM as the staging buffer between the network streams (a word
a cycle, any order of packets) and DRAM (long bursts, latency): each copy moves one run,
a packet or an upload, over LiteDRAM's native port.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .headers import fold, halfwords, lanes


class NativePort(wiring.Signature):
    """LiteDRAM's native user port, seen from its user: commands and write data out,
    read data in, each a stream. Addresses count the port's words.

    One rule is LiteDRAM's, not a stream's: the controller takes a write's data in the
    cycle it issues the write, ``wdata.valid`` or not. Every port here crosses clock
    domains through LiteDRAM's FIFOs, so a user has the port take a write's data before
    it offers the write's command: the data then crosses first."""

    def __init__(self, address_bits: int, data_bits: int) -> None:
        self.address_bits, self.data_bits = address_bits, data_bits
        self.command = data.StructLayout({"we": 1, "addr": address_bits})
        self.write = data.StructLayout({"data": data_bits, "we": data_bits // 8})
        super().__init__({
            "cmd": Out(stream.Signature(self.command)),
            "wdata": Out(stream.Signature(self.write)),
            "rdata": In(stream.Signature(data_bits)),
        })


def copy_layout(staging_bits: int, address_bits: int, length_bits: int, mask_bits: int) -> data.StructLayout:
    """``to_dram``: staging to DRAM, else DRAM to staging; addresses and ``words`` in DRAM
    words. A write's first and last words go with byte masks (the one word of a one-word
    run, with both), so a run need not fill the DRAM words at its ends."""
    return data.StructLayout({"to_dram": 1, "staging": staging_bits, "dram": address_bits, "words": length_bits,
                              "first_mask": mask_bits, "last_mask": mask_bits})


class DramDma(wiring.Component):
    """Runs one copy at a time; ``done`` pulses when a write's last command has been
    taken (a later read of the same port queues behind it in its bank) or a read's last
    word is in staging and its bytes are summed.

    A read also sums the bytes it stores, under its masks, as 16-bit words in wire order:
    ``read_sum``, the ones'-complement sum folded to 16 bits, holds from the cycle of a
    read's ``done`` until the next copy is taken. A packet fetched from DRAM for sending
    so has its data checksum without a second pass over it, and no table of sums."""

    READ_AHEAD = 4
    """Staging words read ahead of the DRAM's writes, so a write's data waits at the port."""

    def __init__(self, port: NativePort, staging_depth: int, length_bits: int = 12) -> None:
        self.port = port
        staging_bits = (staging_depth - 1).bit_length()
        super().__init__({
            "copy": In(stream.Signature(copy_layout(staging_bits, port.address_bits, length_bits,
                                                    port.data_bits // 8))),
            "done": Out(1),
            "read_sum": Out(16),
            "dram": Out(port),
            # The staging memory's own port shapes, flipped: this block drives them.
            "staging_read": In(memory.ReadPort.Signature(addr_width=staging_bits, shape=port.data_bits)),
            "staging_write": In(memory.WritePort.Signature(addr_width=staging_bits, shape=port.data_bits)),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        copy = self.copy.payload
        job = Signal.like(copy)
        commands = Signal.like(copy.words)  # commands issued
        fetched = Signal.like(copy.words)  # staging words read into the queue
        finished = Signal.like(copy.words)  # write data taken, or read data stored
        m.submodules.queue = queue = fifo.SyncFIFOBuffered(width=self.port.data_bits, depth=self.READ_AHEAD)

        cmd, wdata, rdata = self.dram.cmd, self.dram.wdata, self.dram.rdata
        mask = Signal.like(copy.first_mask)  # the bytes of the run in the word moving now
        m.d.comb += [mask.eq(Mux(finished == 0, job.first_mask, -1) & Mux(finished == job.words - 1, job.last_mask, -1)),
                     cmd.payload.we.eq(job.to_dram), cmd.payload.addr.eq(job.dram + commands),
                     wdata.payload.data.eq(queue.r_data), wdata.payload.we.eq(mask),
                     wdata.valid.eq(queue.r_rdy), queue.r_en.eq(wdata.ready)]
        # A read's sum, in two registered steps (a word's halfwords added, then added to
        # the total), so the adders stay out of the port's paths.
        word_sum, summing, total = Signal(range(0xFFFF * len(mask) // 2 + 1)), Signal(), Signal(32)
        masked = [Mux(mask[i], byte, 0) for i, byte in enumerate(lanes(rdata.payload, len(mask)))]
        m.d.sync += [word_sum.eq(sum(halfwords(masked))), summing.eq(rdata.valid & rdata.ready)]
        with m.If(summing):
            m.d.sync += total.eq(total + word_sum)
        m.d.comb += self.read_sum.eq(fold(total))

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.copy.ready.eq(1)
                with m.If(self.copy.valid):
                    m.d.sync += [job.eq(copy), commands.eq(0), fetched.eq(0), finished.eq(0), total.eq(0)]
                    m.next = "START"
            with m.State("START"):
                with m.If(job.words == 0):
                    m.d.comb += self.done.eq(1)
                    m.next = "IDLE"
                with m.Elif(job.to_dram):
                    m.next = "TO_DRAM"
                with m.Else():
                    m.next = "FROM_DRAM"
            with m.State("TO_DRAM"):
                # Staging words stream through the queue into the port; a write command
                # goes only for a word the port has taken, so its data crosses into the
                # controller's domain ahead of it and the controller always finds it.
                reading = Signal()
                m.d.comb += self.staging_read.addr.eq(job.staging + fetched)
                space = queue.level + reading < self.READ_AHEAD
                with m.If((fetched < job.words) & space):
                    m.d.sync += fetched.eq(fetched + 1)
                    m.d.comb += self.staging_read.en.eq(1)
                m.d.sync += reading.eq((fetched < job.words) & space)
                m.d.comb += [queue.w_data.eq(self.staging_read.data), queue.w_en.eq(reading)]
                m.d.comb += cmd.valid.eq(commands < finished)
                with m.If(cmd.valid & cmd.ready):
                    m.d.sync += commands.eq(commands + 1)
                with m.If(wdata.valid & wdata.ready):
                    m.d.sync += finished.eq(finished + 1)
                with m.If((commands == job.words) & (finished == job.words)):
                    m.d.comb += self.done.eq(1)
                    m.next = "IDLE"
            with m.State("FROM_DRAM"):
                m.d.comb += [cmd.valid.eq(commands < job.words), rdata.ready.eq(1),
                             self.staging_write.addr.eq(job.staging + finished),
                             self.staging_write.data.eq(rdata.payload), self.staging_write.en.eq(rdata.valid)]
                with m.If(cmd.valid & cmd.ready):
                    m.d.sync += commands.eq(commands + 1)
                with m.If(rdata.valid):
                    m.d.sync += finished.eq(finished + 1)
                    with m.If(finished + 1 == job.words):
                        m.next = "SUM_LAST"
            with m.State("SUM_LAST"):
                m.next = "SUMMED"  # the last word's halfwords are added this cycle
            with m.State("SUMMED"):
                m.d.comb += self.done.eq(1)  # and the total holds it now
                m.next = "IDLE"
        return m
