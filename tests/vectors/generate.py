"""Writes packets.json: one packet of every type, its bytes and its decoded fields.

Run once when the wire format changes on purpose; the file is then checked in and used
by the codec tests, the scapy cross-check, and the gateware tests.
"""

import dataclasses
import json
from pathlib import Path

from netblt.protocol.codec import encode
from netblt.protocol.packets import (
    Abort, Control, Data, Done, Go, KeepAlive, NullAck, Ok, Open, Quit, QuitAck, Refused, Resend, Response,
)

SETUP = dict(uid=0x1234ABCD, buffer_size=14320, packet_size=1432, burst_size=5, burst_interval=55,
             death_timer=30, max_buffers=22, data_checksum=True, write_mode=True, transfer_size=716000)
PACKETS = {
    "open": Open(**SETUP, client_string=b"netblt-file/1 size=716000"),
    "response": Response(**SETUP | dict(burst_interval=60, data_checksum=False), client_string=b"ok"),
    "keepalive": KeepAlive(),
    "quit": Quit("client gave up"),
    "quitack": QuitAck(),
    "abort": Abort("protocol error"),
    "data": Data(buffer=7, packet=3, high_ack=12, payload=bytes(range(32))),
    "data_checksum": Data(buffer=7, packet=4, high_ack=12, payload=bytes(range(100, 132))),
    "ldata_last_odd": Data(buffer=9, packet=2, high_ack=0xFFFF, payload=b"tail!", ldata=True, last_buffer=True),
    "ldata_empty": Data(buffer=1, packet=0, high_ack=1, payload=b"", ldata=True, last_buffer=True),
    "null_ack": NullAck(high_ack=40, burst_size=5, burst_interval=60),
    "control": Control((Ok(41, 6, 5, 55, 1800), Go(42, 29), Resend(43, 7, (1, 4, 9)))),
    "control_empty": Control(()),
    "refused": Refused("buffer too large"),
    "done": Done(),
}


def fields(packet) -> dict:
    out = {"type": packet.type.name}
    for f in dataclasses.fields(packet):
        value = getattr(packet, f.name)
        if isinstance(value, bytes):
            value = value.hex()
        elif f.name == "messages":
            value = [dict(kind=type(m).__name__.upper(), **dataclasses.asdict(m)) for m in value]
        out[f.name] = value
    return out


def main() -> None:
    vectors = []
    for name, packet in PACKETS.items():
        checksum = name == "data_checksum"
        vectors.append(dict(name=name, local_port=2998, foreign_port=40001, data_checksum=checksum,
                            hex=encode(packet, 2998, 40001, data_checksum=checksum).hex(),
                            fields=fields(packet)))
    Path(__file__).with_name("packets.json").write_text(json.dumps(vectors, indent=1) + "\n")


if __name__ == "__main__":
    main()
