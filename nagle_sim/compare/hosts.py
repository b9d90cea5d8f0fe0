"""The real hosts against the model's profiles: what differs, and what makes it unfair.

Owns: the model's profile per side (`profiles_of`: a scenario's, or the names a saved model
trace records), a kernel release's version profile (`version_profile`), and every
difference between a real run's host facts and those profiles (`host_differences`: HZ,
the ping-pong threshold, autocorking, buffers, offloads — listed; a congestion control
the host could not set — a problem).
"""

from __future__ import annotations

import re
from typing import Any

from ..model.config import PROFILES, TUNABLE, StackProfile
from ..model.events import Side
from ..trace import Trace

STOCK_WMEM = [4096, 16384, 4194304]
"""net.ipv4.tcp_wmem as Linux ships it (the model has no send-buffer limit)."""

def offloaded(real: Trace) -> bool:
    """A remote run over an interface with TSO or GRO: the capture can see bursts of
    several MSS (cut into MSS segments on the wire, or merged on receipt). Software GSO
    alone is split before the capture tap."""
    if real.meta.get("link") != "remote":
        return False
    for facts in (real.meta.get("host_facts") or {}).values():
        offl = facts.get("offloads") if isinstance(facts, dict) else None
        if isinstance(offl, dict) and any(offl.get(k) for k in ("tso", "gro")):
            return True
    return False

_SIDE_CHANGES = TUNABLE | {"congestion"}
"""What a scenario may change of a side's profile (its `tune` table and `congestion` key)."""

def profiles_of(source: Any) -> dict[Side, StackProfile]:
    """The model's profile per side: a scenario's (``source.side(side).profile``, tuned),
    or, for a saved model trace, the profiles named in its meta (``client_profile`` /
    ``server_profile``, changed by ``client_tune`` / ``server_tune``: `congestion` and the
    `tune` table; an unknown name or tune leaves that side out, so it is not compared)."""
    if not isinstance(source, Trace):
        return {side: source.side(side).profile for side in Side}
    out = {}
    for side in Side:
        name = source.meta.get(f"{side.value}_profile")
        if isinstance(name, str) and name in PROFILES:
            out[side] = PROFILES[name]
            tune = source.meta.get(f"{side.value}_tune")
            if isinstance(tune, dict) and tune:
                changes = {k: v for k, v in tune.items()
                           if k in _SIDE_CHANGES and isinstance(v, int | str)}
                if len(changes) != len(tune):
                    del out[side]           # a tune this model does not know: not compared
                    continue
                try:
                    out[side] = out[side].with_overrides(**changes)
                except (TypeError, ValueError):
                    del out[side]
    return out

def version_profile(kernel: object) -> tuple[str, str]:
    """(profile name, note) for a kernel release: ``linux-6.1`` for "6.1.0-13-amd64" when
    the model has that profile, else ``linux`` and a note saying there is none."""
    m = re.match(r"(\d+)\.(\d+)", kernel if isinstance(kernel, str) else "")
    if not m:
        return "linux", f"kernel release {kernel!r} unknown: the model uses profile linux"
    name = f"linux-{m.group(1)}.{m.group(2)}"
    if name in PROFILES:
        return name, f"kernel {kernel}: the model uses its version profile {name}"
    return "linux", (f"kernel {kernel}: the model has no profile {name}, so it uses "
                     "profile linux")

def host_differences(real: Trace, profiles: dict[Side, StackProfile]
                     ) -> tuple[list[str], list[str]]:
    """(every difference between the real hosts' facts and the model's profiles, one line
    each; the ones that make the comparison unfair, as problems).

    A congestion control the host could not set (or a socket that reports another one) is
    a problem: the two senders then follow different rules. Everything else (HZ, the
    ping-pong threshold, autocorking, buffer sizes, the kernel version, offloads) is listed
    so a difference in the matches can be traced to it."""
    lines: list[str] = []
    problems: list[str] = []
    one_host = real.meta.get("link") != "remote"
    facts_by_side = real.meta.get("host_facts")
    if not isinstance(facts_by_side, dict):
        return lines, problems
    emulated = real.meta.get("link") == "emulated"
    applied = real.meta.get("namespace_sysctls")
    for side in Side:
        facts = facts_by_side.get(side.value)
        profile = profiles.get(side)
        if not isinstance(facts, dict) or profile is None:
            continue
        ns = applied.get(side.value) if isinstance(applied, dict) else None
        if isinstance(ns, dict):
            # the host facts are the host's own namespace; the run set these in its own
            # namespace for this side, which is what the kernel under test used
            facts = dict(facts)
            for key, value in ns.items():
                short = str(key).rsplit(".", 1)[-1]
                if short in ("tcp_pingpong_thresh", "tcp_autocorking") and \
                        isinstance(value, str) and value.isdigit() and len(value) < 6:
                    facts[short] = int(value)
        who = f"{side.value} host"
        name = profile.name
        hz = facts.get("hz")
        if isinstance(hz, int) and hz != profile.hz:
            lines.append(f"{who}: HZ {hz}, profile {name} has HZ {profile.hz}: delayed-ACK "
                         "and probe timers are whole jiffies of another length")
        thresh = facts.get("tcp_pingpong_thresh")
        if isinstance(thresh, int) and thresh != profile.pingpong_thresh:
            lines.append(f"{who}: net.ipv4.tcp_pingpong_thresh = {thresh}, profile {name} has "
                         f"{profile.pingpong_thresh}: delayed ACKs start after a different "
                         "number of replies")
        cork = facts.get("tcp_autocorking")
        if isinstance(cork, int) and not emulated and bool(cork) != profile.autocorking:
            lines.append(f"{who}: net.ipv4.tcp_autocorking = {cork}, profile {name} has "
                         f"{int(profile.autocorking)}: small writes merge differently while "
                         "a packet waits in the device queue")
        for key, field_name in (("tcp_rmem", "rcv_buf"),):
            value = facts.get(key)
            model = getattr(profile, field_name, None)
            if isinstance(value, list) and len(value) == 3 and isinstance(value[1], int) \
                    and isinstance(model, int) and value[1] != model:
                lines.append(f"{who}: net.ipv4.{key} default {value[1]} B, profile {name} has "
                             f"{field_name} {model} B: the offered window differs")
        wmem = facts.get("tcp_wmem")
        if isinstance(wmem, list) and len(wmem) == 3 and wmem != STOCK_WMEM:
            lines.append(f"{who}: net.ipv4.tcp_wmem = {' '.join(map(str, wmem))} (the model "
                         "has no send-buffer limit: a write never blocks on it)")
        want = profile.congestion    # what realnet sets per socket (TCP_CONGESTION)
        used = facts.get("congestion", {}).get(side.value) \
            if isinstance(facts.get("congestion"), dict) else None
        why = facts.get("congestion_notes", {}).get(side.value) \
            if isinstance(facts.get("congestion_notes"), dict) else None
        if why or (isinstance(used, str) and used != want):
            problems.append(f"{who}: congestion control {used or 'unknown'} in use where "
                            f"profile {name} models {want}"
                            + (f" ({why})" if why else "")
                            + ": the senders follow different rules")
        kernel = facts.get("kernel")
        m = re.match(r"(\d+)\.(\d+)", kernel) if isinstance(kernel, str) else None
        if m and name.startswith("linux-") and name != f"linux-{m.group(1)}.{m.group(2)}":
            lines.append(f"{who}: kernel {kernel}, the model ran profile {name}")
        offl = facts.get("offloads")
        if isinstance(offl, dict) and real.meta.get("link") == "remote":
            on = [k.upper() for k in ("tso", "gro") if offl.get(k)]
            if on:
                lines.append(f"{who}: {'/'.join(on)} on {facts.get('interface')}: the NIC cuts "
                             "TSO bursts into MSS segments and GRO merges them on receipt, "
                             "so the capture may see several MSS as one (compared by bytes "
                             "on the MSS grid)")
    if one_host:    # a local run: both sides are this host; say each fact once
        seen: list[str] = []
        for line in lines:
            text = line.replace("client host:", "this host:").replace("server host:",
                                                                      "this host:")
            if text not in seen:
                seen.append(text)
        lines = seen
    return lines, problems
