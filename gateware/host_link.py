"""The host link (docs/host-link.md) between LiteEth and the engine.

Its datagrams come out of the engine's receive stream (link_intake.py), are executed on
the engine's register bus (link_executor.py), and their replies and the event pushes go
out (link_sender.py) at the engine's next packet boundary, never cutting into a packet.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from ..formats.host_link import LINK_PORT
from .link_executor import DOWNLOAD_QUEUE, BoardIdentity, LinkExecutor
from .link_intake import LinkIntake
from .link_sender import STORE_WORDS, LinkSender
from .receive_store import READ_AHEAD
from .register_bus import RegisterBus
from .streams import ip_stream
from .transmit_path import UPLOAD_ROOM

INTAKE_WORDS = 4096
"""Words of requests waiting: one 9000-byte jumbo upload and more, or eleven 1500-byte
ones. (The Colorlight's build has room for 2048 only: no jumbo frames there.)"""


class HostLink(wiring.Component):
    """``net_rx``/``net_tx`` face LiteEth; ``engine_rx``/``engine_tx`` face the engine.
    ``download_queue``: the executor's words of DOWNLOAD data (link_executor.py)."""

    def __init__(self, identity: BoardIdentity, port: int = LINK_PORT, intake_words: int = INTAKE_WORDS,
                 download_queue: int = DOWNLOAD_QUEUE) -> None:
        if not 0 < port < 1 << 16:
            raise ValueError(f"host link port {port} is not a UDP port")
        self.identity, self.port, self.intake_words = identity, port, intake_words
        self.download_queue = download_queue
        super().__init__({
            "net_rx": In(ip_stream(32)),
            "engine_rx": Out(ip_stream(32)),
            "engine_tx": In(ip_stream(32)),
            "net_tx": Out(ip_stream(32)),
            "bus": Out(RegisterBus()),
            "events_waiting": In(1),
            "control_next": In(16),
            "download_level": In(range(READ_AHEAD + 1)),
            "upload_room": In(range(UPLOAD_ROOM + 1)),
            "link_up": In(1),
            "netmask": Out(32),
            "gateway": Out(32),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        address = self.identity.ip_address
        m.submodules.intake = intake = LinkIntake(address, self.port, self.intake_words)
        m.submodules.executor = executor = LinkExecutor(self.identity, self.download_queue)
        m.submodules.sender = sender = LinkSender(address, self.port)
        m.submodules.store = store = memory.Memory(shape=32, depth=STORE_WORDS, init=[])
        wiring.connect(m, wiring.flipped(self.net_rx), intake.net_rx)
        wiring.connect(m, intake.engine_rx, wiring.flipped(self.engine_rx))
        wiring.connect(m, intake.payload, executor.payload)
        wiring.connect(m, intake.meta, executor.meta)
        wiring.connect(m, executor.bus, wiring.flipped(self.bus))
        wiring.connect(m, store.write_port(), executor.store)
        wiring.connect(m, store.read_port(), sender.store)
        wiring.connect(m, executor.send, sender.command)
        wiring.connect(m, executor.body, sender.body)
        m.d.comb += [executor.sender_busy.eq(sender.busy), executor.sender_start.eq(sender.start),
                     executor.events_waiting.eq(self.events_waiting),
                     executor.control_next.eq(self.control_next),
                     executor.download_level.eq(self.download_level), executor.upload_room.eq(self.upload_room),
                     executor.dropped.eq(intake.dropped), executor.link_up.eq(self.link_up),
                     self.netmask.eq(executor.netmask), self.gateway.eq(executor.gateway)]

        # Out: at each packet boundary a link datagram first, else the engine's packet; each
        # keeps the port until its last beat (a DOWNLOAD's body may pause on the way).
        FREE, LINK, ENGINE = range(3)
        owner = Signal(range(3))
        pick = Signal(range(3))
        m.d.comb += pick.eq(owner)
        with m.If(owner == FREE):
            m.d.comb += pick.eq(Mux(sender.out.valid, LINK, ENGINE))
        for who, source in ((LINK, sender.out), (ENGINE, self.engine_tx)):
            with m.If(pick == who):
                m.d.comb += [self.net_tx.payload.eq(source.payload), self.net_tx.valid.eq(source.valid),
                             source.ready.eq(self.net_tx.ready)]
                with m.If(source.valid & source.ready):
                    m.d.sync += owner.eq(Mux(source.payload.last, FREE, who))
        return m
