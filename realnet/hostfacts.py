"""Host facts: the kernel settings a real run depends on, and how they differ from a profile.

Owns: reading this host's kernel release, HZ estimate, TCP sysctls (`tcp_pingpong_thresh`,
`tcp_autocorking`, `tcp_rmem`/`tcp_wmem`, the default and allowed congestion controls),
the congestion control a socket really uses (read back with getsockopt TCP_CONGESTION),
and the offloads (TSO/GSO/GRO, ethtool ioctls) of the interface a connection uses. How the
facts differ from a model profile is `nagle_sim.compare.host_differences`' (pure, no I/O).

Every fact is best effort: a missing file or a refused ioctl gives ``None`` ("unknown"),
never an exception, because a run on a locked-down host must still run. Facts from a
remote serve arrive as JSON and are checked with `clean_facts` before anything reads them.

Owns realnet's one sysctl reader (`read_sysctl`, which `core` and `runner` use). Imports
only the standard library at module level (pyroute2 inside the interface lookup), and no
other realnet module, so every realnet module may import it. Must not import nagle_sim,
simpy, textual or rich.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import re
import socket
import struct
import time
from typing import Any


def read_sysctl(key: str) -> str | None:
    """A sysctl's value as this process's network namespace sees it (None if absent):
    realnet's one sysctl reader."""
    try:
        with open(os.path.join("/proc/sys", *key.split(".")), encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


def int_or_none(text: str | None) -> int | None:
    """A sysctl's text as a number; None when it is missing or not a number (an old
    kernel without the knob, a value this reader does not know)."""
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None

SIOCETHTOOL = 0x8946
ETHTOOL_GTSO = 0x1E
ETHTOOL_GGSO = 0x23
ETHTOOL_GGRO = 0x2B
_OFFLOADS = (("tso", ETHTOOL_GTSO), ("gso", ETHTOOL_GGSO), ("gro", ETHTOOL_GGRO))
_HZ_VALUES = (100, 250, 300, 1000)

FACT_KEYS = ("kernel", "system", "hz", "hz_source", "tcp_pingpong_thresh", "tcp_autocorking",
             "tcp_rmem", "tcp_wmem", "congestion_default", "congestion_allowed",
             "interface", "offloads", "congestion", "congestion_notes")
"""Every key a facts dict may have (anything else from a remote is dropped)."""


def _ints(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(x) for x in text.split()]
    except ValueError:
        return None


def _jiffies() -> int | None:
    """The kernel's jiffies counter (/proc/timer_list, root only)."""
    try:
        with open("/proc/timer_list", encoding="ascii", errors="replace") as f:
            for _ in range(20000):
                line = f.readline()
                if not line:
                    return None
                if line.startswith("jiffies:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


_HZ_CACHE: list[tuple[int | None, str]] = []


def estimate_hz(sample_s: float = 0.2) -> tuple[int | None, str]:
    """(HZ, how it was found). The kernel config says it outright when it is readable;
    else jiffies are counted over ``sample_s`` and rounded to the nearest usual value."""
    path = f"/boot/config-{platform.release()}"
    with contextlib.suppress(OSError, UnicodeDecodeError), open(path, encoding="ascii") as f:
        for line in f:
            m = re.fullmatch(r"CONFIG_HZ=(\d+)\s*", line)
            if m:
                return int(m.group(1)), path
    if _HZ_CACHE:        # HZ is fixed at build time: count once per process
        return _HZ_CACHE[0]
    a, t0 = _jiffies(), time.monotonic()
    if a is None:
        return None, "unknown (needs /boot/config-* or root for /proc/timer_list)"
    time.sleep(sample_s)
    b, t1 = _jiffies(), time.monotonic()
    if b is None or t1 <= t0:
        return None, "unknown"
    rate = (b - a) / (t1 - t0)
    best = min(_HZ_VALUES, key=lambda hz: abs(hz - rate))
    _HZ_CACHE.append((best, f"jiffies counted over {t1 - t0:.2f} s ({rate:.0f}/s)"))
    return _HZ_CACHE[0]


def congestion_of(sock: socket.socket) -> str | None:
    """The congestion control ``sock`` really uses (getsockopt TCP_CONGESTION)."""
    if not hasattr(socket, "TCP_CONGESTION"):
        return None
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16)
    except OSError:
        return None
    return raw.split(b"\0", 1)[0].decode("ascii", "replace") or None


def probe_congestion(name: str) -> tuple[str | None, str]:
    """Set ``name`` on a fresh TCP socket and read back what the kernel uses:
    (in use, "" or why ``name`` could not be set)."""
    with socket.socket() as s:
        why = ""
        try:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, name.encode())
        except OSError as exc:
            why = f"cannot use congestion control {name!r}: {exc.strerror}"
        return congestion_of(s), why


def interface_for(local_addr: str) -> str | None:
    """The interface that holds ``local_addr`` (the local end of a connection)."""
    try:
        from pyroute2 import IPRoute
    except ImportError:  # pragma: no cover - pyroute2 is a dependency
        return None
    try:
        with IPRoute() as ipr:
            for msg in ipr.get_addr():
                if msg.get_attr("IFA_ADDRESS") == local_addr \
                        or msg.get_attr("IFA_LOCAL") == local_addr:
                    links = ipr.get_links(msg["index"])
                    if links:
                        return str(links[0].get_attr("IFLA_IFNAME"))
    except Exception:   # netlink refused: unknown, never fatal
        return None
    return "lo" if local_addr.startswith("127.") else None


def offloads(ifname: str) -> dict[str, bool | None]:
    """TSO / GSO / GRO of ``ifname`` (ethtool get ioctls; None where refused)."""
    import fcntl  # here: importing this module (compare does) must work off Linux too

    out: dict[str, bool | None] = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for key, cmd in _OFFLOADS:
            value = ctypes.create_string_buffer(struct.pack("II", cmd, 0))
            ifreq = struct.pack("16sP", ifname.encode()[:15], ctypes.addressof(value))
            try:
                fcntl.ioctl(s.fileno(), SIOCETHTOOL, ifreq)
                out[key] = bool(struct.unpack_from("II", value.raw)[1])
            except OSError:
                out[key] = None
    return out


def collect(*, local_addr: str | None = None, congestion: dict[str, str] | None = None,
            hz_sample_s: float = 0.2) -> dict[str, Any]:
    """This host's facts. ``local_addr``: the local end of the run's connection (its
    interface's offloads); ``congestion``: side -> the congestion control wanted there,
    probed on a fresh socket and read back (``congestion_notes`` says why not)."""
    sysctl = read_sysctl

    hz, hz_source = estimate_hz(hz_sample_s)
    facts: dict[str, Any] = {
        "kernel": platform.release(), "system": platform.system(),
        "hz": hz, "hz_source": hz_source,
        "tcp_pingpong_thresh": int_or_none(sysctl("net.ipv4.tcp_pingpong_thresh")),
        "tcp_autocorking": int_or_none(sysctl("net.ipv4.tcp_autocorking")),
        "tcp_rmem": _ints(sysctl("net.ipv4.tcp_rmem")),
        "tcp_wmem": _ints(sysctl("net.ipv4.tcp_wmem")),
        "congestion_default": sysctl("net.ipv4.tcp_congestion_control"),
        "congestion_allowed": (sysctl("net.ipv4.tcp_allowed_congestion_control") or "").split()
        or None,
    }
    if congestion:
        used, notes = {}, {}
        for side, name in congestion.items():
            used[side], why = probe_congestion(name)
            if why:
                notes[side] = why
        facts["congestion"] = used
        if notes:
            facts["congestion_notes"] = notes
    if local_addr is not None:
        ifname = interface_for(local_addr)
        facts["interface"] = ifname
        facts["offloads"] = offloads(ifname) if ifname else None
    return facts


def _clean_value(value: Any, depth: int = 0) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value if abs(value) < 1 << 62 else None
    if isinstance(value, str):
        return "".join(c if c.isprintable() else "?" for c in value[:200])
    if isinstance(value, list) and depth < 2:
        return [_clean_value(v, depth + 1) for v in value[:32]]
    if isinstance(value, dict) and depth < 2:
        return {str(k)[:40]: _clean_value(v, depth + 1) for k, v in list(value.items())[:16]}
    return None


def clean_facts(raw: Any) -> dict[str, Any]:
    """Facts received from a remote serve: known keys only, bounded, printable."""
    if not isinstance(raw, dict):
        return {}
    return {k: _clean_value(raw[k]) for k in FACT_KEYS if k in raw}


def profile_congestion(profile: Any) -> str:
    """The congestion control a model profile asks for (its ``congestion`` field, which a
    real run sets per socket with TCP_CONGESTION). The one rule, used by the remote runs, the
    local runs' host facts."""
    return str(profile.congestion)


def local_facts(scenario: Any) -> dict[str, dict[str, Any]]:
    """Facts of this host for both sides of a local run (``meta["host_facts"]``), with each
    side's congestion control probed as its profile asks."""
    sides = {"client": scenario.client, "server": scenario.server}
    facts = collect(local_addr="127.0.0.1",
                    congestion={k: profile_congestion(v.profile) for k, v in sides.items()})
    return {"client": facts, "server": facts}
