"""The sans-IO NETBLT connection: events and time in, actions out.

No sockets, threads or clocks: every method takes ``now`` (seconds, any epoch) and
returns the actions to carry out. ``deadline`` says when to call :meth:`handle_timeout`.
One object serves both ends (active/passive) and both roles (data sender/receiver);
the roles live in :mod:`.sender` and :mod:`.receiver` and see only a :class:`.role.Context`.

The peer is the address the active end opened to, or the source of the OPEN the
passive end accepted; packets from anyone else change nothing (an OPEN is refused).
"""

from __future__ import annotations

import enum
import random
from dataclasses import replace
from typing import TypeVar

from . import events as ev
from .packets import Abort, Data, KeepAlive, Open, Packet, Quit, QuitAck, Refused, Response
from .params import ParamError, Params, Timing
from .receiver import Receiver
from .role import Role, TransferStats
from .sender import Sender
from .timers import Timers

SetupKind = TypeVar("SetupKind", Open, Response)
"""An OPEN or a RESPONSE: they share one layout."""

BUSY = "busy with another transfer; try again when it ends"
HELD = "still holding this port pair's last connection"
"""Begins the REFUSED a passive end gives a new OPEN from its peer's own address and port
while the old connection may be alive; the active end keeps trying (reading A21)."""


class State(enum.Enum):
    LISTEN = "listen"
    ADMITTING = "admitting"
    """An acceptable OPEN waits for the client's :meth:`Connection.admit` or refuse."""
    OPEN_SENT = "open-sent"
    ESTABLISHED = "established"
    QUIT_SENT = "quit-sent"
    QUIT_RECEIVED = "quit-received"
    CLOSED = "closed"


class Connection:
    """One NETBLT connection.

    ``sender`` says whether this end sends the data; an active data sender opens in
    WRITE mode, an active data receiver in READ mode. A data sender gives
    ``transfer_size``, the bytes its client will supply (None for a stream whose end
    its client will report with :class:`~.events.LastBuffer`); it also goes in
    OPEN/RESPONSE for the peer's client. ``peer`` is where an active end opens to.
    """

    def __init__(self, *, active: bool, sender: bool, params: Params, timing: Timing = Timing(),
                 transfer_size: int | None = 0, client_string: bytes = b"",
                 uid: int | None = None, peer: ev.Address = None) -> None:
        self.active, self.is_sender = active, sender
        self.peer = peer
        self.local = params
        """What this end proposes (active) or accepts at most (passive)."""
        self.params = params
        """The negotiated values once established."""
        self.timing = timing
        self.transfer_size = transfer_size
        self.client_string = client_string
        self.uid = uid if uid is not None else random.getrandbits(32)
        self.state = State.OPEN_SENT if active else State.LISTEN
        self.timers = Timers()
        self.role: Role | None = None
        self.stats = TransferStats()
        self.setup: Open | Response | None = None
        """The OPEN we sent (active) or the RESPONSE we sent (passive)."""
        self.peer_death = 0
        self.open_tries = 0
        self.open_until = 0.0
        """When an active end stops retrying OPEN: its death timer after the first."""
        self.quit_reason = ""
        self.heard_at: float | None = None
        """When the peer was last heard from (once the connection is open)."""
        self.strangers = 0
        """Packets from addresses other than the peer's, refused or ignored."""
        self.replaced_by: ev.PacketReceived | None = None
        """The OPEN of a new connection on this port pair, from a peer that went quiet (it
        restarted): this one ended for it, and a new listener should take it at once."""
        self.held_by: str | None = None
        """An active end's: why the peer does not answer yet (the REFUSED that says it holds
        this port pair's last connection, and for how long at most)."""
        self.finished = False
        self.result: ev.Finished | None = None
        self._admitting: tuple[Open, Params] | None = None
        self._out: list[ev.Action] = []

    # -- the sans-IO surface ---------------------------------------------------------------

    @property
    def deadline(self) -> float | None:
        return None if self.finished else self.timers.next

    def connect(self, now: float) -> list[ev.Action]:
        """Active end: send OPEN and start the open timer."""
        self.setup = self._proposal(Open, self.uid, self.local)
        self.open_tries, self.open_until = 0, now + self.local.death_timer
        self._send_open(now)
        return self._drain()

    def handle(self, event: ev.Event, now: float) -> list[ev.Action]:
        if self.finished:
            return []
        if isinstance(event, ev.PacketReceived):
            self._packet(event.packet, event.source, now)
        elif isinstance(event, ev.PeerUnreachable):
            # Once a QUIT has passed either way, a closed peer is the quit's outcome.
            self.finish(False, self._quit_outcome() or self._unreachable(event.detail))
        else:
            if isinstance(event, ev.Arrivals):
                self._alive(event.last_at)
            if self.role is not None:
                self.role.on_event(event, now)
        self._after(now)
        return self._drain()

    def handle_timeout(self, now: float) -> list[ev.Action]:
        for key in self.timers.pop_expired(now):
            if self.finished:
                break
            self._timer(key, now)
        self._after(now)
        return self._drain()

    def quit(self, reason: str, now: float) -> list[ev.Action]:
        """The client gives up: send QUIT until QUITACK or the death timer (section 5.3.2)."""
        if self.state is State.ESTABLISHED:
            self.state, self.quit_reason = State.QUIT_SENT, reason
            self.timers.keep_only("death", "keepalive")
            self._send_quit(now)
        elif not self.finished:
            self.finish(False, reason)
        return self._drain()

    def abort(self, reason: str, now: float) -> list[ev.Action]:
        """Send ABORT and close at once (section 5.3.3)."""
        self.fail(reason, now)
        return self._drain()

    def admit(self, now: float, *, held: frozenset[int] = frozenset(), last: int | None = None,
              client_string: bytes | None = None) -> list[ev.Action]:
        """The client accepts the OPEN of :class:`~.events.Admit`: answer with RESPONSE.

        A data receiver's client may already hold some buffers (``held``, a resumed
        transfer: they get an OK instead of a GO) and know the ``last`` buffer's number.
        ``client_string`` replaces this end's for the RESPONSE.
        """
        assert self._admitting is not None, "admit() answers an Admit action"
        packet, final = self._admitting
        self._admitting = None
        self.params, self.uid, self.peer_death = final, packet.uid, packet.death_timer
        self._learn_size(packet)
        if client_string is not None:
            self.client_string = client_string
        self.setup = self._proposal(Response, packet.uid, final)
        self.transmit(self.setup, now)
        self._establish(packet.client_string, now, held=held, last=last)
        self._after(now)
        return self._drain()

    def refuse(self, reason: str, now: float) -> list[ev.Action]:
        """The client turns the OPEN of :class:`~.events.Admit` down: REFUSED, and listen on."""
        self._admitting = None
        self._send_to(Refused(reason), self.peer)
        self.state, self.peer = State.LISTEN, None
        return self._drain()

    # -- helpers the roles use -------------------------------------------------------------

    def emit(self, action: ev.Action) -> None:
        self._out.append(action)

    def transmit(self, packet: Packet, now: float) -> None:
        self._send_to(packet, self.peer)
        if self.peer_death:
            self.timers.set("keepalive", now + self.peer_death / 4)

    def _send_to(self, packet: Packet, to: ev.Address) -> None:
        self._out.append(ev.Transmit(packet, to))

    def fail(self, reason: str, now: float) -> None:
        """Abort from inside the protocol core: tell the peer, then close."""
        if not self.finished:
            if self.state not in (State.LISTEN, State.ADMITTING):
                self.transmit(Abort(reason), now)
            self.finish(False, reason)

    def finish(self, ok: bool, reason: str) -> None:
        if not self.finished:
            self.finished, self.state = True, State.CLOSED
            self.result = ev.Finished(ok, reason)
            self._out.append(self.result)

    # -- setup -----------------------------------------------------------------------------

    @property
    def _sent_setup(self) -> Open | Response:
        """The OPEN or RESPONSE this end sent: there is one in every state that asks for it."""
        assert self.setup is not None
        return self.setup

    def _proposal(self, kind: type[SetupKind], uid: int, p: Params) -> SetupKind:
        """This end's OPEN or RESPONSE (``kind``): ``p``'s values (its own, or the ones
        settled), always with its own death timer."""
        size = self.transfer_size or 0
        return kind(uid=uid, buffer_size=p.buffer_size, packet_size=p.packet_size, burst_size=p.burst_size,
                    burst_interval=p.burst_interval, death_timer=self.local.death_timer,
                    max_buffers=p.max_buffers, data_checksum=p.data_checksum,
                    write_mode=self.is_sender if self.active else not self.is_sender,
                    transfer_size=size if size < 1 << 32 else 0,  # 0: unknown (reading A18)
                    client_string=self.client_string)

    def _send_open(self, now: float) -> None:
        # Doubling up to the longest control interval, for as long as the death timer: a
        # path whose round trip is longer than the first few intervals still opens. No gap
        # is longer than a quarter of the death timer, so its end is tried too: a peer that
        # holds its port for a host it still waits for lets us in part-way through.
        self.transmit(self._sent_setup, now)
        wait = min(self.timing.open_timeout * 2 ** self.open_tries, self.timing.control_max,
                   self.local.death_timer / 4)
        self.timers.set("open", min(now + wait, self.open_until))
        self.open_tries += 1

    def _packet(self, packet: Packet, source: ev.Address, now: float) -> None:
        if self.state is State.LISTEN:
            # Nobody is the peer yet: only an OPEN means anything (an ABORT cannot end a listener).
            if isinstance(packet, Open):
                self._accept(packet, source)
            else:
                self.strangers += 1
            return
        if source != self.peer:
            self._stranger(packet, source)
            return
        if isinstance(packet, Open) and self._another_connection(packet, now):
            return  # a new connection's OPEN is no sign that this one lives
        self._alive(now)
        if isinstance(packet, Abort):
            self.finish(False, f"aborted by peer: {packet.reason or 'no reason given'}")
        elif isinstance(packet, (Open, Response)):
            self._setup_packet(packet, now)
        elif isinstance(packet, Refused):
            if self.state is State.OPEN_SENT and packet.reason.startswith(HELD):
                self.held_by = packet.reason  # the open timer keeps trying until it lets go
            elif self.state is State.OPEN_SENT:
                self.finish(False, f"refused by peer: {packet.reason or 'no reason given'}")
        elif isinstance(packet, Quit):
            self._quit_received(packet, now)
        elif isinstance(packet, QuitAck):
            if self.state is State.QUIT_SENT:
                self._quit_done()
        elif isinstance(packet, Data):
            pass  # DATA is the data path's; it never reaches the protocol core
        elif self.state is State.ESTABLISHED and self.role is not None:
            self.role.on_packet(packet, now)

    def _stranger(self, packet: Packet, source: ev.Address) -> None:
        """A packet from someone other than the peer: an OPEN is told we are busy."""
        self.strangers += 1
        if isinstance(packet, Open):
            self._send_to(Refused(BUSY), source)

    def _another_connection(self, packet: Open, now: float) -> bool:
        """An OPEN of another UID from the peer's own address and port: that end restarted
        (one port can hold one connection), or it is a late copy of an old OPEN. A peer
        that has been quiet for two of its keepalive intervals (half the death timer) is
        gone: this connection ends so that a new one can take the port pair (reading A21);
        until then the OPEN is told how long, and this connection goes on."""
        if self.state in (State.OPEN_SENT, State.ADMITTING) or packet.uid == self._sent_setup.uid:
            return False
        quiet, limit = now - (self.heard_at or now), self.params.death_timer / 2
        if quiet >= limit:
            self.replaced_by = ev.PacketReceived(packet, self.peer)
            self.finish(False, f"replaced: its peer opened connection {packet.uid:#010x} on the same port pair "
                               f"after {quiet:.0f} s of silence (it restarted)")
        else:
            self.transmit(Refused(f"{HELD} ({self._sent_setup.uid:#010x}, its peer heard {quiet:.0f} s ago); "
                                  f"a new one replaces it after {limit:.0f} s of silence"), now)
        return True

    def _setup_packet(self, packet: Open | Response, now: float) -> None:
        if self.state is State.OPEN_SENT and isinstance(packet, Response):
            if packet.uid == self.uid:
                self._answered(packet, now)
        elif self.state is State.ADMITTING:
            pass  # the same OPEN again, while its client decides
        elif packet.uid == self._sent_setup.uid:
            if isinstance(packet, Open) and not self.active:
                self.transmit(self._sent_setup, now)  # our RESPONSE was lost: say it again
        elif self.state is not State.OPEN_SENT:
            # Only one connection per port pair: a different UID is a second attempt.
            self.transmit(Abort(f"connection {self._sent_setup.uid:#010x} is already open on this port pair"), now)

    def _accept(self, packet: Open, source: ev.Address) -> None:
        wants_write = not self.is_sender
        if packet.write_mode != wants_write:
            mode = "send" if packet.write_mode else "receive"
            self._send_to(Refused(f"this end does not {'receive' if mode == 'send' else 'send'} data; "
                                  f"cannot {mode}"), source)
            return
        try:
            final = self.local.restrict(Params.from_setup(packet))
        except ParamError as exc:
            self._send_to(Refused(f"unusable parameters: {exc}"), source)
            return
        self.state, self.peer, self._admitting = State.ADMITTING, source, (packet, final)
        self.emit(ev.Admit(packet.client_string, final, source, packet.uid, packet.transfer_size or None))

    def _answered(self, packet: Response, now: float) -> None:
        self.timers.cancel("open")
        try:
            final = Params.from_setup(packet)
        except ParamError as exc:
            self.fail(f"unusable parameters in RESPONSE: {exc}", now)
            return
        why = final.widens(self.local) or (
            "the transfer mode changed" if packet.write_mode != self._sent_setup.write_mode else None)
        if why:
            self.fail(f"RESPONSE is not a valid answer: {why}", now)
            return
        self.params = replace(final, death_timer=self.local.death_timer, auto_rate=self.local.auto_rate)
        self.peer_death = packet.death_timer
        self._learn_size(packet)
        self._establish(packet.client_string, now)

    def _learn_size(self, packet: Open | Response) -> None:
        """A data receiver takes the transfer's size from the sender's set-up packet (0: unknown)."""
        if not self.is_sender:
            self.transfer_size = packet.transfer_size or None

    def _establish(self, peer_client_string: bytes, now: float, *, held: frozenset[int] = frozenset(),
                   last: int | None = None) -> None:
        self.state = State.ESTABLISHED
        self.emit(ev.Established(self.params, peer_client_string, self.peer, self.transfer_size))
        self._alive(now)
        self.timers.set("keepalive", now + self.peer_death / 4)
        self.role = Sender(self) if self.is_sender else Receiver(self, held=held, last=last)
        self.role.start(now)

    # -- liveness, QUIT --------------------------------------------------------------------

    def _alive(self, at: float) -> None:
        if self.state not in (State.LISTEN, State.ADMITTING, State.OPEN_SENT, State.CLOSED):
            self.heard_at = at
            self.timers.set("death", at + self.params.death_timer)

    def _quit_received(self, packet: Quit, now: float) -> None:
        if self.state in (State.LISTEN, State.ADMITTING, State.OPEN_SENT):
            return
        self.transmit(QuitAck(), now)
        if self.state is not State.QUIT_RECEIVED:
            self.state, self.quit_reason = State.QUIT_RECEIVED, packet.reason
            self.timers.keep_only("death")
        # Dally so a lost QUITACK can be answered again (reading A23).
        answer = self.role.answer_time() if self.role is not None else 0.0
        self.timers.set("quit-dally", now + max(2 * answer, 4 * self.timing.quit_timeout))

    def _quit_done(self) -> None:
        """The QUIT exchange in progress is over: the connection ends with its outcome."""
        outcome = self._quit_outcome()
        assert outcome is not None  # called only while one is in progress
        self.finish(False, outcome)

    def _quit_outcome(self) -> str | None:
        """How a QUIT in progress ends the connection, or None if there is none."""
        if self.state is State.QUIT_SENT:
            return f"quit: {self.quit_reason}"
        if self.state is State.QUIT_RECEIVED:
            return f"peer quit: {self.quit_reason or 'no reason given'}"
        return None

    def _unreachable(self, detail: str) -> str:
        if self.state is State.OPEN_SENT:
            return f"peer unreachable: nothing is listening there ({detail})"
        return f"peer unreachable mid-transfer ({detail}): the peer's program stopped"

    def _send_quit(self, now: float) -> None:
        self.transmit(Quit(self.quit_reason), now)
        self.timers.set("quit", now + self.timing.quit_timeout)

    def _timer(self, key: object, now: float) -> None:
        if key == "open":
            if now >= self.open_until:
                self.finish(False, f"no answer to OPEN in {self.local.death_timer} s ({self.open_tries} tries)")
            else:
                self._send_open(now)
        elif key == "death":
            if self.role is not None and self.role.complete():
                # Every byte is where it belongs; only the end of the exchange is missing
                # (the acknowledgement of the last OK, or a DONE).
                self.finish(True, "transfer complete (the peer then went quiet)")
            else:
                self.finish(False, f"death timer expired: nothing heard from the peer for "
                                   f"{self.params.death_timer} s")
        elif key == "keepalive":
            if self.role is not None and self.role.sending_data():
                self.timers.set("keepalive", now + self.peer_death / 4)
            else:
                self.transmit(KeepAlive(), now)
        elif key == "quit":
            self._send_quit(now)
        elif key == "quit-dally":
            self._quit_done()
        elif self.role is not None:
            self.role.on_timer(key, now)

    def _after(self, now: float) -> None:
        if self.state is State.ESTABLISHED and not self.finished and self.role is not None:
            self.role.after(now)

    def _drain(self) -> list[ev.Action]:
        out, self._out = self._out, []
        return out

