"""The raw records of nagle_watch.bpf.c, decoded, and recorded raw-event fixtures.

Owns: the byte layout of ``struct nw_event`` (bpf/nagle_watch.h; tests/watch/test_raw.py
checks it against a C compiler's offsets), the record-type, context and counter numbers,
and the fixture format (JSON lines: a header with the host facts, then one hex record a
line) that lets the decision engine be tested without root. Standard library only.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import IO, Any, Final

from nagle_sim.errors import UserError

# record types (NW_EV_*)
SOCK: Final = 1
STATE: Final = 2
SEND: Final = 3
RECV: Final = 4
IN: Final = 5
OUT: Final = 6
TIMER_ARM: Final = 7
TIMER_FIRE: Final = 8
MODE: Final = 9
SOCKOPT: Final = 10
TYPE_NAMES: Final = {SOCK: "sock", STATE: "state", SEND: "send", RECV: "recv", IN: "in",
                     OUT: "out", TIMER_ARM: "timer_arm", TIMER_FIRE: "timer_fire",
                     MODE: "mode", SOCKOPT: "sockopt"}

# contexts (NW_CTX_*)
CTX_UNKNOWN: Final = 0
CTX_PROCESS: Final = 1
CTX_SOFTIRQ: Final = 2
CTX_DELACK_TIMER: Final = 3
CTX_WRITE_TIMER: Final = 4
CTX_SETSOCKOPT: Final = 5
CTX_READ: Final = 6

# counters (NW_C_*)
COUNTER_NAMES: Final = ("emitted", "lost", "rate_limited", "sockets_not_watched")

# kernel constants the records carry
AF_INET: Final = 2
AF_INET6: Final = 10
TCP_NODELAY: Final = 1
TCP_CORK: Final = 3
TCP_QUICKACK: Final = 12
MSG_MORE: Final = 0x8000
TCP_NAGLE_OFF: Final = 1
TCP_NAGLE_CORK: Final = 2
TCP_NAGLE_PUSH: Final = 4
ICSK_ACK_SCHED: Final = 1
ICSK_ACK_TIMER: Final = 2
ICSK_TIME_RETRANS: Final = 1
ICSK_TIME_PROBE0: Final = 3
ICSK_TIME_LOSS_PROBE: Final = 5
TH_FIN: Final = 0x01
TH_SYN: Final = 0x02
TH_RST: Final = 0x04
TH_PSH: Final = 0x08
TH_ACK: Final = 0x10
TCP_STATES: Final = ("?", "ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2",
                     "TIME_WAIT", "CLOSE", "CLOSE_WAIT", "LAST_ACK", "LISTEN", "CLOSING",
                     "NEW_SYN_RECV", "BOUND_INACTIVE")
TCP_ESTABLISHED: Final = 1
TCP_SYN_SENT: Final = 2
TCP_SYN_RECV: Final = 3
TCP_CLOSE: Final = 7
TCP_CLOSE_WAIT: Final = 8

_FORMAT: Final = "<5Q2I12I3I2H12B4H16s16s16s4x"
RECORD: Final = struct.Struct(_FORMAT)
RECORD_SIZE: Final = RECORD.size
"""sizeof(struct nw_event): 184 bytes."""


@dataclass(slots=True)
class RawEvent:
    """One record, field for field as struct nw_event (bpf/nagle_watch.h)."""

    ts_ns: int
    sk: int
    jiffies: int
    a: int
    b: int
    tgid: int
    tid: int
    snd_una: int
    snd_nxt: int
    snd_sml: int
    write_seq: int
    rcv_nxt: int
    rcv_wup: int
    packets_out: int
    snd_cwnd: int
    snd_wnd: int
    mss_cache: int
    srtt_us: int
    rto_j: int
    seq: int
    ack: int
    len: int
    win: int
    rcv_mss: int
    type: int
    ctx: int
    tcpflags: int
    state: int
    nonagle: int
    ack_pending: int
    quick: int
    pingpong: int
    ato: int
    icsk_pending: int
    timer: int
    pad1: int
    family: int
    sport: int
    dport: int
    pad2: int
    saddr: bytes
    daddr: bytes
    comm: bytes

    @classmethod
    def decode(cls, data: bytes) -> RawEvent:
        if len(data) < RECORD_SIZE:
            raise ValueError(f"a record of {len(data)} bytes, {RECORD_SIZE} expected")
        return cls(*RECORD.unpack_from(data))

    def encode(self) -> bytes:
        return RECORD.pack(*(getattr(self, f.name) for f in fields(self)))

    # -- derived ---------------------------------------------------------------------------
    @property
    def queued(self) -> int:
        """Bytes written but not yet sent (write_seq − snd_nxt)."""
        return (self.write_seq - self.snd_nxt) & 0xFFFFFFFF

    @property
    def in_flight(self) -> int:
        """Bytes sent and not yet ACKed (snd_nxt − snd_una)."""
        return (self.snd_nxt - self.snd_una) & 0xFFFFFFFF

    @property
    def sml_unacked(self) -> int:
        """snd_sml − snd_una: how far the end of the last small segment sent is beyond
        the ACKed bytes (> 0: Minshall's test says a small segment is unACKed)."""
        d = (self.snd_sml - self.snd_una) & 0xFFFFFFFF
        return d if d < 0x80000000 else 0

    @property
    def minshall_unacked(self) -> bool:
        """tcp_minshall_check: after(snd_sml, snd_una) && !after(snd_sml, snd_nxt)."""
        ahead = (self.snd_sml - self.snd_una) & 0xFFFFFFFF
        beyond = (self.snd_sml - self.snd_nxt) & 0xFFFFFFFF
        return 0 < ahead < 0x80000000 and (beyond == 0 or beyond >= 0x80000000)

    @property
    def command(self) -> str:
        return self.comm.split(b"\0", 1)[0].decode("utf-8", "replace")


def decode_all(blobs: Iterable[bytes]) -> Iterator[RawEvent]:
    for blob in blobs:
        yield RawEvent.decode(blob)


# -- fixtures -------------------------------------------------------------------------------

FIXTURE_FORMAT: Final = "nagle-sim-watch-raw/1"
_MAX_FIXTURE_RECORDS: Final = 2_000_000
_MAX_LINE: Final = 4096


class FixtureError(UserError, ValueError):
    """A raw-event file that cannot be read: one line naming the file and the line."""


def write_fixture(out: IO[str], host: dict[str, Any], records: Iterable[bytes]) -> int:
    """Write a fixture: the header (host facts: hz, kernel, ...) then one record a line."""
    out.write(json.dumps({"format": FIXTURE_FORMAT, "host": host}) + "\n")
    n = 0
    for blob in records:
        out.write(blob.hex() + "\n")
        n += 1
    return n


def read_fixture(path: str | Path) -> tuple[dict[str, Any], list[RawEvent]]:
    """The host facts and records of a fixture file (bounded, checked)."""
    p = Path(path)
    host: dict[str, Any] = {}
    events: list[RawEvent] = []
    with p.open(encoding="utf-8", errors="strict") as f:
        head = f.readline(_MAX_LINE + 1)
        try:
            doc = json.loads(head)
        except ValueError as exc:
            raise FixtureError(f"{p}: line 1: not a {FIXTURE_FORMAT} header") from exc
        if not isinstance(doc, dict) or doc.get("format") != FIXTURE_FORMAT or \
                not isinstance(doc.get("host"), dict):
            raise FixtureError(f"{p}: line 1: not a {FIXTURE_FORMAT} header")
        host = doc["host"]
        for lineno, line in enumerate(f, start=2):
            if len(line) > _MAX_LINE:
                raise FixtureError(f"{p}: line {lineno}: longer than {_MAX_LINE} characters")
            line = line.strip()
            if not line:
                continue
            if len(events) >= _MAX_FIXTURE_RECORDS:
                raise FixtureError(f"{p}: more than {_MAX_FIXTURE_RECORDS} records")
            try:
                events.append(RawEvent.decode(bytes.fromhex(line)))
            except ValueError as exc:
                raise FixtureError(f"{p}: line {lineno}: {exc}") from exc
    return host, events
