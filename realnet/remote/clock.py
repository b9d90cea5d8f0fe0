"""The serve's clock against this host's, and the path's one-way delays.

Owns: `ClockEstimate` and `estimate_offset`: from the handshake's four kernel timestamps
when both hosts captured it (NTP's formula), else from the control channel's best round
trip; a declared asymmetric path (`nagle_sim.scenario.Link.describes_path`) is taken out.
Must not import simpy, textual or rich.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nagle_sim.scenario import Scenario
from realnet.remote.protocol import CLOCK_SAMPLES


@dataclass(slots=True)
class ClockEstimate:
    """The serve's clock against ours (server perf − client perf) and the path's delays."""

    offset_ns: int
    method: str
    control_ns: int
    control_rtt_ns: int
    handshake_ns: int | None = None
    handshake_rtt_ns: int | None = None
    one_way_to_client_ns: int = 0
    one_way_to_server_ns: int = 0

    def to_meta(self) -> dict[str, Any]:
        def us(v: int | None) -> float | None:
            return None if v is None else round(v / 1000, 1)
        return {"used_us": us(self.offset_ns), "method": self.method,
                "control_channel_us": us(self.control_ns),
                "control_rtt_us": us(self.control_rtt_ns),
                "handshake_us": us(self.handshake_ns),
                "handshake_rtt_us": us(self.handshake_rtt_ns),
                "one_way_to_client_us": us(self.one_way_to_client_ns),
                "one_way_to_server_us": us(self.one_way_to_server_ns)}


def _handshake_times(packets: list[Any], *, server: bool, syn_ack: bool, outgoing: bool,
                     port: int) -> list[int]:
    """Times of every capture of one handshake segment (a retransmitted SYN or SYN-ACK
    appears more than once), in capture order."""
    return [int(p.t_ns) for p in packets
            if p.outgoing == outgoing and (p.sport == port) == server and "S" in p.flags
            and ("A" in p.flags) == syn_ack]


def _first(packets: list[Any], *, server: bool, syn_ack: bool, outgoing: bool,
           port: int) -> int | None:
    times = _handshake_times(packets, server=server, syn_ack=syn_ack, outgoing=outgoing,
                             port=port)
    return times[0] if times else None


def estimate_offset(local: list[Any], local_off: int, remote: list[Any], remote_off: int,
                     port: int, scenario: Scenario, control_ns: int,
                     control_rtt_ns: int) -> ClockEstimate:
    """The offset from the handshake's four kernel timestamps when both hosts captured it
    (NTP's formula), else the control channel's best round trip. A declared asymmetric
    path (the scenario's link delays, when they add up to the measured round trip) is
    taken out: NTP assumes both directions take as long."""
    est = ClockEstimate(control_ns, "control channel (best of "
                        f"{CLOCK_SAMPLES} round trips)", control_ns, control_rtt_ns,
                        one_way_to_client_ns=control_rtt_ns // 2,
                        one_way_to_server_ns=control_rtt_ns // 2)
    t4 = _first(local, server=True, syn_ack=True, outgoing=False, port=port)
    # the SYN the first SYN-ACK answers is the last one sent before it (a retransmitted
    # SYN would otherwise add its RTO to the round trip)
    syns = [t for t in _handshake_times(local, server=False, syn_ack=False, outgoing=True,
                                        port=port) if t4 is not None and t <= t4]
    if not syns or t4 is None:
        return est
    t1, t4 = syns[-1] - local_off, t4 - local_off
    rtt = t4 - t1
    ds, dc = scenario.link.to_server_delay * 1000, scenario.link.to_client_delay * 1000
    declared = scenario.link.describes_path(rtt / 1000)
    asym = (ds - dc) if declared else 0
    est.handshake_rtt_ns = rtt
    est.one_way_to_client_ns = round(rtt * dc / (ds + dc)) if declared else rtt // 2
    est.one_way_to_server_ns = rtt - est.one_way_to_client_ns
    if declared:
        est.offset_ns = control_ns - asym // 2
        est.method += "; declared link asymmetry taken out"
    t3 = _first(remote, server=True, syn_ack=True, outgoing=True, port=port)
    syns_there = [t for t in _handshake_times(remote, server=False, syn_ack=False,
                                              outgoing=False, port=port)
                  if t3 is not None and t <= t3]
    if not syns_there or t3 is None:
        return est
    t2, t3 = syns_there[-1] - remote_off, t3 - remote_off
    est.handshake_ns = ((t2 - t1) + (t3 - t4) - asym) // 2
    # Each estimate is within half its round trip of the truth; if the two intervals do
    # not meet, the handshake's four timestamps are not one exchange (a retransmitted
    # SYN-ACK, a capture that missed one): keep the control channel's.
    # (NTP's bound holds for any asymmetry, so the raw estimates are what is checked)
    raw = ((t2 - t1) + (t3 - t4)) // 2
    bound = (control_rtt_ns + max(0, rtt - (t3 - t2))) / 2
    if abs(raw - control_ns) > bound:
        est.method += (f"; the handshake's estimate ({est.handshake_ns / 1000:.0f} µs) is "
                       "outside both round trips' bounds, not used")
        return est
    est.offset_ns = est.handshake_ns
    est.method = "handshake (kernel timestamps on both hosts)" + (
        "; declared link asymmetry taken out" if declared else "")
    return est
