"""The engine's registers, commands, events and flag words, defined once as data.

gateware/control_status.py builds the register block from these tables, the host driver
addresses it by the same names, and docs/register-map.md is generated from them:
``python -m netblt.formats.registers > docs/register-map.md``.
"""

from __future__ import annotations

import enum
import sys
import zlib
from dataclasses import dataclass

from .drops import Drop
from .host_link import FormatError, words
from .layout import Word

ADDRESS_WIDTH = 8
"""Word addresses of the register block."""
DRAM_CSR_ADDRESS_BITS = 14
"""A LiteDRAM core's CSR word addresses (LiteX's usual width)."""


COMMAND_WORD = Word("COMMAND", (("op", 4), ("slot", 4), ("flag", 1)))
"""What a write to COMMAND carries; ARG0 and ARG1 are taken with it."""
EVENT_WORD = Word("EVENT", (("value", 16), ("flags", 7), ("slot", 4), ("kind", 4), ("valid", 1)))
"""An EVENT word; ``valid`` is 0 in the word read when no event waits."""
GEOMETRY_WORD = Word("GEOMETRY", (("data_width", 8), ("tx_slots", 5), ("rx_slots", 5),
                                   ("log2_max_packets", 5), ("fill", 1), ("check", 1), ("take", 1),
                                   ("sink", 1)))
"""What GEOMETRY reads: the engine's build-time sizes, whether FILL, TAKE and DRAIN have a
pattern source, a source port and a sink port to run on, and whether a pattern checker
watches the sink port (slot counts up to 16, which the 4-bit slot fields of COMMAND and
EVENT number 0 to 15)."""
ENGINE_STATE = Word("STATE", (("tx_idle", 1), ("draining", 1), ("slots_ready", 1)))
"""What STATE reads: the transmit side has sent everything; a DRAIN runs; the slots'
memory is ready (DRAM once its init sequence has run; block RAM always)."""
CONNECTION_FLAGS = Word("FLAGS", (("udp", 1), ("data_checksum", 1)))
"""The FLAGS register: NETBLT inside UDP (else IP protocol 30), data-area checksums negotiated."""
RECEIVED_FLAGS = Word("RECEIVED flags", (("first", 1), ("ldata", 1), ("complete", 1), ("last_buffer", 1)))
"""The ``flags`` of a RECEIVED event."""
DRAM_PHY_WORD = Word("DRAM_PHY", (("levelling", 1), ("phases", 3), ("words", 3), ("rdphase", 2), ("wrphase", 2),
                                  ("modules", 3), ("bitslips", 3), ("delays", 4)))
"""What DRAM_PHY reads: whether the DRAM's reads need levelling before the controller gets
it, and the PHY's shape: its phases, CSR words of a phase's data, the phases reads and
writes are issued on, byte lanes, bitslips and delay taps."""
DRAM_LEVELS_WORD = Word("DRAM_LEVELS", tuple((f"{field}{m}", width) for m in range(4)
                                             for field, width in (("delay", 4), ("bitslip", 3), ("levelled", 1))))
"""What the host leaves in DRAM_LEVELS after levelling: each byte lane's delay and bitslip."""


class PacingMode(enum.IntEnum):
    OFF = 0
    """Every packet may start at once: the link, not the engine, sets the rate."""
    BURSTS = 1
    """Up to ``burst_size`` packets at the start of each interval, back to back."""
    SMOOTH = 2
    """``burst_size`` starts spread evenly over each interval: no micro-bursts."""


BOARD_NAMES = {0: "simulation", 1: "colorlight_5a75b", 2: "versa_ecp5"}
"""What BOARD reads, by the names make bitstream takes (hw/boards.py)."""


@dataclass(frozen=True)
class Register:
    name: str
    access: str
    """rw: read/write; r: read only; w: write strobe; rp: read pops a FIFO."""
    width: int
    doc: str


def _group(title: str, *registers: Register) -> tuple[str, tuple[Register, ...]]:
    return title, registers


DROP_COUNTERS = {f"DROPPED_{d.name}": d for d in Drop}
"""The engine's counters of packets dropped, each by its reason."""

GROUPS = (
    _group(
        "Connection (transmit and receive)",
        Register("PACKET_SIZE", "rw", 16, "data bytes per DATA packet; a multiple of the beat width"),
        Register("LOCAL_PORT", "rw", 16, "this end's NETBLT port"),
        Register("PEER_PORT", "rw", 16, "the peer's NETBLT port"),
        Register("PEER_ADDRESS", "rw", 32, "the peer's IPv4 address"),
        Register("UDP_LOCAL_PORT", "rw", 16, "this end's UDP port in NETBLT-in-UDP mode"),
        Register("UDP_PEER_PORT", "rw", 16, "the peer's UDP port in NETBLT-in-UDP mode"),
        Register("FLAGS", "rw", 2, f"{CONNECTION_FLAGS.describe()} (data_checksum: data-area checksums "
                                   "negotiated; udp: NETBLT inside UDP, else on IP protocol 30)"),
        Register("HIGH_ACK", "rw", 16, "high-acknowledged sequence number stamped on sent DATA"),
        Register("PACING_MODE", "rw", 2, "; ".join(f"{m.value}: {m.name.lower()}" for m in PacingMode)),
        Register("BURST_SIZE", "rw", 16, "packets per burst interval"),
        Register("BURST_INTERVAL", "rw", 32, "burst interval in clock cycles"),
    ),
    _group(
        "Commands and events",
        Register("ARG0", "rw", 32, "first argument of the next command"),
        Register("ARG1", "rw", 32, "second argument of the next command"),
        Register("COMMAND", "w", 12, f"queue a command ({COMMAND_WORD.describe()}); "
                                     "ARG0/ARG1 are taken with it"),
        Register("COMMAND_LEVEL", "r", 16, "commands queued and not yet started"),
        Register("EVENT", "rp", 32, "pop the oldest event; 0 when there is none"),
        Register("EVENT_LEVEL", "r", 16, "events waiting"),
    ),
    _group(
        "Control packets",
        Register("CONTROL_LENGTH", "rp", 16, "pop the next received control packet: its length "
                                             "in bytes (0: none); latches CONTROL_FROM/PORT"),
        Register("CONTROL_FROM", "r", 32, "IPv4 source of the popped control packet"),
        Register("CONTROL_PORT", "r", 16, "UDP source port of the popped control packet"),
        Register("CONTROL_DATA", "rp", 32, "pop the next word of the popped control packet"),
        Register("SEND_DATA", "w", 32, "append a word to the control packet being written"),
        Register("SEND_LENGTH", "w", 16, "send the written control packet, this many bytes long"),
    ),
    _group(
        "Buffer memory",
        Register("UPLOAD_ADDRESS", "rw", 32, "transmit memory word address of the next upload"),
        Register("UPLOAD_DATA", "w", 32, "write a word to transmit memory and step the address "
                                         "(lost, and counted in COMMANDS_REJECTED, when UPLOAD_ROOM is 0)"),
        Register("UPLOAD_ROOM", "r", 5, "UPLOAD_DATA writes taken now: 16 with slots in block RAM, "
                                        "fewer while slots in DRAM catch up"),
        Register("DOWNLOAD_ADDRESS", "rw", 32, "receive memory word address of the next download"),
        Register("DOWNLOAD_DATA", "rp", 32, "read the next word of receive memory and step the address "
                                            "(0, not stepped, when DOWNLOAD_LEVEL is 0: counted in COMMANDS_REJECTED)"),
        Register("DOWNLOAD_LEVEL", "r", 3, "words ready at DOWNLOAD_DATA; 0 for a few cycles after "
                                           "DOWNLOAD_ADDRESS is written (longer with slots in DRAM)"),
    ),
    _group(
        "Receive slot status (of the slot in STATUS_SLOT)",
        Register("STATUS_SLOT", "rw", 4, "the receive slot the registers below describe"),
        Register("SLOT_BUFFER", "r", 32, "the buffer number posted to the slot"),
        Register("SLOT_STATE", "r", 3, "bit 0: posted; bit 1: LDATA seen; bit 2: complete"),
        Register("SLOT_RECEIVED", "r", 16, "packets received"),
        Register("SLOT_COUNT", "r", 16, "packets in the buffer, once LDATA fixed it"),
        Register("SLOT_FIRST_AT", "r", 32, "CYCLES when the first packet was accepted"),
        Register("SLOT_LAST_AT", "r", 32, "CYCLES when the latest packet was accepted"),
        Register("SLOT_MEAN_GAP", "r", 32, "running average of cycles between packets (weight 1/8)"),
        Register("RX_HIGH_ACK", "r", 16, "high-ack stamp of the newest DATA received"),
    ),
    _group(
        "Engine",
        Register("CYCLES", "r", 32, "free-running clock-cycle counter"),
        Register("STATE", "r", 3, f"{ENGINE_STATE.describe()} (slots_ready: the slots' memory is ready, "
                                   "block RAM at once, DRAM when its init sequence has run; draining: a DRAIN has the "
                                   "receive store's reader; tx_idle: the transmit side has sent everything)"),
        Register("CHECK_MISMATCHES", "r", 32, "beats of the last DRAIN that were not its buffer's test pattern "
                                              "(the pattern checker's count; 0 without one)"),
        Register("GEOMETRY", "r", 32, f"{GEOMETRY_WORD.describe()} (log2_max_packets: log2 of the packets "
                                      "a slot's bitmap tracks; fill, take, sink: FILL, TAKE, DRAIN run, "
                                      "else COMMANDS_REJECTED counts them; check: the pattern checker "
                                      "watches the sink port)"),
        Register("SLOT_BYTES", "r", 32, "bytes per buffer slot"),
        Register("CLOCK_HZ", "r", 32, "system clock frequency the pacer counts"),
        Register("STAMP_EVERY", "rw", 16, "the built-in stamp source offers the words 0, 1, 2 ... from this "
                                          "write on, one every STAMP_EVERY cycles, without waiting (0: none): "
                                          "what a board top feeds the source port with no user source"),
    ),
    _group(
        "DRAM registers, for levelling its reads (where the core has a port for the host; else read 0)",
        Register("DRAM_PHY", "r", DRAM_PHY_WORD.bits, f"{DRAM_PHY_WORD.describe()}: the PHY's shape; 0: no port"),
        Register("DRAM_CSR_ADDRESS", "rw", DRAM_CSR_ADDRESS_BITS, "the LiteDRAM core's CSR word the next "
                                                                  "DRAM_CSR_WRITE or DRAM_CSR_READ goes to"),
        Register("DRAM_CSR_WRITE", "w", 32, "write this value to it (once the core's init sequence has run)"),
        Register("DRAM_CSR_READ", "w", 1, "read it: DRAM_CSR_DATA has its value when DRAM_CSR_BUSY is 0"),
        Register("DRAM_CSR_DATA", "r", 32, "the value the last DRAM_CSR_READ read"),
        Register("DRAM_CSR_BUSY", "r", 1, "an access is crossing to the DRAM's clock and back; one started "
                                          "meanwhile is ignored and counted in COMMANDS_REJECTED"),
        Register("DRAM_LEVELS", "rw", 32, f"{DRAM_LEVELS_WORD.describe()}: where the host left each byte "
                                          "lane's read delay and bitslip, for board status"),
    ),
    _group(
        "Counters (32 bits, wrap; a write to COUNTERS_CLEAR zeroes them all)",
        Register("COUNTERS_CLEAR", "w", 1, "zero every counter"),
        Register("TX_PACKETS", "r", 32, "DATA/LDATA packets sent"),
        Register("TX_CONTROL", "r", 32, "control packets sent for the host"),
        Register("RX_ACCEPTED", "r", 32, "DATA/LDATA packets placed in a slot"),
        Register("RX_DUPLICATES", "r", 32, "DATA/LDATA packets already received, ignored"),
        Register("RX_CONTROL", "r", 32, "control packets queued for the host"),
        Register("COMMANDS_REJECTED", "r", 32, "commands with a bad opcode, slot, length or packet, and "
                                               "DOWNLOAD_DATA reads with no word ready"),
        Register("EVENTS_LOST", "r", 32, "events dropped because the event FIFO was full"),
        Register("SOURCE_TAKEN", "r", 32, "words the source port took into slots"),
        Register("SOURCE_REFUSED", "r", 32, "cycles the source port offered a word it could not take (no TAKE "
                                            "running, or the store busy): words lost, for a source that "
                                            "cannot wait"),
        Register("SOURCE_EARLY_ENDS", "r", 32, "words the source marked last that did not end a TAKE: its "
                                               "buffers and the host's do not line up"),
        *(Register(name, "r", 32, f"dropped: {d.doc}") for name, d in DROP_COUNTERS.items()),
    ),
)

ENGINE_REGISTERS = tuple(r for _, group in GROUPS for r in group)

LINK_BASE = 0x80
"""The host link's own registers start here; the engine's are below."""
LINK_GROUPS = (
    _group(
        "Host link (the board's side of docs/host-link.md)",
        Register("LINK_SESSION", "r", 32, "the open session's number; 0: none (after power-up or reset)"),
        Register("LINK_OWNER_ADDRESS", "r", 32, "the IPv4 address of the session's owner"),
        Register("LINK_OWNER_PORT", "r", 16, "the owner's UDP port"),
        Register("LINK_OWNER_SILENT", "r", 32, "milliseconds since the owner was last heard (saturates)"),
        Register("LINK_NEXT_ID", "r", 16, "the request ID the board expects next"),
        Register("LINK_PUSH_NUMBER", "r", 16, "the number of the latest event push"),
        Register("LINK_WINDOW", "r", 8, "replies kept for replay: requests a host may have in flight"),
        Register("PUSH_TIMEOUT", "rw", 32, "cycles before an unacknowledged event push is sent again"),
        Register("PUSH_HOLD", "rw", 32, "cycles events may wait for a control packet to join their push "
                                        "(0, as after power-up: none); a control packet waiting pushes at once"),
        Register("PUSH_LIMIT", "rw", 16, "words a push may hold, its header included: the host link's MTU "
                                         "over four, less the IP and UDP headers (368 at 1500 bytes, as after "
                                         "power-up); control packets join a push while they fit, the first "
                                         "whatever its size"),
        Register("TAKEOVER_AFTER", "rw", 32, "milliseconds an owner must have been silent before an "
                                             "OPEN with TAKE_OVER replaces it"),
        Register("REGISTER_MAP", "r", 32, "a checksum of this table's names and widths and its words' "
                                          "fields: a host built from other sources sees a different value"),
    ),
    _group(
        "The board (fixed when the bitstream is built, apart from NETMASK and GATEWAY)",
        Register("BOARD", "r", 8, "which board: " + ", ".join(f"{n} {name}" for n, name in BOARD_NAMES.items())),
        Register("IP_ADDRESS", "r", 32, "the board's IPv4 address"),
        Register("MAC_HIGH", "r", 16, "the board's MAC address, first two bytes"),
        Register("MAC_LOW", "r", 32, "the board's MAC address, last four bytes"),
        Register("NETMASK", "rw", 32, "the board's subnet: other destinations go through GATEWAY"),
        Register("GATEWAY", "rw", 32, "the router for destinations beyond the subnet"),
        Register("LINK_UP", "r", 1, "the PHY reports a link (always 1 in simulation)"),
    ),
    _group(
        "Host link counters (32 bits, wrap)",
        Register("LINK_EXECUTED", "r", 32, "requests executed"),
        Register("LINK_REPLAYED", "r", 32, "stored replies sent again (a RESEND, or a request repeated)"),
        Register("LINK_REFUSED", "r", 32, "requests and OPENs from a host that does not own the session"),
        Register("LINK_STALE", "r", 32, "requests naming another session, or an ID out of the window"),
        Register("LINK_DROPPED", "r", 32, "datagrams dropped: checksum, lengths, malformed, no room"),
        Register("LINK_PUSHES", "r", 32, "event pushes sent"),
        Register("LINK_PUSH_RETRIES", "r", 32, "event pushes sent again for want of an acknowledgement"),
    ),
)
LINK_REGISTERS = tuple(r for _, group in LINK_GROUPS for r in group)
REGISTERS = ENGINE_REGISTERS + LINK_REGISTERS
ADDRESS = {r.name: i for i, r in enumerate(ENGINE_REGISTERS)} | \
    {r.name: LINK_BASE + i for i, r in enumerate(LINK_REGISTERS)}
assert len(ENGINE_REGISTERS) <= LINK_BASE and LINK_BASE + len(LINK_REGISTERS) <= 1 << ADDRESS_WIDTH
WORDS = (COMMAND_WORD, EVENT_WORD, GEOMETRY_WORD, ENGINE_STATE, CONNECTION_FLAGS, RECEIVED_FLAGS, DRAM_PHY_WORD,
         DRAM_LEVELS_WORD)


def table_checksum(registers: tuple[Register, ...], words: tuple[Word, ...]) -> int:
    """Every register's name and width, and every word's fields: what host and board
    must agree on (a GEOMETRY read with other fields would be misread)."""
    return zlib.crc32(" ".join([*(f"{r.name}/{r.width}" for r in registers),
                                *(f"{w.name}:{w.describe()}" for w in words)]).encode())


REGISTER_MAP = table_checksum(REGISTERS, WORDS)
"""What REGISTER_MAP reads: host and board agree on the table when they agree on this."""


class Command(enum.IntEnum):
    """Opcodes of the COMMAND register."""

    SEND = 1
    RESEND = 2
    POST = 3
    RELEASE = 4
    QUERY_MISSING = 5
    FILL = 6
    DRAIN = 7
    TAKE = 8


COMMAND_DOCS = {
    Command.SEND: "transmit slot holds buffer ARG0, ARG1 bytes long; send it all "
                  "(flag: the transfer's last buffer)",
    Command.RESEND: "resend packet ARG0 of the buffer in transmit slot",
    Command.POST: "receive slot waits for buffer ARG0 (clears its bitmap)",
    Command.RELEASE: "receive slot is free again",
    Command.QUERY_MISSING: "list the receive slot's missing packets (below its LDATA count, "
                           "else below ARG0) as MISSING events, then MISSING_END",
    Command.FILL: "fill ARG1 bytes of transmit slot with buffer ARG0's test pattern, after the uploads "
                  "before it; the slot's SEND may follow at once (flag: no FILLED event, as the SEND's "
                  "SENT says it all)",
    Command.DRAIN: "offer ARG1 bytes of receive slot, as buffer ARG0, on the sink port, in order; the "
                   "pattern checker, where built, compares them with buffer ARG0's test pattern",
    Command.TAKE: "fill ARG1 bytes of transmit slot from the source port, after the uploads before it, "
                  "as its words come; the slot's SEND may follow at once (flag: no TAKEN event)",
}


class Event(enum.IntEnum):
    """Kinds in bits 30:27 of an EVENT word; bit 31 says a word is an event."""

    RECEIVED = 1
    MISSING = 2
    MISSING_END = 3
    SENT = 4
    FILLED = 5
    DRAINED = 6
    TAKEN = 7


EVENT_DOCS = {
    Event.RECEIVED: f"a packet changed the slot: flags {RECEIVED_FLAGS.describe()}; "
                    "value: packets in the buffer once known",
    Event.MISSING: "value: a missing packet number",
    Event.MISSING_END: "value: how many MISSING events the query listed",
    Event.SENT: "the slot's last new packet has left",
    Event.FILLED: "the pattern fill of the slot is done",
    Event.DRAINED: "the sink port took the slot's last word; value: beats the pattern checker found "
                   "wrong (saturated; 0 without one)",
    Event.TAKEN: "the slot's take from the source port is done",
}


def dotted_quad(word: int) -> str:
    """An IPv4 address as the registers and push records hold it, a 32-bit word, as text."""
    return ".".join(map(str, word.to_bytes(4, "big")))


def decode_snapshot(body: bytes | memoryview) -> dict[str, int]:
    """A STATUS reply's body by register name: REGISTER_MAP, then every engine register
    (0 where reading would pop), then every link register. FormatError says why not."""
    try:
        values = words(body)
    except FormatError as exc:
        raise FormatError(f"a malformed STATUS reply: {exc}") from None
    if not values or values[0] != REGISTER_MAP:
        shown = f"0x{values[0]:08x}" if values else "nothing"
        raise FormatError(f"the board's register table is not this netblt's (REGISTER_MAP {shown}, expected "
                          f"0x{REGISTER_MAP:08x}): build its bitstream from this version")
    names = [r.name for r in ENGINE_REGISTERS + LINK_REGISTERS]
    if len(values) != 1 + len(names):
        raise FormatError(f"a STATUS reply of {len(values)} words; expected {1 + len(names)}")
    return dict(zip(names, values[1:]))


def markdown() -> str:
    lines = [
        "# Register map",
        "",
        "Generated from formats/registers.py by "
        "`python -m netblt.formats.registers > docs/register-map.md`; do not edit by hand.",
        "",
        "The engine's control and status block is a bank of 32-bit registers at word "
        "addresses (`RegisterBus`: `addr`, `w_en`/`w_data`, `r_en`, and `r_data` one cycle "
        "after `r_en`). Access: rw read/write; r read only; w write strobe; rp read pops.",
    ]
    for title, group in GROUPS + LINK_GROUPS:
        lines += ["", f"## {title}", "", "| address | name | access | bits | meaning |",
                  "| --- | --- | --- | --- | --- |"]
        lines += [f"| 0x{ADDRESS[r.name]:02x} | {r.name} | {r.access} | {r.width} | {r.doc} |"
                  for r in group]
    lines += ["", "## Commands", "",
              f"Write ARG0 and ARG1, then COMMAND ({COMMAND_WORD.describe()}). Commands run "
              "in order; one that names a slot, length or packet the engine does not have is "
              "counted in COMMANDS_REJECTED and skipped.", "",
              "| opcode | command | meaning |", "| --- | --- | --- |"]
    lines += [f"| {c.value} | {c.name} | {COMMAND_DOCS[c]} |" for c in Command]
    lines += ["", "## Events", "", f"An EVENT word: {EVENT_WORD.describe()}.", "",
              "| kind | event | meaning |", "| --- | --- | --- |"]
    lines += [f"| {e.value} | {e.name} | {EVENT_DOCS[e]} |" for e in Event]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown())
