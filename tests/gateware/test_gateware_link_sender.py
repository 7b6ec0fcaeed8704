from amaranth.hdl import Module
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out
from launch import cocotb_test

from netblt.formats.host_link import LINK_PORT
from netblt.gateware.link_sender import SEND_COMMAND, STORE_ADDRESS_WIDTH, STORE_WORDS, LinkSender
from netblt.gateware.streams import ip_stream

from link_intake_tb import BOARD_INT


class SenderWithStore(wiring.Component):
    """The sender with the store memory behind it, its write port brought out for the test."""

    def __init__(self) -> None:
        super().__init__({
            "command": In(stream.Signature(SEND_COMMAND)),
            "write": Out(memory.WritePort.Signature(addr_width=STORE_ADDRESS_WIDTH, shape=32)),
            "body": In(stream.Signature(32)),
            "out": Out(ip_stream(32)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.store = store = memory.Memory(shape=32, depth=STORE_WORDS, init=[])
        m.submodules.sender = sender = LinkSender(BOARD_INT, LINK_PORT)
        write = store.write_port()
        m.d.comb += [write.addr.eq(self.write.addr), write.data.eq(self.write.data), write.en.eq(self.write.en)]
        wiring.connect(m, wiring.flipped(self.command), sender.command)
        wiring.connect(m, wiring.flipped(self.body), sender.body)
        wiring.connect(m, sender.out, wiring.flipped(self.out))
        wiring.connect(m, store.read_port(), sender.store)
        return m


test_link_sender = cocotb_test(lambda config: SenderWithStore(), "link_sender", "link_sender_tb")
