"""What a script's backtick commands mean for the model: sysctls, ``defaults.sh``,
ethtool, tc and the few other commands upstream scripts run.

packetdrill hands a backtick command to ``/bin/sh -c``, so a backslash at the end of a
line continues it (the shell removes the backslash-newline pair), ``;`` and newlines
separate commands and ``#`` starts a comment. Every command is then one of:

- a setting the model follows (`Effect.tune`: `StackProfile` fields; `Effect.runner`:
  what the runner itself applies, such as the TCP options a socket offers);
- a setting the model has no use for at that value (the kernel's default, or a knob of
  something outside one connection): accepted, with a note;
- a setting whose effect the model does not have, at a value that changes the kernel's
  behaviour: the script is *unsupported*, with the reason; never silently ignored.

Values known to the kernel's defaults are this machine's (Linux 6.18, read with
``sysctl -a`` in a fresh network namespace). Standard library only; knows nothing of the
model beyond the names of profile fields.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import UserError
from .options import wscale_for


class CommandUnsupported(Exception):
    """A command whose effect the model does not have."""


class CommandError(UserError):
    """A command that cannot be read (bad input)."""


@dataclass(slots=True)
class Effect:
    """What a script's commands do: profile changes, runner settings, notes, and the
    settings accepted without their effect (a pass lists them)."""

    tune: dict[str, Any] = field(default_factory=dict)
    runner: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.tune or self.runner)


_REDIRECT = re.compile(r"(?<!\S)\d*>>?(?:&\d+|\s*(\S+))")


def shell_commands(text: str) -> list[list[str]]:
    """The simple commands in backtick text, as ``/bin/sh`` would split them: each a list
    of words. Redirections to ``/dev/null`` or another descriptor are dropped; one to a
    file stays as the two words ``>`` and the file."""
    joined = re.sub(r"\\\r?\n", "", text)          # line continuation
    commands: list[list[str]] = []
    for line in joined.splitlines():
        targets = [m.group(1) for m in _REDIRECT.finditer(line)
                   if m.group(1) and m.group(1) != "/dev/null"]
        line = _REDIRECT.sub(" ", line)
        lex = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lex.whitespace_split = True
        lex.commenters = "#"
        try:
            words = list(lex)
        except ValueError as exc:
            raise CommandError(f"cannot read the command {line.strip()[:60]!r}: {exc}") \
                from None
        current: list[str] = []
        for w in words:
            if w in (";", "&&", "||", "|", "&"):
                if current:
                    commands.append(current)
                current = []
            else:
                current.append(w)
        if current:
            commands.append(current)
        if targets and commands:
            commands[-1] += [">", *targets]
    return commands


# ---------------------------------------------------------------- sysctls
Handler = Callable[[str], tuple[dict[str, Any], str | None]]
"""A sysctl's value -> (settings: profile fields, or runner keys starting with '_'; a
caveat the pass line shows, or None). Raises CommandUnsupported."""


def _int(value: str) -> int:
    try:
        return int(value, 0)
    except ValueError:
        raise CommandUnsupported(f"{value!r} is not a number") from None


def _flag(key: str) -> Handler:
    return lambda v: ({key: _int(v) != 0}, None)


def _number(key: str, low: int = 0) -> Handler:
    return lambda v: ({key: max(low, _int(v))}, None)


def _default_only(default: int | str, what: str) -> Handler:
    """A knob of a mechanism the model does not have: only its default value is what the
    model's behaviour (the kernel's as shipped) already includes."""
    def handle(value: str) -> tuple[dict[str, Any], str | None]:
        same = (_int(value) == default) if isinstance(default, int) else value == default
        if not same:
            raise CommandUnsupported(f"{what} is not modelled (only the default, {default})")
        return {}, None
    return handle


def _any(caveat: str | None = None) -> Handler:
    """A knob with no effect on the model's connection whatever its value (or, with a
    caveat, one the pass line names)."""
    return lambda v: ({}, caveat)


def _congestion(value: str) -> tuple[dict[str, Any], str | None]:
    if value not in ("bbr", "cubic", "reno"):
        raise CommandUnsupported(f"congestion control {value!r} is not modelled")
    return {"congestion": value}, None


def _triple(value: str) -> tuple[int, int, int]:
    parts = value.split()
    if len(parts) != 3:
        raise CommandUnsupported(f"{value!r} is not three numbers")
    a, b, c = (_int(p) for p in parts)
    return a, b, c


def _rmem(value: str) -> tuple[dict[str, Any], str | None]:
    """tcp_rmem: its maximum sets the window scale offered (tcp_select_initial_window) and
    bounds the window's growth; its default is the initial receive buffer."""
    _, default, top = _triple(value)
    caveat = None if default == 131072 else f"tcp_rmem initial buffer {default}"
    return {"_rmem_max": top, "rcv_buf_max": top}, caveat


def _wmem(value: str) -> tuple[dict[str, Any], str | None]:
    _, default, _top = _triple(value)
    return {}, None if default == 16384 else f"send buffer tcp_wmem {default}"


def _early_retrans(value: str) -> tuple[dict[str, Any], str | None]:
    # tcp_schedule_loss_probe: only 3 and 4 enable tail loss probes (early retransmit
    # itself is gone since RACK)
    return {"tail_loss_probe": _int(value) in (3, 4)}, None


def _ecn(value: str) -> tuple[dict[str, Any], str | None]:
    # 0: never; 2: only answer a peer's ECN SYN (which is unsupported where it appears)
    if _int(value) not in (0, 2):
        raise CommandUnsupported("ECN on our own SYN is not modelled")
    return {}, None


SYSCTLS: dict[str, Handler] = {
    # followed by the model (StackProfile fields)
    "tcp_autocorking": _flag("autocorking"),
    "tcp_pingpong_thresh": _number("pingpong_thresh"),
    "tcp_slow_start_after_idle": _flag("slow_start_after_idle"),
    "tcp_congestion_control": _congestion,
    "tcp_min_tso_segs": _number("min_tso_segs", 1),
    "tcp_early_retrans": _early_retrans,
    # followed by the runner (the options a socket offers, its window scale)
    "tcp_timestamps": _flag("_timestamps"),
    "tcp_sack": _flag("_sack"),
    "tcp_window_scaling": _flag("_window_scaling"),
    "tcp_rmem": _rmem,
    "core.rmem_max": _number("_core_rmem_max"),
    # no effect on one connection the model plays, whatever the value
    "tcp_fastopen": _any(), "tcp_fastopen_key": _any(),   # only with the TFO option
    "tcp_syncookies": _any(),                             # only under a SYN flood
    "tcp_no_metrics_save": _any(),                        # across connections
    "tcp_syn_retries": _any(), "tcp_synack_retries": _any(),  # minutes of handshake loss
    "tcp_dsack": _any(),             # D-SACK blocks: the model sends no SACK blocks
    "tcp_fack": _any(),              # gone from the kernel (no effect since 4.18)
    "tcp_ecn_option": _any(),        # AccECN only
    "tcp_ecn": _ecn,
    "tcp_tso_win_divisor": lambda v: ({}, None if _int(v) == 3 else
                                      f"TSO deferral (tcp_tso_win_divisor={_int(v)})"),
    "tcp_wmem": _wmem,
    # mechanisms the model does not have: only their defaults
    "tcp_frto": _default_only(2, "F-RTO other than tcp_frto=2"),
    "tcp_reordering": _default_only(3, "a reordering threshold other than 3"),
    "tcp_recovery": _default_only(1, "RACK settings other than tcp_recovery=1"),
    "tcp_pacing_ss_ratio": _default_only(200, "a slow-start pacing ratio other than 200"),
    "tcp_pacing_ca_ratio": _default_only(120, "a pacing ratio other than 120"),
    "tcp_notsent_lowat": _default_only(4294967295, "TCP_NOTSENT_LOWAT"),
    "tcp_mtu_probing": _default_only(0, "path MTU probing"),
    "tcp_tso_rtt_log": _default_only(9, "tcp_tso_rtt_log other than 9"),
    "tcp_limit_output_bytes": _default_only(4194304, "TCP Small Queues limits"),
    "tcp_moderate_rcvbuf": _default_only(1, "turning receive-buffer autotuning off"),
}

# google/packetdrill's gtests/net/common/defaults.sh: the settings it makes (their
# values, not the file), and the commands it runs besides, which are harmless here
DEFAULTS_SH: tuple[tuple[str, str], ...] = (
    ("tcp_rmem", f"4096 540000 {15 * 1024 * 1024}"), ("tcp_wmem", "4096 262144 4194304"),
    ("tcp_timestamps", "1"), ("tcp_syn_retries", "5"), ("tcp_synack_retries", "5"),
    ("tcp_frto", "2"), ("tcp_sack", "1"), ("tcp_dsack", "1"), ("tcp_fack", "0"),
    ("tcp_reordering", "3"), ("tcp_congestion_control", "cubic"),
    ("tcp_slow_start_after_idle", "0"), ("tcp_early_retrans", "4"), ("tcp_recovery", "1"),
    ("tcp_tso_win_divisor", "3"), ("tcp_ecn", "0"), ("tcp_ecn_option", "2"),
    ("tcp_pacing_ss_ratio", "200"), ("tcp_pacing_ca_ratio", "120"),
    ("tcp_notsent_lowat", "4294967295"), ("tcp_fastopen", "0x70403"),
    ("tcp_fastopen_key", "a1a1a1a1-b2b2b2b2-c3c3c3c3-d4d4d4d4"), ("tcp_syncookies", "1"),
)

_SYSCTL_NAME = re.compile(r"(?:/proc/sys/)?net[./](ipv4|core)[./](\w+)")


def _sysctl(name: str, value: str, where: str, effect: Effect) -> None:
    handler = SYSCTLS.get(name)
    if handler is None:
        raise CommandUnsupported(f"{where}: sysctl {name} is not modelled")
    try:
        settings, caveat = handler(value)
    except CommandUnsupported as exc:
        raise CommandUnsupported(f"{where}: sysctl {name}={value}: {exc}") from None
    for key, v in settings.items():
        if key.startswith("_"):
            effect.runner[key[1:]] = v
        else:
            effect.tune[key] = v
    if caveat:
        effect.caveats.append(caveat)
    elif not settings:
        effect.notes.append(f"{where}: sysctl {name}={value} has no effect on the model")


def _sysctl_args(words: list[str], where: str, effect: Effect) -> None:
    """``sysctl [-q] [-w] net.ipv4.x=v …`` or ``set_sysctls.py /proc/sys/net/ipv4/x=v …``."""
    for word in words[1:]:
        if word.startswith("-"):
            continue
        name, eq, value = word.partition("=")
        m = _SYSCTL_NAME.fullmatch(name)
        if not eq or m is None:
            raise CommandUnsupported(f"{where}: sysctl {word!r} is not modelled")
        key = m.group(2) if m.group(1) == "ipv4" else f"core.{m.group(2)}"
        _sysctl(key, value.strip(), where, effect)


def _tc(words: list[str], where: str, effect: Effect) -> None:
    text = " ".join(words)
    if re.fullmatch(r"tc qdisc (?:add|replace) dev tun0 root pfifo", text):
        effect.notes.append(f"{where}: {text}: a FIFO queue, as the model's link")
    elif re.fullmatch(r"tc qdisc (?:del|delete) dev tun0 root", text):
        effect.notes.append(f"{where}: {text}: back to the default queue")
    elif re.fullmatch(r"tc qdisc (?:add|replace) dev tun0 root pfifo limit 0", text):
        raise CommandUnsupported(f"{where}: a queue that drops every packet (local "
                                 "congestion) is not modelled")
    elif re.fullmatch(r"tc qdisc (?:add|replace) dev tun0 root fq\b.*", text):
        raise CommandUnsupported(f"{where}: the fq qdisc's pacing is not modelled")
    else:
        raise CommandUnsupported(f"{where}: {text[:60]}: traffic control is not modelled")


def _ethtool(words: list[str], where: str, effect: Effect) -> None:
    text = " ".join(words)
    m = re.fullmatch(r"ethtool -K tun0((?: (?:tso|gso) (?:on|off))+)", text)
    if m is None:
        raise CommandUnsupported(f"{where}: {text[:60]}: this device setting is not modelled")
    settings = dict(re.findall(r"(tso|gso) (on|off)", m.group(1)))
    # a TSO skb reaches packetdrill whole only with both on; off, the kernel (and the
    # model) cut bursts into MSS-sized packets
    effect.runner["gso_wire"] = "off" not in settings.values()
    effect.notes.append(f"{where}: {text}: TSO/GSO on the device follows it")


_HYSTART = re.compile(r"/sys/module/tcp_cubic/parameters/(\w+)")
_CUBIC_DEFAULTS = {"hystart_detect": "3", "hystart_low_window": "16", "hystart_ack_delta_us":
                   "2000", "fast_convergence": "1", "beta": "717", "tcp_friendliness": "1"}


def _echo(words: list[str], where: str, effect: Effect) -> None:
    """``echo V > /sys/module/tcp_cubic/parameters/P``: CUBIC's module parameters."""
    if len(words) == 4 and words[2] == ">" and (m := _HYSTART.fullmatch(words[3])):
        param, value = m.group(1), words[1]
        if param == "hystart":
            effect.tune["hystart"] = value != "0"
            return
        if _CUBIC_DEFAULTS.get(param) == value:
            effect.notes.append(f"{where}: tcp_cubic {param}={value} is the default")
            return
        raise CommandUnsupported(f"{where}: tcp_cubic parameter {param}={value} is not "
                                 "modelled")
    if ">" not in words:
        effect.notes.append(f"{where}: {' '.join(words)[:60]}: prints only")
        return
    raise CommandUnsupported(f"{where}: {' '.join(words)[:60]}: not modelled")


_READ_ONLY = {"grep", "cat", "ss", "nstat", "sleep", "true", "ls"}
_FILES = {"/bin/rm", "rm", "/bin/dd", "dd", "touch", "/bin/touch"}


def apply(text: str, where: str, effect: Effect) -> None:
    """Add what the backtick ``text`` does to ``effect``; `CommandUnsupported` names the
    first command the model cannot follow, `CommandError` one that cannot be read."""
    for words in shell_commands(text):
        cmd = words[0]
        if cmd.endswith("defaults.sh"):
            for name, value in DEFAULTS_SH:
                _sysctl(name, value, f"{where} (defaults.sh)", effect)
            effect.notes.append(f"{where}: defaults.sh: its settings applied as above; its "
                                "pfifo queue and metrics flush change nothing here")
        elif cmd == "sysctl" or cmd.endswith("set_sysctls.py"):
            _sysctl_args(words, where, effect)
        elif cmd == "tc":
            _tc(words, where, effect)
        elif cmd == "ethtool":
            _ethtool(words, where, effect)
        elif cmd == "echo":
            _echo(words, where, effect)
        elif cmd == "ip" and words[1:4] == ["tcp_metrics", "flush", "all"]:
            effect.notes.append(f"{where}: ip tcp_metrics flush: the model keeps no metrics")
        elif cmd in _READ_ONLY or cmd in _FILES:
            effect.notes.append(f"{where}: {' '.join(words)[:60]}: changes nothing the "
                                "model plays")
        else:
            raise CommandUnsupported(f"{where}: the command {' '.join(words)[:60]!r} is not "
                                     "modelled")


def wscale(effect_runner: dict[str, Any], default_rmem_max: int,
           default_core_rmem_max: int) -> int:
    """The window scale a socket offers after these settings."""
    return wscale_for(effect_runner.get("rmem_max", default_rmem_max),
                      effect_runner.get("core_rmem_max", default_core_rmem_max))
