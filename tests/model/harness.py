"""Drive one model Endpoint by hand, as packetdrill drives a kernel socket.

Each call first fires every timer due before it, collecting what the endpoint sends with
the time it sent it; the stepping is `nagle_sim.drill.clock.ModelClock`, the same loop that
plays .pkt scripts, and timing is checked with `nagle_sim.drill.timing`'s packetdrill rule.
Tests then compare against .pkt expectations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nagle_sim.drill.clock import ModelClock
from nagle_sim.drill.timing import within_tolerance
from nagle_sim.model import PROFILES, Endpoint, Micros, Segment, Side, SocketOptions, SockOpt
from nagle_sim.model.config import StackProfile
from nagle_sim.model.events import flag_letters, parse_flags


def ms(x: float) -> Micros:
    return Micros(round(x * 1000))


@dataclass
class Sent:
    t: int
    seg: Segment

    @property
    def flags(self) -> str:
        return flag_letters(self.seg.flags)

    def __repr__(self) -> str:
        return f"{self.t / 1000:.3f}ms {self.seg.summary()}"


@dataclass
class Harness:
    side: Side = Side.SERVER
    profile: StackProfile = PROFILES["linux"]
    options: SocketOptions = field(default_factory=SocketOptions)
    mss: int = 1000

    def __post_init__(self) -> None:
        self.ep = Endpoint(self.side, self.profile, self.options, self.mss)
        self.clock = ModelClock(self.ep)

    @property
    def now(self) -> Micros:
        return Micros(self.clock.now)

    @property
    def out(self) -> list[Sent]:
        return [Sent(t, seg) for t, seg in self.clock.sent]

    def _collect(self) -> None:
        self.clock.collect()

    def advance(self, t: int) -> None:
        """Move time to ``t``, firing due timers on the way."""
        assert t >= self.clock.now, "time runs forward"
        self.clock.advance(t)

    def peer(self, t: int, *, seq: int, ack: int, length: int = 0, flags: str = "A",
             window: int = 65535, tsval: int = -1, tsecr: int = -1) -> None:
        self.advance(t)
        self.ep.receive_segment(self.now, Segment(
            src=self.side.peer, seq=seq, ack=ack, length=length, flags=parse_flags(flags),
            window=window, sent_at=self.now, tsval=tsval, tsecr=tsecr))
        self._collect()

    def write(self, t: int, n: int, more: bool = False) -> None:
        self.advance(t)
        self.ep.app_write(self.now, n, more=more)
        self._collect()

    def read(self, t: int, n: int = 1 << 30) -> int:
        self.advance(t)
        got = self.ep.app_read(self.now, n)
        self._collect()
        return got

    def setopt(self, t: int, opt: str, on: bool) -> None:
        self.advance(t)
        self.ep.set_option(self.now, SockOpt(opt), on)
        self._collect()

    def close(self, t: int) -> None:
        self.advance(t)
        self.ep.app_close(self.now)
        self._collect()

    def accept(self, t_syn: int, t_ack: int, window: int = 65535) -> None:
        """Passive open: SYN at t_syn, the handshake ACK at t_ack."""
        self.peer(t_syn, seq=0, ack=0, flags="S", window=window)
        self.peer(t_ack, seq=1, ack=1, window=window)

    def data_sent(self) -> list[Sent]:
        return [s for s in self.out if s.seg.length]

    def take(self) -> list[Sent]:
        out = self.out
        self.clock.sent.clear()
        return out


def within_packetdrill_tolerance(actual_us: int, expected_us: int, since_us: int) -> bool:
    """packetdrill's rule with its defaults (max(4 ms, 12.5 % of the interval since the
    previous event), early or late), as `nagle-sim drill` applies it."""
    return within_tolerance(actual_us, expected_us, since_us)


def connect(h: Harness, t: int) -> None:
    h.advance(t)
    h.ep.connect(h.now)
    h._collect()
