"""The TCP options Linux puts on the model's segments, and packetdrill's check of them.

The model's segments carry no option bytes: which options a Linux socket sends follows
from its sysctls and the peer's SYN alone, so this module works them out the way the
kernel does, and `check` compares them with a script's ``<…>`` list as packetdrill's
run_packet.c (verify_outbound_live_tcp_options, verify_outbound_tcp_option) does.

- SYN (tcp_syn_options): MSS always (the advertised MSS, tcp_advertise_mss: the route's
  1460 on packetdrill's tun0, or TCP_MAXSEG if smaller); timestamps if
  net.ipv4.tcp_timestamps; SACK-permitted if net.ipv4.tcp_sack; window scale if
  net.ipv4.tcp_window_scaling.
- SYN-ACK (tcp_synack_options): the same, each only if the peer's SYN offered it too.
- Every later segment (tcp_established_options): timestamps, if both SYNs carried them.
  SACK blocks are never sent (the model keeps no SACK scoreboard: a script expecting
  them is unsupported, see `unsupported_outbound`).
- Wire order and padding (tcp_options_write): MSS; then ``sackOK,TS`` when both (SACK's
  two bytes stand in for the timestamps' NOPs), ``nop,nop,TS`` or ``nop,nop,sackOK``
  alone; then ``nop,wscale``.
- A reset sent for a segment no socket owns (tcp_v4_send_reset) carries no options;
  the window scale the socket offers is ilog2(max(tcp_rmem[2], net.core.rmem_max)) - 15,
  at most 14 (tcp_select_initial_window), and 0 when the peer's SYN offered none.

packetdrill checks each option's kind in order (NOP and EOL included), the length and
value of MSS, window scale and SACK-permitted, and a timestamp value only when the
script sets ``--tcp_ts_tick_usecs``; never the timestamp echo. Standard library and the
script tree only; knows nothing of the model.
"""

from __future__ import annotations

from dataclasses import dataclass

from .script import Packet, TcpOption

TCP_MAX_WSCALE = 14
TS_OPTION_BYTES = 12
"""TCPOLEN_TSTAMP_ALIGNED: the payload MSS shrinks by this when timestamps are on."""
ROUTE_ADVMSS = 1460
"""dst_metric_advmss on packetdrill's tun0 (MTU 1500, IPv4): what a SYN advertises."""


def wscale_for(rmem_max: int, core_rmem_max: int) -> int:
    """tcp_select_initial_window: the shift that lets the largest receive buffer be
    offered: ilog2(max(tcp_rmem[2], net.core.rmem_max)) - 15, within 0..14."""
    space = max(rmem_max, core_rmem_max, 1)
    return max(0, min(space.bit_length() - 1 - 15, TCP_MAX_WSCALE))


@dataclass(frozen=True, slots=True)
class OptionConfig:
    """What the local socket offers: its sysctls and advertised MSS."""

    timestamps: bool = True       # net.ipv4.tcp_timestamps
    sack: bool = True             # net.ipv4.tcp_sack
    window_scaling: bool = True   # net.ipv4.tcp_window_scaling
    wscale: int = 10              # from tcp_rmem[2] and net.core.rmem_max (`wscale_for`)
    advmss: int = ROUTE_ADVMSS


@dataclass(frozen=True, slots=True)
class PeerSyn:
    """What the peer's SYN (or SYN-ACK) offered."""

    mss: int | None
    timestamps: bool
    sack: bool
    wscale: int | None

    @classmethod
    def of(cls, packet: Packet) -> PeerSyn:
        opts = packet.options or ()
        mss = next((o.values[0] for o in opts if o.kind == "mss" and o.values), None)
        ws = next((o.values[0] for o in opts if o.kind == "wscale" and o.values), None)
        return cls(mss=mss, timestamps=any(o.kind == "TS" for o in opts),
                   sack=any(o.kind == "sackOK" for o in opts), wscale=ws)


@dataclass(frozen=True, slots=True)
class Negotiated:
    """The connection's options once both SYNs are known."""

    timestamps: bool
    sack: bool
    wscale: int        # ours, 0 when not negotiated
    peer_wscale: int   # the peer's, 0 when not negotiated

    @classmethod
    def of(cls, cfg: OptionConfig, peer: PeerSyn | None) -> Negotiated:
        if peer is None:
            return cls(False, False, 0, 0)
        ws = cfg.window_scaling and peer.wscale is not None
        return cls(timestamps=cfg.timestamps and peer.timestamps,
                   sack=cfg.sack and peer.sack,
                   wscale=cfg.wscale if ws else 0,
                   peer_wscale=min(peer.wscale or 0, TCP_MAX_WSCALE) if ws else 0)


def _layout(mss: int | None, ts: tuple[int, int] | None, sack: bool,
            wscale: int | None) -> tuple[TcpOption, ...]:
    """tcp_options_write's order and NOP padding."""
    out: list[TcpOption] = []
    if mss is not None:
        out.append(TcpOption("mss", (mss,)))
    if ts is not None:
        out.extend([TcpOption("sackOK")] if sack else [TcpOption("nop"), TcpOption("nop")])
        out.append(TcpOption("TS", ts))
    elif sack:
        out.extend([TcpOption("nop"), TcpOption("nop"), TcpOption("sackOK")])
    if wscale is not None:
        out.extend([TcpOption("nop"), TcpOption("wscale", (wscale,))])
    return tuple(out)


def syn_options(cfg: OptionConfig, peer: PeerSyn | None, ts_val: int,
                ts_ecr: int) -> tuple[TcpOption, ...]:
    """A SYN's (``peer`` None) or SYN-ACK's options; ``ts_ecr`` echoes the peer's last
    timestamp (ts_recent; 0 on a SYN)."""
    if peer is None:
        return _layout(cfg.advmss, (ts_val, 0) if cfg.timestamps else None, cfg.sack,
                       cfg.wscale if cfg.window_scaling else None)
    nego = Negotiated.of(cfg, peer)
    return _layout(cfg.advmss, (ts_val, ts_ecr) if nego.timestamps else None, nego.sack,
                   nego.wscale if cfg.window_scaling and peer.wscale is not None else None)


def established_options(nego: Negotiated, ts_val: int, ts_ecr: int) -> tuple[TcpOption, ...]:
    """Any segment after the handshake (the timestamps option if negotiated)."""
    return _layout(None, (ts_val, ts_ecr) if nego.timestamps else None, False, None)


def text(options: tuple[TcpOption, ...]) -> str:
    """packetdrill's way of printing an option list: ``<mss 1460,nop,wscale 8>``."""
    parts = []
    for o in options:
        if o.kind == "TS":
            parts.append(f"TS val {o.values[0]} ecr {o.values[1]}")
        elif o.kind == "sack":
            parts.append("sack " + " ".join(f"{a}:{b}" for a, b in zip(
                o.values[::2], o.values[1::2], strict=True)))
        else:
            parts.append(" ".join([o.kind, *map(str, o.values)]))
    return "<" + ",".join(parts) + ">"


_MODELLED = {"nop", "eol", "mss", "wscale", "sackOK", "TS"}


def unsupported_outbound(packet: Packet) -> str | None:
    """Why an outbound line's options cannot be checked on the model, if they cannot."""
    for o in packet.options or ():
        if o.kind == "sack":
            return "SACK blocks on outbound packets: the model keeps no SACK scoreboard"
        if o.kind not in _MODELLED:
            return f"TCP option {o.kind.split()[0]} on outbound packets is not modelled"
    return None


def unsupported_inbound(packet: Packet) -> str | None:
    """Why an inbound packet's options put it outside the model, if they do."""
    for o in packet.options or ():
        kind = o.kind.split()[0]
        if kind == "md5":
            return "TCP MD5 signatures (RFC 2385) are not modelled"
        if kind in ("FO", "FOEXP"):
            return "TCP Fast Open is not modelled"
        if kind == "sack" and o.values:
            return "SACK blocks (SACK-based loss recovery) are not modelled"
        if kind not in _MODELLED and kind != "sack":
            return f"TCP option {kind} is not modelled"
    return None


def check(expected: tuple[TcpOption, ...], actual: tuple[TcpOption, ...], *,
          ts_tick_us: int, ts_tolerance_us: int, ts_offset: int | None) -> str | None:
    """packetdrill's comparison: the same kinds in the same order; MSS, window scale and
    SACK-permitted by value; a timestamp value within the tolerance when ticks are set
    (``ts_offset`` maps the model's values into the script's, as packetdrill maps the
    first one it sees). None when they agree, else why not."""
    if [o.kind for o in expected] != [o.kind for o in actual]:
        return f"TCP options expected {text(expected)}, the model's are {text(actual)}"
    for want, got in zip(expected, actual, strict=True):
        if want.kind in ("mss", "wscale") and want.values != got.values:
            return (f"TCP option {want.kind} expected {want.values[0]}, the model's is "
                    f"{got.values[0]}")
        if want.kind == "TS" and ts_tick_us and ts_offset is not None:
            mapped = (got.values[0] + ts_offset) & 0xFFFFFFFF
            diff = (mapped - want.values[0]) & 0xFFFFFFFF
            diff = diff - (1 << 32) if diff >= 1 << 31 else diff
            if abs(diff) * ts_tick_us > ts_tolerance_us:
                return (f"TCP timestamp value expected {want.values[0]}, the model's maps to "
                        f"{mapped} (tolerance {ts_tolerance_us} µs)")
    return None
