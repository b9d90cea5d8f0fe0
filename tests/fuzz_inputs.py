"""Hostile-input generators and the oracle shared by tests/test_fuzz.py (Hypothesis drives
the ``random.Random`` each generator takes) and benchmarks/fuzz_inputs.py (a seeded one).

Each target is ``(name, make(rng) -> text, check(text))``. ``check`` feeds the text to one
input path (scenario loader, script parser, ``--set``, trace reader); `one_line_or_ok`
says what went wrong, if anything: the only acceptable outcomes are success or a
`ScenarioError` / `TraceError` whose message is one non-empty line of bounded length.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

from nagle_sim.export import ExportError
from nagle_sim.scenario import ScenarioError, loads, parse_script
from nagle_sim.trace import Trace, TraceError

ROOT = Path(__file__).resolve().parent.parent
SEED_SCENARIOS = [p.read_text("utf-8") for p in sorted(ROOT.glob("lessons/*/scenario.toml"))]
SEED_SCENARIOS += [p.read_text("utf-8") for p in sorted((ROOT / "tests/data").glob("*.toml"))]
S1 = (ROOT / "tests/data/s1_write_write_read.toml").read_text("utf-8")

SEED_TRACE = json.dumps({
    "format": "nagle-sim-trace/1", "source": "sim", "title": "seed", "outcome": "ok",
    "message": "", "meta": {"mss": 1448, "scenario": "s.toml"},
    "segments": [
        {"t_ms": 0.0, "from": "client", "seq": 0, "ack": 0, "len": 0, "flags": "S",
         "win": 65535, "arrive_ms": 0.01},
        {"t_ms": 0.02, "from": "server", "seq": 0, "ack": 1, "len": 0, "flags": "SA"},
        {"t_ms": 0.05, "from": "client", "seq": 1, "ack": 1, "len": 6, "flags": "PA",
         "win": 512, "arrive_ms": 0.06, "why": "sent at once", "code": "SENT"}],
    "ops": [
        {"side": "client", "op": "write", "arg": "6", "start_ms": 0.04, "end_ms": 0.05,
         "line": 3, "iter": [0], "loop": 1},
        {"side": "server", "op": "read", "arg": "6", "start_ms": 0.03, "end_ms": None,
         "result": "6"}],
    "events": [
        {"t_ms": 0.05, "side": "client", "kind": "held", "code": "NAGLE",
         "reason": "Nagle holds", "detail": "7 B", "timer": "delack", "deadline_ms": 40.0,
         "data": {"queued": 7}}],
}, indent=1)

HOSTILE = [
    "[/]", "[/x]", "[bold]", "\\", '"', "'", '"""', "'''", "=", "==", "\n", "\r\n", "#", "{",
    "}", ";", "[", "]", "[[", "]]", ",", ".", "9" * 20, "9" * 400, "9" * 5000, "-1", "0",
    "1e400", "-1e400", "nan", "inf", "-0", "0x10", "1_000", "true", "false", "null", "[]",
    "{}", "é", "\u202e", "\x00", "\x7f", "\ufeff", "😀", " ", "\t", "repeat 1000000000 {",
    "repeat 3 {", "repeat 0 {", "write 1", "write 0", "write 1 more", "writev 1 2 3",
    "read 5", "sleep 1e9s", "sleep 15ms", "sleep 99999999999s", "set cork on",
    "set nodelay off", "get quickack", "close", "[client]", "[server]", "[link]",
    "[client.tune]", "script = ", "profile = \"rfc1122\"", "delay_ms = ", "mss = ",
    "hz = ", "[[expect]]", '"t_ms": ', '"from": ', '"iter": ["a"]', '"len": 1e30',
]
SET_KEYS = ["client.nodelay", "client.cork", "client.quickack", "server.profile", "link.mss",
            "link.delay_ms", "client.script", "client.tune.hz", "title", "expect", "a.b.c",
            "", ".", "client..x", "[/]", "client.tune", "link", "x" * 100]


def _snippet(rng: random.Random) -> str:
    if rng.random() < 0.15:   # a whole run of one hostile token: depth, length
        return rng.choice(["[", "{", "repeat 1 {\n", "}", "a", "9", "\n"]) * rng.choice(
            [10, 70, 300, 3000])
    return rng.choice(HOSTILE)


def mutate(text: str, rng: random.Random, rounds: int | None = None) -> str:
    """``text`` with a few random insertions, deletions, duplications and swaps."""
    for _ in range(rounds if rounds is not None else rng.randint(1, 6)):
        if not text:
            text = _snippet(rng)
            continue
        i = rng.randrange(len(text) + 1)
        j = min(len(text), i + rng.randint(0, 40))
        choice = rng.random()
        if choice < 0.45:
            text = text[:i] + _snippet(rng) + text[i:]
        elif choice < 0.65:
            text = text[:i] + text[j:]
        elif choice < 0.8:
            text = text[:i] + text[i:j] * rng.randint(2, 5) + text[j:]
        else:
            text = text[:i] + _snippet(rng) + text[j:]
    return text


def make_scenario(rng: random.Random) -> str:
    return mutate(rng.choice(SEED_SCENARIOS), rng)


def make_script(rng: random.Random) -> str:
    words = [rng.choice(HOSTILE) if rng.random() < 0.3 else rng.choice(
        ["write 7", "read 7", "repeat 2 {", "}", "sleep 1ms", "set cork off", "\n", ";",
         "writev 1 2", "close", "get cork"]) for _ in range(rng.randint(0, 25))]
    return mutate(" ".join(words), rng, rng.randint(0, 2))


def make_override(rng: random.Random) -> str:
    value = rng.choice(HOSTILE + ["true", "1448", '"linux"', '"write 1"', "[1, 2]",
                                  "{ a = 1 }", "1.5"])
    return mutate(f"{rng.choice(SET_KEYS)}={value}", rng, rng.randint(0, 2))


def make_trace(rng: random.Random) -> str:
    return mutate(SEED_TRACE, rng)


HOSTILE_JSON: list[object] = [
    None, True, False, -1, 0, 2**63, 2**70, -(2**70), 1e308, -1e308, 0.5, -0.0, 1e-300,
    float("inf"), float("nan"), "", "x" * 20_000, "[/]", "client", "server", "SAP", [], {},
    ["a"], [0, -1], [2**40], [[[]]], {"a": [1]}, "1", "1e400",
]


def make_trace_fields(rng: random.Random) -> str:
    """The seed trace with one to three fields replaced by hostile JSON values (or
    removed): valid JSON, so the checks behind the parser are what gets exercised."""
    doc = json.loads(SEED_TRACE)
    for _ in range(rng.randint(1, 3)):
        where = rng.choice(["segments", "ops", "events", "top"])
        records = doc.get(where)
        target = rng.choice(records) if isinstance(records, list) and records else doc
        if not isinstance(target, dict):
            continue
        key = rng.choice([*target.keys(), "iter", "loop", "arrive_ms", "data", "result"])
        if rng.random() < 0.15:
            target.pop(key, None)
        else:
            target[key] = rng.choice(HOSTILE_JSON)
    return json.dumps(doc)


def check_scenario(text: str) -> None:
    """Load the scenario and validate its ``[[expect]]`` claims (nothing is run)."""
    from nagle_sim.lessons import parse_claims
    parse_claims(loads(text, "fuzz.toml"))


def check_script(text: str) -> None:
    parse_script(text, "fuzz.script")


def check_override(text: str) -> None:
    loads(S1, "s1.toml", overrides=[text])


def check_trace(text: str) -> None:
    Trace.loads(text, "fuzz.json")


def check_trace_views(text: str) -> None:
    """Read the trace, then draw every view a user can ask for (terminal ladder and
    summary, SVG ladder and tseq, tables, pcap): a trace that loads must not crash one."""
    import io

    from rich.console import Console

    from nagle_sim.export import ladder_scene, summary_csv, summary_markdown, tseq_scene
    from nagle_sim.export.pcap import to_pcap
    from nagle_sim.export.svg import to_svg
    from nagle_sim.render.terminal import print_run

    trace = Trace.loads(text, "fuzz.json")
    print_run(trace, Console(file=io.StringIO(), width=100), limit=None, detail="all")
    to_svg(ladder_scene(trace))
    to_svg(tseq_scene(trace))
    summary_markdown(trace)
    summary_csv(trace)
    to_pcap(trace)


CHECKS: list[tuple[str, Callable[[random.Random], str], Callable[[str], None]]] = [
    ("scenario", make_scenario, check_scenario),
    ("script", make_script, check_script),
    ("--set", make_override, check_override),
    ("trace", make_trace, check_trace),
    ("trace fields", make_trace_fields, check_trace_views),
]
MAX_MESSAGE = 2000


def one_line_or_ok(check: Callable[[str], None], text: str) -> str | None:
    """None when ``check(text)`` succeeds or refuses the input with a one-line message;
    otherwise what went wrong (another exception, a multi-line or empty message)."""
    try:
        check(text)
    except (ScenarioError, TraceError, ExportError) as exc:
        message = str(exc)
        if not message.strip() or "\n" in message or "\r" in message:
            return f"message is not one line: {message[:200]!r}"
        if len(message) > MAX_MESSAGE:
            return f"message is {len(message)} characters long"
    except Exception as exc:   # anything else would be a traceback for the user
        return f"{type(exc).__name__}: {str(exc)[:200]}"
    return None
