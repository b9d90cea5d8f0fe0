"""Scenario files: TOML in, a validated `Scenario` out.

Owns: the scenario format's tables and keys (docs/scenarios.md), ``--set`` overrides,
``[params]`` (through `nagle_sim.scenario.params`), every check of a value with its
one-line error naming the file, line and key, and the bounds of a document (size, nesting).
Scripts are parsed by `nagle_sim.scenario.script`; files read by `.files`.
"""

from __future__ import annotations

import dataclasses
import math
import re
import tomllib
from pathlib import Path
from typing import Any, Final

from ..model.config import (
    CONGESTION_CONTROLS,
    PROFILES,
    TUNABLE,
    AckStyle,
    SocketOptions,
    StackProfile,
    timing_option_error,
)
from ..model.events import Micros, Side
from .errors import ScenarioError, clip, shown
from .files import MAX_FILE_BYTES, read_text
from .params import ParamError, apply_params
from .script import DURATION, MAX_NESTING, UNIT_US, parse_script
from .types import (
    FAULT_KINDS,
    Close,
    GetOpt,
    Link,
    LinkFault,
    Repeat,
    Scenario,
    SetOpt,
    SetTiming,
    SideSpec,
    Sleep,
    Statement,
    Write,
    describe,
    walk,
)

_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0/C1 control characters other than tab and newline."""


# ---------------------------------------------------------------- TOML loading
_TUNE_MIN: Final = {"syscall_us": 0, "tx_segment_us": 0, "host_latency_us": 0, "wakeup_us": 0,
             "jiffy_phase_us": -1, "timeout_min_j": 0, "tso_rtt_log": 0}
"""Smallest value of a tunable number (1 unless listed: sizes, rates and counts of 0 make
no sense and would divide by zero)."""

_TOP_KEYS: Final = {"title", "description", "link", "client", "server", "expect", "lesson"}
_LINK_KEYS: Final = {"delay_ms", "to_server_delay_ms", "to_client_delay_ms", "mss",
                     "tx_complete_us", "gso", "rate", "queue", "quickack", "drop", "hold"}
_FAULT: Final = re.compile(
    r"^to_(?P<dir>server|client)\s+(?P<kind>[a-z]+)\s+(?P<first>[0-9]{1,7})"
    r"(?:\s*-\s*(?P<last>[0-9]{1,7}))?(?:\s+(?P<extra>\S+))?$")
MAX_LINK_FAULTS: Final = 64
MAX_HOLD_US: Final = 60_000_000
_RATE: Final = re.compile(
    r"^(?P<num>[0-9]{1,9}(?:\.[0-9]{1,6})?)\s*(?P<unit>bit|kbit|mbit|gbit)$")
_RATE_UNIT: Final = {"bit": 1, "kbit": 1_000, "mbit": 1_000_000, "gbit": 1_000_000_000}
MAX_LINK_QUEUE: Final = 100_000
_SIDE_KEYS: Final = {"profile", "congestion", "nodelay", "cork", "quickack", "script", "tune"}


def _line_of_key(text: str, table: str, key: str) -> int:
    """Best-effort line number of ``key`` inside ``[table]`` (tomllib gives none)."""
    lines = text.splitlines()
    in_table = table == ""
    for i, raw in enumerate(lines, start=1):
        stripped = raw.strip()
        if stripped.startswith("["):
            in_table = stripped.strip("[] ").split("]")[0].strip() == table
            continue
        if in_table and re.match(rf"{re.escape(key)}\s*=", stripped):
            return i
        if table and re.match(rf"{re.escape(table)}\.{re.escape(key)}\s*=", stripped):
            return i
    return 0


class _Loader:
    def __init__(self, text: str, where: str) -> None:
        self.text = text
        self.where = where

    def fail(self, table: str, key: str, message: str) -> ScenarioError:
        line = _line_of_key(self.text, table, key) if key else 0
        dotted = f"{table}.{key}" if table and key else (key or table)
        loc = f"{self.where}:{line}" if line else self.where
        return ScenarioError(f"{loc}: {dotted}: {message}")

    def tune_fail(self, side: str, key: str, message: str) -> ScenarioError:
        """`fail` for a side's tune key, also when the table is inline (``tune = { … }``
        on the side's `tune` line)."""
        line = (_line_of_key(self.text, f"{side}.tune", key)
                or _line_of_key(self.text, side, "tune"))
        loc = f"{self.where}:{line}" if line else self.where
        return ScenarioError(f"{loc}: {side}.tune.{key}: {message}")

    def number(self, table: str, data: dict[str, Any], key: str, default: float,
               minimum: float = 0.0) -> float:
        value: Any = data.get(key, default)
        # type(), not isinstance: mypy would narrow to `float` (it absorbs int), and the
        # compiled build would then unbox a 400-digit int as a C double
        if type(value) not in (int, float):
            raise self.fail(table, key, f"expected a number, got {shown(value)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(table, key, f"expected a finite number, got {shown(value)}")
        if abs(value) > 10**12:    # compared as int: a 400-digit int overflows a float
            raise self.fail(table, key, f"expected a number of at most 10^12, got "
                                        f"{shown(value)}")
        if value < minimum:
            raise self.fail(table, key, f"must be ≥ {minimum:g}, got {value}")
        return float(value)

    def boolean(self, table: str, data: dict[str, Any], key: str, default: bool) -> bool:
        value = data.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(table, key, f"expected true or false, got {shown(value)}")
        return value

    def unknown(self, table: str, data: dict[str, Any], allowed: set[str]) -> None:
        for key in data:
            if key not in allowed:
                raise self.fail(table, clip(str(key)),
                                f"unknown key (allowed: {', '.join(sorted(allowed))})")

    def link(self, data: Any) -> Link:
        if not isinstance(data, dict):
            raise self.fail("", "link", "must be a table")
        self.unknown("link", data, _LINK_KEYS)
        both = self.number("link", data, "delay_ms", 0.0)
        to_server = self.number("link", data, "to_server_delay_ms", both)
        to_client = self.number("link", data, "to_client_delay_ms", both)
        for key, value in (("delay_ms", both), ("to_server_delay_ms", to_server),
                           ("to_client_delay_ms", to_client)):
            if value > 600_000:
                raise self.fail("link", key, f"{value} ms is more than 10 minutes")
        mss = self.number("link", data, "mss", 1448, minimum=88)
        if mss != int(mss) or mss > 65495:
            raise self.fail("link", "mss", f"must be a whole number from 88 to 65495, got {mss}")
        tx = self.number("link", data, "tx_complete_us", 0)
        # Zero delay means loopback, which passes GSO packets whole; a delayed (or
        # rate-limited) link is emulated through TUN devices, which cut them into MSS
        # segments.
        rate = self.rate(data.get("rate", "0bit"))
        faults = self.faults(data, "drop") + self.faults(data, "hold")
        gso = self.boolean("link", data, "gso", not (to_server or to_client or rate or faults))
        queue = self.number("link", data, "queue", 1000, minimum=1)
        if queue != int(queue) or queue > MAX_LINK_QUEUE:
            raise self.fail("link", "queue", f"must be a whole number of packets from 1 to "
                                             f"{MAX_LINK_QUEUE:,}, got {shown(data['queue'])}")
        if "queue" in data and not rate:
            raise self.fail("link", "queue", "a queue limit needs a rate (e.g. rate = \"1mbit\")")
        quickack = self.boolean("link", data, "quickack", False)
        return Link(to_server_delay=Micros(round(to_server * 1000)),
                    to_client_delay=Micros(round(to_client * 1000)), mss=int(mss),
                    tx_complete=Micros(round(tx)), gso=gso, rate_bps=rate, queue=int(queue),
                    quickack=quickack, faults=faults)

    def faults(self, data: dict[str, Any], key: str) -> tuple[LinkFault, ...]:
        """`drop = ["to_server data 3"]` / `hold = ["to_client data 2-3 5ms"]`."""
        entries = data.get(key, [])
        example = "\"to_server data 3\"" if key == "drop" else "\"to_client data 2 5ms\""
        if not isinstance(entries, list) or len(entries) > MAX_LINK_FAULTS:
            raise self.fail("link", key, f"expected a list of at most {MAX_LINK_FAULTS} "
                                         f"entries such as {example}, got {shown(entries)}")
        out = []
        for entry in entries:
            m = _FAULT.match(entry.strip()) if isinstance(entry, str) else None
            why = ""
            if m is None:
                why = ("expected \"to_server|to_client data|ack|fin N\" or N-M"
                       + (" and a delay" if key == "hold" else "") + f", e.g. {example}")
            elif m.group("kind") not in FAULT_KINDS:
                why = f"unknown kind {m.group('kind')!r} (known: {', '.join(FAULT_KINDS)})"
            if m is None or why:
                raise self.fail("link", key, f"{shown(entry)}: {why}")
            first = int(m.group("first"))
            last = int(m.group("last") or first)
            if not 1 <= first <= last:
                raise self.fail("link", key, f"{shown(entry)}: segments are counted from 1, "
                                             "and a range N-M needs N ≤ M")
            extra = None
            if key == "hold":
                dur = DURATION.match(m.group("extra") or "")
                if dur is None:
                    raise self.fail("link", key, f"{shown(entry)}: a hold needs how long, "
                                                 f"e.g. {example}")
                extra = round(float(dur.group("num")) * UNIT_US[dur.group("unit")])
                if not 0 < extra <= MAX_HOLD_US:
                    raise self.fail("link", key, f"{shown(entry)}: a hold must be more than 0 "
                                                 "and at most 60 s")
            elif m.group("extra"):
                raise self.fail("link", key, f"{shown(entry)}: a drop takes no delay")
            out.append(LinkFault(Side(m.group("dir")), m.group("kind"), first, last,
                                 None if extra is None else Micros(extra)))
        return tuple(out)

    def rate(self, value: Any) -> int:
        """A link rate: "1mbit", "256kbit", "10 gbit" or a number of bits per second."""
        if isinstance(value, int) and not isinstance(value, bool):
            bps = value
        elif isinstance(value, str) and (m := _RATE.match(value.strip().lower())):
            bps = round(float(m.group("num")) * _RATE_UNIT[m.group("unit")])
        else:
            raise self.fail("link", "rate", f"expected a rate such as \"1mbit\", \"256kbit\" "
                                            f"or bits per second, got {shown(value)}")
        if bps and not 1000 <= bps <= 100_000_000_000:
            raise self.fail("link", "rate", f"must be from 1kbit to 100gbit, got {shown(value)}")
        return bps

    def side(self, name: str, data: Any) -> SideSpec:
        if not isinstance(data, dict):
            raise self.fail("", name, "must be a table")
        self.unknown(name, data, _SIDE_KEYS)
        profile_name = data.get("profile", "linux")
        if not isinstance(profile_name, str) or profile_name not in PROFILES:
            raise self.fail(name, "profile", f"unknown profile {shown(profile_name)} "
                                             f"(known: {', '.join(PROFILES)})")
        profile = PROFILES[profile_name]
        tune = data.get("tune", {})
        if not isinstance(tune, dict):
            raise self.fail(name, "tune", "must be a table of profile fields")
        changes: dict[str, Any] = {}
        for key, value in tune.items():
            if key not in TUNABLE:
                raise self.fail(f"{name}.tune", clip(str(key)),
                                "not a tunable profile field (see docs/scenarios.md)")
            current = getattr(profile, key)
            if isinstance(current, bool):
                if not isinstance(value, bool):
                    raise self.fail(f"{name}.tune", key,
                                    f"expected true or false, got {shown(value)}")
            elif isinstance(value, bool) or not isinstance(value, int):
                raise self.fail(f"{name}.tune", key,
                                f"expected a whole number, got {shown(value)}")
            elif not _TUNE_MIN.get(key, 1) <= value <= 10**12:
                raise self.fail(f"{name}.tune", key, f"must be from {_TUNE_MIN.get(key, 1)} to "
                                f"10^12, got {shown(value)}")
            if key == "hz" and not 1 <= value <= 1_000_000:
                raise self.fail(f"{name}.tune", key, "HZ must be between 1 and 1000000")
            if key in ("max_quickacks", "pingpong_thresh") and not 1 <= value <= 255:
                raise self.fail(f"{name}.tune", key, "must be between 1 and 255")
            if key == "pingpong_thresh" and not profile.pingpong_sysctl:
                raise self.tune_fail(name, key, f"profile {profile.name!r} has no "
                                     "net.ipv4.tcp_pingpong_thresh: the sysctl came with "
                                     "562b1fdf061b (October 2023, Linux 6.7); before it the "
                                     f"threshold is fixed at {profile.pingpong_thresh}")
            changes[key] = value
        congestion = data.get("congestion", profile.congestion)
        if congestion not in CONGESTION_CONTROLS:
            raise self.fail(name, "congestion", f"unknown congestion control "
                            f"{shown(congestion)} (known: {', '.join(CONGESTION_CONTROLS)})")
        if congestion != profile.congestion:
            changes["congestion"] = congestion
        if changes:
            profile = profile.with_overrides(**changes)
        nodelay = self.boolean(name, data, "nodelay", False)
        cork = self.boolean(name, data, "cork", False)
        quickack = data.get("quickack")
        if quickack == "default":        # lets `--set side.quickack=default` unset it
            quickack = None
        if quickack is not None and not isinstance(quickack, bool):
            raise self.fail(name, "quickack", f"expected true, false or \"default\", "
                                              f"got {shown(quickack)}")
        if cork and not profile.supports_cork:
            raise self.fail(name, "cork", f"profile {profile.name!r} has no TCP_CORK")
        if quickack is not None and not profile.supports_quickack:
            raise self.fail(name, "quickack", f"profile {profile.name!r} has no TCP_QUICKACK")
        script_text = data.get("script", "")
        if not isinstance(script_text, str):
            raise self.fail(name, "script", "must be a string")
        first = _line_of_key(self.text, name, "script")
        if first and re.search(r"script\s*=\s*(\"\"\"|''')\s*$",
                               self.text.splitlines()[first - 1]):
            first += 1
        script = parse_script(script_text, self.where, first or 1)
        self._check_profile_support(name, profile, script)
        self._check_close(name, script)
        return SideSpec(profile=profile, options=SocketOptions(
            nodelay=nodelay, cork=cork, quickack=quickack), script=script,
            script_line=first, tune=changes)

    def _check_close(self, name: str, body: tuple[Statement, ...]) -> None:
        """Only `sleep` may follow `close` (in execution order, loops included). A loop
        body runs a second time, already closed, when its first pass closes the socket;
        further passes add nothing. Iterative, like `nagle_sim.scenario.steps.steps`."""
        closed = False
        # A frame: [statements, next index, closed on entry, pass (1 or 2)]; the loop a
        # frame belongs to is the statement at its parent's index.
        frames: list[list[Any]] = [[body, 0, False, 1]]
        while frames:
            frame = frames[-1]
            stmts, i = frame[0], frame[1]
            if i == len(stmts):
                frames.pop()
                if not frames:
                    return
                parent = frames[-1]
                loop = parent[0][parent[1]]
                if frame[3] == 1 and loop.count > 1 and closed and not frame[2]:
                    frames.append([loop.body, 0, True, 2])
                else:
                    parent[1] += 1
                continue
            stmt = stmts[i]
            if isinstance(stmt, Repeat):
                if stmt.count:
                    frames.append([stmt.body, 0, closed, 1])
                    continue
            elif closed and not isinstance(stmt, Sleep):
                raise ScenarioError(f"{self.where}:{stmt.line}: {name}: "
                                    f"'{describe(stmt)[0]}' after 'close'")
            elif isinstance(stmt, Close):
                closed = True
            frame[1] = i + 1

    def _check_profile_support(self, name: str, profile: StackProfile,
                               script: tuple[Statement, ...]) -> None:
        for stmt in walk(script):
            if isinstance(stmt, SetOpt | GetOpt):
                if stmt.option == "cork" and not profile.supports_cork:
                    raise ScenarioError(f"{self.where}:{stmt.line}: {name} profile "
                                        f"{profile.name!r} has no TCP_CORK")
                if stmt.option == "quickack" and not profile.supports_quickack:
                    raise ScenarioError(f"{self.where}:{stmt.line}: {name} profile "
                                        f"{profile.name!r} has no TCP_QUICKACK")
            elif isinstance(stmt, SetTiming):
                why = timing_option_error(profile, stmt.option, stmt.duration)
                if why:
                    raise ScenarioError(f"{self.where}:{stmt.line}: {name}: {why}")
            elif isinstance(stmt, Write) and stmt.more and not profile.supports_cork:
                raise ScenarioError(f"{self.where}:{stmt.line}: {name} profile "
                                    f"{profile.name!r} has no MSG_MORE")


def _apply_overrides(doc: dict[str, Any], overrides: list[str], where: str) -> None:
    for item in overrides:
        said = f"--set {clip(item)!r}"
        if "=" not in item:
            raise ScenarioError(f"{said}: use KEY=VALUE, e.g. client.nodelay=true")
        if len(item) > MAX_FILE_BYTES:
            raise ScenarioError(f"{said}: {len(item):,} characters (limit {MAX_FILE_BYTES:,})")
        key, _, value_text = item.partition("=")
        path = key.strip().split(".")
        if not all(path):
            raise ScenarioError(f"{said}: bad key {clip(key)!r}")
        if len(path) > MAX_NESTING:
            raise ScenarioError(f"{said}: key nests more than {MAX_NESTING} tables deep")
        try:
            value = _parse_toml(f"v = {value_text.strip()}", said)["v"]
        except ScenarioError:
            value = value_text.strip()    # not a TOML value: take the text as a string
        node = doc
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ScenarioError(f"{said}: {clip(part)!r} is not a table")
            node = child
        node[path[-1]] = value


def _parse_toml(text: str, where: str) -> dict[str, Any]:
    """tomllib's document, or a one-line `ScenarioError` for anything it refuses (bad
    syntax, an integer over Python's 4300-digit limit, nesting too deep to parse) or for
    values nested deeper than `MAX_NESTING`."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        if m:
            msg = msg[: m.start()].strip()
            raise ScenarioError(f"{where}:{m.group(1)}: invalid TOML: {msg} "
                                f"(column {m.group(2)})") from None
        raise ScenarioError(f"{where}: invalid TOML: {msg}") from None
    except ValueError as exc:    # int() past sys.get_int_max_str_digits()
        raise ScenarioError(f"{where}: invalid TOML: {clip(str(exc), 80)}") from None
    except RecursionError:
        raise ScenarioError(f"{where}: invalid TOML: values nest more than "
                            f"{MAX_NESTING} deep") from None
    if nesting_depth(doc) > MAX_NESTING:
        raise ScenarioError(f"{where}: invalid TOML: values nest more than "
                            f"{MAX_NESTING} deep")
    return doc


def nesting_depth(value: Any, stop: int = MAX_NESTING) -> int:
    """How deep lists and dicts nest in ``value`` (a scalar is 0), counted without
    recursion; stops looking once past ``stop``."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        node, depth = pending.pop()
        if isinstance(node, dict):
            node = list(node.values())
        if isinstance(node, list):
            deepest = max(deepest, depth + 1)
            if deepest > stop:
                return deepest
            pending.extend((child, depth + 1) for child in node
                           if isinstance(child, list | dict))
    return deepest


def loads(text: str, where: str = "<string>", overrides: list[str] | None = None) -> Scenario:
    """Parse scenario TOML text; raise `ScenarioError` with a one-line message. Text over
    `MAX_FILE_BYTES` is refused before parsing."""
    if len(text) > MAX_FILE_BYTES:
        raise ScenarioError(f"{where}: {len(text):,} characters is too big for a scenario "
                            f"(limit {MAX_FILE_BYTES:,})")
    doc = _parse_toml(text, where)
    # [params] as the file declares it: --param/--set params.… must name one of these
    declared = doc.get("params")
    declared = dict(declared) if isinstance(declared, dict) else declared
    if overrides:
        _apply_overrides(doc, overrides, where)
    try:
        apply_params(doc, text, where, declared)
    except ParamError as exc:
        raise ScenarioError(str(exc)) from None
    loader = _Loader(text, where)
    loader.unknown("", doc, _TOP_KEYS)
    title = doc.get("title", Path(where).stem if where != "<string>" else "untitled")
    if not isinstance(title, str):
        raise loader.fail("", "title", "must be a string")
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise loader.fail("", "description", "must be a string")
    for key, value in (("title", title), ("description", description)):
        if bad := _CONTROL.search(value):
            # an escape sequence would reach the terminal and break SVG exports
            raise loader.fail("", key, f"holds the control character {repr(bad.group())[1:-1]}")
    expect = doc.get("expect", [])
    if isinstance(expect, dict):
        expect = [expect]
    if not isinstance(expect, list):
        raise loader.fail("", "expect", "must be a list of claims")
    link = loader.link(doc.get("link", {}))
    client = loader.side("client", doc.get("client", {}))
    server = loader.side("server", doc.get("server", {}))
    if link.quickack:
        for name, spec in (("client", client), ("server", server)):
            if spec.profile.ack_style is not AckStyle.LINUX:
                # RTAX_QUICKACK is a Linux route metric; a classic receiver has no such knob
                raise loader.fail("link", "quickack", f"a Linux route metric: the {name}'s "
                                  f"profile {spec.profile.name!r} has no route quick-ACK")
        # the route metric is the kernel's, whatever the profile: both hosts get it
        client, server = (dataclasses.replace(
            spec, profile=spec.profile.with_overrides(route_quickack=True))
            for spec in (client, server))
    return Scenario(
        title=title, description=description, link=link, client=client, server=server,
        source=where, expect=tuple(expect), raw=doc)


def load(path: str | Path, overrides: list[str] | None = None) -> Scenario:
    """Load a scenario file; every failure is a `ScenarioError` naming the file."""
    return loads(read_text(path), str(path), overrides)
