"""Hostile and huge input: the reproducers of issue 9 and a longer fuzz run, with numbers.

Two parts, both printed as tables:

* ``--classes``: each input class (markup in names, huge numbers, deep nesting, huge
  loops, huge files, huge pictures, FIFOs...) run as a real ``python -m nagle_sim``
  subprocess: exit status, first stderr line, wall time and peak memory (``wait4``'s
  ``ru_maxrss``). Each child gets an address-space ceiling (``--mem-gb``, default 3) and a
  time limit (``--timeout``) so a "before" measurement cannot take the machine down.
* ``--fuzz N`` (default): N generated inputs through the scenario loader, the script
  parser, ``--set`` and the trace reader in this process, with the same oracle as
  tests/test_fuzz.py (a one-line error or success, nothing else). Prints the count, the
  failures, the slowest case and the peak memory.

* ``--captures N``: N mutated pcap/pcapng files (sequence and ACK jumps, time jumps,
  flags, lengths, dropped/duplicated/swapped packets, bytes flipped or cut; five link
  types, IPv4/IPv6) through ``explain`` in this process, then one capture of
  ``--connections`` (100,000) connections; failures, runs over 10 s or +500 MB.
* ``--storms N``: N classroom key storms (1 to ``--storm-keys`` keys each) through the
  real serve path (the app in its own process behind the websocket), a liveness ping
  after each; crashes and tracebacks on the serve console.

Run from the repository root: ``python benchmarks/fuzz_inputs.py --classes`` or
``python benchmarks/fuzz_inputs.py --fuzz 20000``. ``--tree DIR`` measures another
checkout (used for the before/after table). Must not be imported by the package.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
S1 = """title = "S1"
[client]
script = "repeat 12 { write 6; write 7; read 13 }"
[server]
script = "repeat 12 { read 13; write 13 }"
"""


# ---------------------------------------------------------------- input classes
def _trace(**changes: object) -> str:
    seg = {"t_ms": 0.0, "from": "client", "seq": 0, "ack": 0, "len": 0, "flags": "S"}
    op = {"side": "client", "op": "write", "arg": "1", "start_ms": 0.0, "end_ms": 0.1}
    seg.update(changes.pop("seg", {}))   # type: ignore[arg-type]
    op.update(changes.pop("op", {}))     # type: ignore[arg-type]
    doc = {"format": "nagle-sim-trace/1", "source": "sim", "title": "t", "outcome": "ok",
           "message": "", "meta": changes.pop("meta", {}), "segments": [seg], "ops": [op],
           "events": []}
    return json.dumps(doc)


def _classes(tmp: Path) -> list[tuple[str, list[str], float]]:
    """(name, argv after ``-m nagle_sim``, timeout scale) with their files made in ``tmp``."""
    def put(name: str, text: str) -> str:
        path = tmp / name
        path.write_text(text)
        return str(path)

    s1 = put("s1.toml", S1)
    nested = "write 1\n"
    for _ in range(500):
        nested = f"repeat 1 {{\n{nested}}}\n"
    big_lines = tmp / "tenmillion.toml"
    with big_lines.open("w") as f:
        f.write('[client]\nscript = """\n')
        f.write("write 1\n" * 10_000_000)
        f.write('"""\n')
    fifo = tmp / "fifo.svg"
    os.mkfifo(fifo)
    png1000 = put("png1000.toml",
                  '[client]\nscript = "repeat 1000 { write 6; write 7; read 13 }"\n'
                  '[server]\nscript = "repeat 1000 { read 13; write 13 }"\n')
    return [
        ("markup in file name", ["run", str(tmp / "[" "/].toml")], 1),
        ("markup in TOML key", ["run", put("key.toml", '"[/x]" = 1\n')], 1),
        ("markup in --set", ["run", s1, "--set", '=="[/]"'], 1),
        ("markup in trace", ["show", put("mk.json", _trace(seg={"from": "[/]"}))], 1),
        ("400-digit integer", ["run", put("i400.toml", "[link]\nmss = " + "9" * 400 + "\n")], 1),
        ("5000-digit integer", ["run", put("i5k.toml", "[link]\nmss = " + "9" * 5000 + "\n")], 1),
        ("500 nested repeat", ["run", put("nest.toml", f'[client]\nscript = """\n{nested}"""\n'),
                               "--limit", "0"], 1),
        ("deep TOML", ["run", put("deep.toml", "x = " + "[" * 100_000 + "]" * 100_000 + "\n")], 1),
        ("deep JSON trace", ["show", put("deep.json", _trace(meta={"a": 0}).replace(
            '"a": 0', '"a": ' + "[" * 100_000 + "]" * 100_000))], 1),
        ("trace t_ms 1e400", ["show", put("inf.json", _trace().replace('"t_ms": 0.0',
                                                                          '"t_ms": 1e400'))], 1),
        ('trace iter ["a"]', ["show", put("iter.json", _trace(op={"iter": ["a"]}))], 1),
        ("--png-scale 0.0001", ["export", s1, "--png", str(tmp / "o.png"),
                                "--png-scale", "0.0001"], 1),
        ("over-long export path", ["export", s1, "--svg", str(tmp / ("a" * 300 + ".svg"))], 1),
        ("export to a FIFO", ["export", s1, "--svg", str(fifo)], 0.3),
        ("--svg a.svg --tseq a.svg", ["export", s1, "--svg", str(tmp / "a.svg"),
                                      "--tseq", str(tmp / "a.svg")], 1),
        ("repeat 1000000000 { }", ["run", put("empty.toml", '[client]\nscript = '
                                              '"repeat 1000000000 { }"\n'), "--limit", "0"], 1),
        ("repeat 2000000 { write 1 }", ["run", put("w1.toml", '[client]\nscript = '
                                                   '"repeat 2000000 { write 1 }"\n'),
                                        "--limit", "0"], 1),
        ("10 M-line file (80 MB)", ["run", str(big_lines), "--limit", "0"], 1),
        ("PNG of 1000 iterations", ["export", png1000, "--png", str(tmp / "p.png")], 1),
        ("trace with 10 MB op label (PNG)", [
            "export", put("label.json", _trace(op={"op": "x" * 10_000_000})),
            "--png", str(tmp / "l.png")], 1),
        ("ping-pong to the record bound", ["run", put("pp.toml", '[client]\nscript = '
                                                     '"repeat 300000 { write 10; read 10 }"\n'
                                                     '[server]\nscript = '
                                                     '"repeat 300000 { read 10; write 10 }"\n'),
                                           "--limit", "0"], 3),
        ("write 200000000 (20 ms link)", ["run", put("big.toml", '[link]\ndelay_ms = 10\n'
                                                     '[client]\nscript = "write 200000000"\n'
                                                     '[server]\nscript = "read 200000000"\n'),
                                          "--limit", "0"], 3),
        ("pcap of a 10^10-byte segment", [
            "export", put("len.json", _trace(seg={"len": 10**10, "flags": "PA"})),
            "--pcap", str(tmp / "l.pcap")], 1),
    ]


def _measure(argv: list[str], tree: Path, timeout: float, mem_gb: float
             ) -> tuple[str, str, float, float]:
    """(exit, first stderr line, wall s, peak RSS MB) of one ``python -m nagle_sim`` run."""
    limit = int(mem_gb * 2**30)

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "nagle_sim", *argv], cwd=tree,
                                stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL,
                                preexec_fn=cap, env={**os.environ, "PYTHONPATH": str(tree)})
        status, usage = 0, None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - start > timeout:
                proc.send_signal(signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        proc.returncode = 0   # reaped by wait4; keep Popen from waiting again
        wall = time.perf_counter() - start
        err.seek(0)
        lines = err.read().decode("utf-8", "replace").splitlines()
    if wall > timeout:
        code = f"> {timeout:g} s"
    elif os.WIFSIGNALED(status):
        code = f"signal {os.WTERMSIG(status)}"
    else:
        code = str(os.WEXITSTATUS(status))
    first = "Traceback … " + lines[-1] if any("Traceback" in ln for ln in lines) else \
        (lines[0] if lines else "")
    return code, first[:90], wall, usage.ru_maxrss / 1024


def run_classes(tree: Path, timeout: float, mem_gb: float, only: str | None = None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cases = [c for c in _classes(Path(tmp)) if only is None or only in c[0]]
        print(f"tree {tree}  timeout {timeout:g} s  address-space cap {mem_gb:g} GB")
        print(f"{'input class':34} {'exit':>9} {'wall s':>8} {'peak MB':>8}  stderr")
        for name, argv, scale in cases:
            code, first, wall, peak = _measure(argv, tree, timeout * scale, mem_gb)
            print(f"{name:34} {code:>9} {wall:8.2f} {peak:8.0f}  {first}", flush=True)


# ---------------------------------------------------------------- fuzz run
def run_fuzz(count: int, seed: int) -> int:
    sys.path.insert(0, str(ROOT))
    from tests.fuzz_inputs import CHECKS, one_line_or_ok

    rng = random.Random(seed)
    failures: list[str] = []
    slowest = (0.0, "")
    start = time.perf_counter()
    per_target: dict[str, int] = {}
    for i in range(count):
        name, make, check = CHECKS[i % len(CHECKS)]
        text = make(rng)
        t0 = time.perf_counter()
        problem = one_line_or_ok(check, text)
        took = time.perf_counter() - t0
        per_target[name] = per_target.get(name, 0) + 1
        if took > slowest[0]:
            slowest = (took, f"{name}: {text[:70]!r}")
        if problem:
            failures.append(f"{name}: {problem} <- {text[:120]!r}")
    total = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"fuzz: {count} inputs ({', '.join(f'{k} {v}' for k, v in per_target.items())}) "
          f"in {total:.1f} s, seed {seed}")
    print(f"failures: {len(failures)}")
    for line in failures[:20]:
        print("  " + line)
    print(f"slowest: {slowest[0] * 1000:.1f} ms  {slowest[1]}")
    print(f"peak memory: {peak:.0f} MB")
    return 1 if failures else 0


# ---------------------------------------------------------------- captures (explain)
_JUMPS = [1, -1, 1000, -1000, 65_535, 999_000_000, 2**31 - 1, 2**31, 2**32 - 1, 3 * 10**9]


def _mutated_segments(rng: random.Random) -> list[object]:
    """A small conversation (handshake, a few request/reply pairs, maybe a FIN) with one
    to four mutations: sequence and ACK jumps (forward, backward, across 2^31 and the
    wrap), times jumping or going back, flags, lengths, windows, packets dropped,
    duplicated and swapped."""
    from dataclasses import replace

    from tests.explain.captures import handshake, seg

    delay = rng.choice([0.0, 0.05, 1.0, 20.0])
    segs = handshake(delay)
    t, cseq, sseq = 2 * delay + 0.1, 1, 1
    for _ in range(rng.randint(1, 4)):
        ask, answer = rng.choice([1, 6, 13, 100, 1448]), rng.choice([1, 13, 200])
        segs.append(seg("client", t, "PA", cseq, ask, sseq, delay_ms=delay))
        cseq += ask
        t += rng.choice([0.1, 40.0, 200.0])
        segs.append(seg("server", t, "PA", sseq, answer, cseq, delay_ms=delay))
        sseq += answer
        t += rng.choice([0.1, 40.0])
    if rng.random() < 0.3:
        segs.append(seg("client", t + 1, "FA", cseq, 0, sseq, delay_ms=delay))
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(segs))
        s = segs[i]
        kind = rng.choice(["seq", "ack", "time", "flags", "len", "win", "drop", "dup",
                           "swap", "seq", "ack"])
        if kind == "seq":
            segs[i] = replace(s, seq=(s.seq + rng.choice(_JUMPS)) % 2**32)
        elif kind == "ack":
            segs[i] = replace(s, ack=(s.ack + rng.choice(_JUMPS)) % 2**32,
                              flags=s.flags if "A" in s.flags else s.flags + "A")
        elif kind == "time":
            jump = rng.choice([-10**6, -1, 10**6, 10**9, 10**12])
            segs[i] = replace(s, t=max(0, s.t + jump), arrive=max(0, (s.arrive or s.t) + jump))
        elif kind == "flags":
            segs[i] = replace(s, flags="".join(f for f in "SFRPA" if rng.random() < 0.4))
        elif kind == "len":
            segs[i] = replace(s, length=rng.choice([0, 1, 1448, 1449, 9000, 65_000]))
        elif kind == "win":
            segs[i] = replace(s, window=rng.choice([0, 1, 65_535]))
        elif kind == "drop" and len(segs) > 1:
            del segs[i]
        elif kind == "dup":
            segs.insert(i, s)
        elif kind == "swap" and i + 1 < len(segs):
            segs[i], segs[i + 1] = segs[i + 1], segs[i]
    return segs


def make_capture(rng: random.Random) -> bytes:
    """A pcap or pcapng (Ethernet, SLL, SLL2, null or raw IP; IPv4 or IPv6) of a mutated
    conversation; one in three also has bytes flipped, cut or inserted in the file."""
    import io

    from tests.explain.captures import frames, hand_trace, write_frames

    linktype = rng.choice(["ethernet", "sll", "sll2", "null", "raw"])
    fmt = rng.choice(["pcap", "pcap", "pcapng"])
    rows = frames(hand_trace(_mutated_segments(rng)), at=rng.choice(["client", "server"]),  # type: ignore[arg-type]
                  linktype=linktype, v6=rng.random() < 0.25, ts=rng.random() < 0.5,
                  twice=rng.random() < 0.1)
    with tempfile.TemporaryDirectory() as tmp:
        data = write_frames(rows, Path(tmp) / "c", linktype=linktype, fmt=fmt,
                            snaplen=rng.choice([65535, 65535, 96, 54])).read_bytes()
    if rng.random() < 1 / 3:
        buf = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            choice = rng.random()
            i = rng.randrange(len(buf) + 1)
            if choice < 0.6 and buf:
                buf[min(i, len(buf) - 1)] = rng.randrange(256)
            elif choice < 0.8:
                del buf[i:]
            else:
                buf[i:i] = io.BytesIO(bytes(rng.randrange(256) for _ in range(
                    rng.choice([1, 4, 16])))).getvalue()
        data = bytes(buf)
    return data


def many_connections(count: int) -> bytes:
    """A pcap of ``count`` connections, each a SYN, SYN-ACK, ACK and 6 bytes each way."""
    from nagle_sim.model.events import Side
    from tests.explain.captures import ADDR4, frames, hand_trace, handshake, seg, write_frames

    rows: list[tuple[int, bytes]] = []
    for n in range(count):
        segs = handshake(0.05) + [seg("client", 0.2, "PA", 1, 6, 1, delay_ms=0.05),
                                  seg("server", 0.3, "PA", 1, 6, 7, delay_ms=0.05)]
        ports = {Side.CLIENT: 1024 + n % 60_000, Side.SERVER: 80}
        addrs = {Side.CLIENT: f"10.{1 + n // 60_000}.0.1", Side.SERVER: ADDR4[Side.SERVER]}
        rows += frames(hand_trace(segs), ports=ports, addrs=addrs, t0=n * 10)
    with tempfile.TemporaryDirectory() as tmp:
        return write_frames(rows, Path(tmp) / "c").read_bytes()


def _explain_once(path: str) -> tuple[str, float]:
    """(problem or "", seconds) of ``nagle-sim explain PATH`` in this process."""
    import contextlib
    import io

    from nagle_sim.__main__ import main as cli

    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli(["explain", path])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    except BaseException as exc:     # noqa: BLE001 - the oracle: nothing may escape
        return f"{type(exc).__name__}: {str(exc)[:100]}", time.perf_counter() - start
    took = time.perf_counter() - start
    lines = err.getvalue().strip().splitlines()
    if "Traceback" in err.getvalue():
        return "traceback: " + (lines[-1] if lines else ""), took
    if code not in (0, 2):
        return f"exit {code}", took
    if code == 2 and len(lines) != 1:
        return f"{len(lines)} error lines", took
    return "", took


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_captures(count: int, seed: int, connections: int) -> int:
    """``count`` mutated captures through ``explain`` in this process, then one capture
    of ``connections`` connections: failures, runs over 10 s, and the growth of this
    process's resident memory over any one input (over 500 MB is a failure)."""
    sys.path.insert(0, str(ROOT))
    rng = random.Random(seed)
    failures: list[str] = []
    over: list[str] = []
    sizes: list[int] = []
    slowest = (0.0, 0)
    most = 0.0
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.pcap"
        for i in range(count):
            data = make_capture(rng)
            sizes.append(len(data))
            path.write_bytes(data)
            before, peak_before = _rss_mb(), _peak_mb()
            problem, took = _explain_once(str(path))
            # resident now, or a new peak of this process (a peak the input made and freed)
            grew = max(_rss_mb() - before, _peak_mb() - peak_before)
            most = max(most, grew)
            slowest = max(slowest, (took, len(data)))
            if problem:
                failures.append(f"input {i} ({len(data)} B): {problem}")
                (Path(tempfile.gettempdir()) / f"fuzz-capture-{seed}-{i}.pcap").write_bytes(data)
            if took > 10 or grew > 500:
                over.append(f"input {i} ({len(data)} B): {took:.1f} s, +{grew:.0f} MB")
                (Path(tempfile.gettempdir()) / f"fuzz-capture-{seed}-{i}.pcap").write_bytes(data)
        total = time.perf_counter() - start
        small = sum(1 for n in sizes if n <= 1024)
        print(f"captures: {count} inputs ({small} of at most 1 KB; median "
              f"{sorted(sizes)[len(sizes) // 2]} B, largest {max(sizes)} B) in {total:.1f} s, "
              f"seed {seed}")
        print(f"  failures (traceback, exit other than 0/2, not one line): {len(failures)}")
        for line in failures[:20]:
            print("    " + line)
        print(f"  over 10 s or +500 MB: {len(over)}")
        for line in over[:20]:
            print("    " + line)
        print(f"  slowest: {slowest[0]:.2f} s ({slowest[1]} B); largest memory growth over "
              f"one input: {most:.0f} MB")
        if connections:
            data = many_connections(connections)
            path.write_bytes(data)
            before = _rss_mb()
            problem, took = _explain_once(str(path))
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"  {connections} connections ({len(data) / 1e6:.1f} MB): "
                  f"{problem or 'no failure'}, {took:.1f} s, resident {before:.0f} -> "
                  f"{_rss_mb():.0f} MB (peak {peak:.0f} MB)")
            if problem:
                failures.append(f"{connections} connections: {problem}")
    return 1 if failures or over else 0


# ---------------------------------------------------------------- classroom key storms
STORM_KEYS = ["\x10", "\x1b", "\r", "\t", "\x7f", "\x1b[A", "\x1b[B", "\x1b[C", "\x1b[D",
              " ", "n", "e", "?", "x", "1", "2", "s", "r", "d", "a", "b", "\x0f", "\x1bOP",
              "v", "z", "+", "N", "l", "o", "k", "q", "\x03", "é", "\x1b[200~", "\x00"]
"""tests/tui/test_serve.py's storm keys, and ctrl+c, a bare paste start, NUL."""


async def _storms(count: int, seed: int, max_keys: int) -> int:
    import asyncio
    import contextlib
    import io

    import aiohttp
    from aiohttp.test_utils import TestClient, TestServer

    from nagle_sim.tui.serve import ClassroomServer, ServeOptions

    rng = random.Random(seed)
    console = io.StringIO()
    server = ClassroomServer(ServeOptions(token="storm-token-29", kill_grace_s=2.0))
    client = TestClient(TestServer(await server._make_app()))
    await client.start_server()
    sessions = crashes = keys = slow = 0
    problems: list[str] = []
    ws = None
    start = time.perf_counter()

    async def connect() -> aiohttp.ClientWebSocketResponse:
        nonlocal sessions
        sessions += 1
        sock = await client.ws_connect("/ws/storm-token-29?width=100&height=30")
        drawn = 0
        while drawn < 2000:       # the first screen
            message = await sock.receive(timeout=60)
            if message.type != aiohttp.WSMsgType.BINARY:
                raise RuntimeError(f"no first screen: {message}")
            drawn += len(message.data)
        return sock

    async def alive(sock: aiohttp.ClientWebSocketResponse) -> bool:
        await sock.send_str('["ping", "storm"]')
        while True:
            message = await sock.receive(timeout=10)
            if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED,
                                aiohttp.WSMsgType.CLOSING):
                return False
            if message.type == aiohttp.WSMsgType.TEXT and message.json()[0] == "pong":
                return True

    try:
        with contextlib.redirect_stderr(console), contextlib.redirect_stdout(console):
            for i in range(count):
                if ws is None or ws.closed:
                    ws = await connect()
                storm = [rng.choice(STORM_KEYS) for _ in range(rng.randint(1, max_keys))]
                t0 = time.perf_counter()
                for key in storm:
                    if ws.closed:
                        break
                    await ws.send_str(json.dumps(["stdin", key]))
                    await asyncio.sleep(rng.choice([0, 0, 0.002, 0.01]))
                keys += len(storm)
                try:
                    ok = not ws.closed and await alive(ws)
                except (TimeoutError, ConnectionError) as exc:
                    ok = False
                    problems.append(f"storm {i}: no answer ({type(exc).__name__})")
                if time.perf_counter() - t0 > 10:
                    slow += 1
                if not ok:
                    service = next(iter(server.sessions.values()), (None,))[0]
                    process = getattr(service, "_process", None)
                    code = getattr(process, "returncode", None)
                    if code not in (None, 0):
                        crashes += 1
                        problems.append(f"storm {i}: the app exited {code} after "
                                        f"{storm!r}"[:200])
                    await ws.close()
                    ws = None
    finally:
        if ws is not None:
            await ws.close()
        await client.close()
    text = console.getvalue()
    tracebacks = text.count("Traceback")
    print(f"key storms: {count} storms of 1-{max_keys} keys ({keys} keys) through the "
          f"classroom serve path in {time.perf_counter() - start:.0f} s, seed {seed}; "
          f"{sessions} sessions (a storm may quit the app: q, ctrl+c, the palette's Quit)")
    print(f"  crashes (exit other than 0): {crashes}; tracebacks on the serve console: "
          f"{tracebacks}; storms whose answer took over 10 s: {slow}; peak memory of this "
          f"process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    for line in problems[:10]:
        print("    " + line)
    if tracebacks:
        i = text.index("Traceback")
        print("    " + text[i:i + 1500].replace("\n", "\n    "))
    return 1 if crashes or tracebacks or slow else 0


def run_storms(count: int, seed: int, max_keys: int) -> int:
    import asyncio

    sys.path.insert(0, str(ROOT))
    return asyncio.run(_storms(count, seed, max_keys))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", action="store_true", help="measure each input class")
    parser.add_argument("--tree", type=Path, default=ROOT, help="checkout to measure")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--mem-gb", type=float, default=3.0)
    parser.add_argument("--fuzz", type=int, default=None, metavar="N",
                        help="generated inputs (default 10000 when --classes is not given)")
    parser.add_argument("--seed", type=int, default=9)
    parser.add_argument("--only", metavar="TEXT", help="measure only classes naming TEXT")
    parser.add_argument("--captures", type=int, default=0, metavar="N",
                        help="N mutated captures through explain (issue 29)")
    parser.add_argument("--connections", type=int, default=100_000, metavar="N",
                        help="with --captures: then one capture of N connections")
    parser.add_argument("--storms", type=int, default=0, metavar="N",
                        help="N classroom key storms through the serve path (issue 29)")
    parser.add_argument("--storm-keys", type=int, default=40, metavar="K",
                        help="keys per storm: 1 to K")
    args = parser.parse_args()
    status = 0
    if args.classes:
        run_classes(args.tree.resolve(), args.timeout, args.mem_gb, args.only)
    if args.captures:
        status |= run_captures(args.captures, args.seed, args.connections)
    if args.storms:
        status |= run_storms(args.storms, args.seed, args.storm_keys)
    if args.fuzz or not (args.classes or args.captures or args.storms):
        status |= run_fuzz(args.fuzz or 10_000, args.seed)
    return status


if __name__ == "__main__":
    sys.exit(main())
