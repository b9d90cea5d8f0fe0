"""Socket options and TCP_INFO for real-socket runs (Linux).

Owns: the mapping of scenario options (nodelay, cork, quickack, mss) onto setsockopt /
getsockopt calls, and decoding ``struct tcp_info``. House rules (house-style B4): always set
TCP_NODELAY explicitly (asyncio switches it on for sockets it creates), detect Linux-only
options with ``hasattr(socket, ...)``. TCP_QUICKACK is not sticky: callers that want it
permanently re-set it after every read; the runner sets it only where the scenario says so.

Imports from nagle_sim only the model's option names (`SockOpt`) and the error root
(`nagle_sim.errors`). Must not import textual, rich, simpy or asyncio.
"""

from __future__ import annotations

import errno
import os
import socket
import struct

from nagle_sim.errors import UserError
from nagle_sim.model.state import SockOpt

TCP_INFO_BUFLEN = 256

# Option name (as in scenario scripts) -> socket module attribute: TCP_NODELAY, ...
_OPTION_ATTR = {opt.value: f"TCP_{opt.name}" for opt in SockOpt}

# ``struct tcp_info`` (include/uapi/linux/tcp.h): 8 one-byte fields, then u32s, then u64s.
# (name, offset, struct format). Fields beyond the length the kernel returns are skipped.
_TCP_INFO_FIELDS: tuple[tuple[str, int, str], ...] = (
    ("state", 0, "B"),
    ("ca_state", 1, "B"),
    ("retransmits", 2, "B"),
    ("probes", 3, "B"),
    ("backoff", 4, "B"),
    ("options", 5, "B"),
    ("rto", 8, "I"),
    ("ato", 12, "I"),
    ("snd_mss", 16, "I"),
    ("rcv_mss", 20, "I"),
    ("unacked", 24, "I"),
    ("sacked", 28, "I"),
    ("lost", 32, "I"),
    ("retrans", 36, "I"),
    ("last_data_sent", 44, "I"),
    ("last_data_recv", 52, "I"),
    ("last_ack_recv", 56, "I"),
    ("pmtu", 60, "I"),
    ("rcv_ssthresh", 64, "I"),
    ("rtt", 68, "I"),
    ("rttvar", 72, "I"),
    ("snd_ssthresh", 76, "I"),
    ("snd_cwnd", 80, "I"),
    ("advmss", 84, "I"),
    ("rcv_space", 96, "I"),
    ("total_retrans", 100, "I"),
    ("bytes_acked", 120, "Q"),
    ("bytes_received", 128, "Q"),
    ("segs_out", 136, "I"),
    ("segs_in", 140, "I"),
    ("notsent_bytes", 144, "I"),
    ("data_segs_in", 152, "I"),
    ("data_segs_out", 156, "I"),
    ("snd_wnd", 228, "I"),
    ("rcv_wnd", 232, "I"),
)


class SockoptError(OSError, UserError):
    """An option this platform does not have (e.g. TCP_CORK off Linux): an `OSError`
    where the socket call failed, and a `nagle_sim.errors.UserError` (one line, exit 2)
    should it reach the command line."""


def supported(option: str) -> bool:
    """True when this platform's socket module has the option (nodelay, cork, quickack)."""
    return hasattr(socket, _OPTION_ATTR[option])


def _const(option: str) -> int:
    attr = _OPTION_ATTR.get(option)
    if attr is None:
        raise SockoptError(f"unknown socket option {option!r}")
    value = getattr(socket, attr, None)
    if value is None:
        raise SockoptError(f"{attr} is not available on this platform")
    return int(value)


def set_option(sock: socket.socket, option: str, on: bool) -> None:
    """setsockopt(IPPROTO_TCP, TCP_NODELAY|TCP_CORK|TCP_QUICKACK, on)."""
    sock.setsockopt(socket.IPPROTO_TCP, _const(option), 1 if on else 0)


def get_option(sock: socket.socket, option: str) -> int:
    """getsockopt(IPPROTO_TCP, ...). TCP_QUICKACK reads ``!pingpong`` (1 on a new socket)."""
    return int(sock.getsockopt(socket.IPPROTO_TCP, _const(option)))


def set_maxseg(sock: socket.socket, mss: int) -> None:
    """TCP_MAXSEG: clamp the MSS (set before connect / listen; accepted sockets inherit it)."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, mss)


def set_congestion(sock: socket.socket, name: str) -> str:
    """TCP_CONGESTION (accepted sockets inherit the listener's). Returns "" or why not:
    a name outside net.ipv4.tcp_allowed_congestion_control needs CAP_NET_ADMIN."""
    if not hasattr(socket, "TCP_CONGESTION"):
        return "TCP_CONGESTION is not available here"
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, name.encode())
    except OSError as exc:
        return f"cannot use congestion control {name!r}: {exc.strerror}"
    return ""


# include/uapi/linux/tcp.h (Linux 6.15+); Python's socket module may not name them yet
TCP_RTO_MIN_US = 45
TCP_DELACK_MAX_US = 46
_TIMING_OPT = {"rto_min": ("TCP_RTO_MIN_US", TCP_RTO_MIN_US),
               "delack_max": ("TCP_DELACK_MAX_US", TCP_DELACK_MAX_US)}


def set_timing(sock: socket.socket, option: str, us: int) -> None:
    """`set rto_min 50ms` / `set delack_max 5ms`: setsockopt(IPPROTO_TCP,
    TCP_RTO_MIN_US | TCP_DELACK_MAX_US, µs)."""
    sock.setsockopt(socket.IPPROTO_TCP, _TIMING_OPT[option][1], us)


TCP_USER_TIMEOUT = 18          # include/uapi/linux/tcp.h
TCP_NOTSENT_LOWAT = 25


def set_value(sock: socket.socket, option: str, value: int) -> None:
    """`set sndbuf 8k` (SO_SNDBUF: the kernel doubles it and stops autotuning the send
    buffer), `set notsent_lowat 16k` (TCP_NOTSENT_LOWAT, bytes), `set user_timeout 1s`
    (TCP_USER_TIMEOUT, ``value`` in ms)."""
    if option == "sndbuf":
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, value)
    elif option == "notsent_lowat":
        sock.setsockopt(socket.IPPROTO_TCP, TCP_NOTSENT_LOWAT, value)
    else:
        sock.setsockopt(socket.IPPROTO_TCP, TCP_USER_TIMEOUT, value)


def timing_unsupported(option: str, us: int) -> str:
    """Why this kernel refuses the timing option (probed on a throwaway socket), or ""."""
    name, number = _TIMING_OPT[option]
    probe = socket.socket()
    try:
        probe.setsockopt(socket.IPPROTO_TCP, number, us)
    except OSError as exc:
        release = os.uname().release
        if exc.errno == errno.ENOPROTOOPT:
            return f"this kernel ({release}) has no {name} (Linux 6.15+)"
        return (f"this kernel ({release}) refuses {name} = {us} µs ({exc.strerror}: it "
                "takes 2 jiffies to 200 ms)")
    finally:
        probe.close()
    return ""


def congestion_missing(name: str) -> str:
    """Why this kernel has no congestion control ``name`` (probed on a throwaway socket),
    or "". Only a missing module counts: without CAP_NET_ADMIN a name outside
    net.ipv4.tcp_allowed_congestion_control is refused too, and the run goes on with a
    note (`set_congestion`)."""
    if not hasattr(socket, "TCP_CONGESTION"):
        return ""
    probe = socket.socket()
    try:
        probe.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, name.encode())
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return (f"this kernel ({os.uname().release}) has no congestion control "
                    f"{name!r} (see net.ipv4.tcp_available_congestion_control)")
    finally:
        probe.close()
    return ""


def apply_initial(sock: socket.socket, *, nodelay: bool, cork: bool,
                  quickack: bool | None, congestion: str | None = None) -> str:
    """The scenario's initial options. TCP_NODELAY is always set explicitly (0 or 1).
    Returns "" or a note when the congestion control could not be set."""
    note = set_congestion(sock, congestion) if congestion else ""
    set_option(sock, "nodelay", nodelay)
    if cork:
        set_option(sock, "cork", True)
    if quickack is not None:
        set_option(sock, "quickack", quickack)
    return note


def parse_tcp_info(raw: bytes) -> dict[str, int]:
    """Decode the fields of ``struct tcp_info`` that ``raw`` is long enough to hold."""
    out: dict[str, int] = {}
    for name, offset, fmt in _TCP_INFO_FIELDS:
        size = struct.calcsize(fmt)
        if offset + size <= len(raw):
            out[name] = struct.unpack_from("=" + fmt, raw, offset)[0]
    return out


def tcp_info(sock: socket.socket) -> dict[str, int]:
    """A TCP_INFO snapshot (times in µs as the kernel reports them), plus ``quickack``
    (getsockopt TCP_QUICKACK) and ``pingpong`` (its negation: the kernel does not export
    ``icsk_ack.pingpong`` in tcp_info). Empty dict where TCP_INFO is missing."""
    if not hasattr(socket, "TCP_INFO"):
        return {}
    try:
        info = parse_tcp_info(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO,
                                              TCP_INFO_BUFLEN))
        if supported("quickack"):
            q = get_option(sock, "quickack")
            info["quickack"] = q
            info["pingpong"] = 0 if q else 1
    except OSError:
        return {}
    return info
