"""S3 at full size: 10,000 messages of 15 two-byte writes, in each of the three modes.

Prints, per mode (issue 17's goals in brackets):

- ``sim s``: wall and process CPU seconds of `run_sim` in this process [≤ 1.0 s];
- ``run --json s``: wall seconds of a whole ``nagle-sim run FILE --json`` process, start-up
  and JSON writing included [≤ 1.5 s], and its peak RSS in MB [NODELAY ≤ 50 MB at 10,000
  messages, ≤ 60 MB at 100,000: issue 32; the run streams its records to the writer];
- ``JSON MB``: the size of what that process printed, and of the same trace written as
  ``nagle-sim-trace/1`` (the old format, reason sentences in every record) for comparison;
- ``load s``: `Trace.load` of the printed file (what ``show``/``compare``/``export`` pay).

The first line says which build ran: ``compiled`` (the wheel's mypyc modules, setup.py)
or ``pure Python`` (an editable install, or a machine without a C compiler); the ``run
--json`` process imports the same one (``python -P``: never the checkout in the current
directory). ``--compiled-check`` prints only that line and exits 1 unless compiled.

Not a test: timing goals live here, not in tests/. Pass ``--no-cli`` to time only the
simulation (``peak MB`` is then this process's peak RSS so far: run one mode per process
for a clean number), ``--record-limit N`` and ``--time-limit S`` to lift a run's record
and simulated-time bounds, in this process and in the ``run --json`` one (50,000 messages
are 1.7–3.8 million records, past the default 2 million; 100,000 messages of the default
mode run 73 simulated minutes, past the default hour), ``--scale 10000,50000,100000`` to
check that time and memory grow linearly with the run (each count simulated in a fresh
process, both bounds lifted; it prints CPU seconds, µs per message and peak RSS, and each
row's ratio to the first row's per-message cost: 1.00 is linear), ``--profile MODE`` to
print a cProfile of that mode's simulation and JSON writing instead (cProfile sees only
interpreted code: profile the pure build).
Run: python benchmarks/bench_s3.py [messages] [--no-cli] [--record-limit N] [--time-limit S]
     [--modes nodelay,cork] [--profile nodelay] [--compiled-check] [--scale N,N,...]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nagle_sim.model.endpoint
import nagle_sim.scenario.loader
import nagle_sim.scenario.steps
import nagle_sim.sim.driver
import nagle_sim.trace.codec
import nagle_sim.trace.records
from nagle_sim import scenario
from nagle_sim.sim.driver import run_sim
from nagle_sim.trace import Outcome, Trace, TraceError

# by module name: `nagle_sim.scenario.steps` as an attribute is the package's re-exported
# `steps` function, not the module
_HOT = tuple(sys.modules[name] for name in (
    "nagle_sim.model.endpoint", "nagle_sim.sim.driver", "nagle_sim.trace.records",
    "nagle_sim.trace.codec", "nagle_sim.scenario.loader", "nagle_sim.scenario.steps"))


def build() -> str:
    """Which build of the simulator this process imported."""
    compiled = [m.__name__ for m in _HOT if (m.__file__ or "").endswith((".so", ".pyd"))]
    where = Path(nagle_sim.sim.driver.__file__ or "?").parent.parent
    if len(compiled) == len(_HOT):
        return f"compiled (mypyc) from {where}"
    if compiled:
        return f"partly compiled ({', '.join(compiled)}) from {where}"
    return f"pure Python from {where}"

MODES = {
    "default": "repeat {n} {{ repeat 15 {{ write 2 }}; read 2 }}",
    "nodelay": "repeat {n} {{ repeat 15 {{ write 2 }}; read 2 }}",
    "cork": "repeat {n} {{ set cork on; repeat 15 {{ write 2 }}; set cork off; read 2 }}",
}


def scenario_text(mode: str, messages: int) -> str:
    return (f'[client]\nnodelay = {str(mode == "nodelay").lower()}\n'
            f'script = "{MODES[mode].format(n=messages)}"\n'
            f'[server]\nscript = "repeat {messages} {{ read 30; write 2 }}"\n')


class _Counter(io.TextIOBase):
    """A text sink that only counts UTF-8 bytes (the JSON size without keeping it)."""

    def __init__(self) -> None:
        self.bytes = 0

    def write(self, text: str) -> int:
        self.bytes += len(text.encode())
        return len(text)


def _write_cpu(trace: Trace) -> float:
    """CPU seconds of `Trace.write_json` (default format) to /dev/null."""
    with open(os.devnull, "w", encoding="utf-8") as sink:
        cpu = time.process_time()
        trace.write_json(sink)
        return time.process_time() - cpu


def _json_bytes(trace: Trace, version: int) -> int:
    sink = _Counter()
    try:
        trace.write_json(sink, version=version)
    except TypeError:   # a checkout from before nagle-sim-trace/2 (the "before" numbers)
        trace.write_json(sink)
    return sink.bytes


_LAUNCHER = """
import os, subprocess, sys, time
with open(sys.argv[1], "wb") as sink:
    start = time.perf_counter()
    proc = subprocess.Popen(sys.argv[2:], stdout=sink)
    _, status, usage = os.wait4(proc.pid, 0)
print(os.waitstatus_to_exitcode(status), time.perf_counter() - start,
      usage.ru_utime + usage.ru_stime, usage.ru_maxrss)
"""
"""Runs the CLI from a small process: a child's peak RSS counts the memory of the process
it was forked from (Linux records the old address space's high-water mark at exec), so
forking it from this benchmark, which holds a whole trace, would inflate it."""


def _cli(path: Path, out: Path, limits: list[str]) -> tuple[float, float, float]:
    """Wall and CPU seconds and peak RSS (MB) of ``nagle-sim run path --json > out``."""
    done = subprocess.run([sys.executable, "-c", _LAUNCHER, str(out), sys.executable, "-P",
                           "-m", "nagle_sim", "run", str(path), "--json", *limits],
                          check=True, capture_output=True, text=True)
    code, wall, cpu, peak = done.stdout.split()
    assert code == "0", f"nagle-sim run exited {code}"
    return float(wall), float(cpu), int(peak) / 1024     # Linux: ru_maxrss is in KiB


_SCALE_RUN = """
import resource, sys, time
sys.path.insert(0, sys.argv[1])
from bench_s3 import scenario_text
from nagle_sim import scenario
from nagle_sim.sim.driver import run_sim
mode, messages = sys.argv[2], int(sys.argv[3])
sc = scenario.loads(scenario_text(mode, messages), f"bench-{mode}")
cpu = time.process_time()
trace = run_sim(sc, record_limit=100 * messages + 1000,
                time_limit=100_000 * messages + 3_600_000_000)
cpu = time.process_time() - cpu
assert trace.outcome.value == "ok", trace.message
print(cpu, len(trace.segments), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""
"""One simulation in a fresh process: its CPU seconds, segments and peak RSS (MB)."""


def scale(counts: list[int], modes: list[str]) -> None:
    """Time and memory of each mode at each message count, each in its own process."""
    print(f"{'mode':<8} {'messages':>9} {'cpu s':>7} {'segments':>10} {'us/msg':>7} "
          f"{'ratio':>6} {'peak MB':>8}", flush=True)
    here = str(Path(__file__).resolve().parent)
    for mode in modes:
        first: float | None = None
        for count in counts:
            done = subprocess.run([sys.executable, "-P", "-c", _SCALE_RUN, here, mode,
                                   str(count)], capture_output=True, text=True)
            if done.returncode:
                print(f"{mode:<8} {count:>9,}  failed: {done.stderr.strip().splitlines()[-1]}",
                      flush=True)
                continue
            cpu_s, segments, peak = done.stdout.split()
            per_msg = float(cpu_s) / count * 1e6
            first = first or per_msg
            print(f"{mode:<8} {count:>9,} {float(cpu_s):>7.2f} {int(segments):>10,} "
                  f"{per_msg:>7.1f} {per_msg / first:>6.2f} {float(peak):>8.0f}", flush=True)


def profile(mode: str, messages: int) -> None:
    sc = scenario.loads(scenario_text(mode, messages), f"bench-{mode}")
    prof = cProfile.Profile()
    prof.enable()
    trace = run_sim(sc)
    trace.write_json(_Counter())
    prof.disable()
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(40)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("messages", type=int, nargs="?", default=10_000)
    ap.add_argument("--no-cli", action="store_true", help="time the simulation only")
    ap.add_argument("--profile", choices=MODES, help="cProfile one mode instead")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated modes")
    ap.add_argument("--record-limit", type=int, default=None,
                    help="a run's record bound (default: the driver's)")
    ap.add_argument("--time-limit", type=float, default=None,
                    help="a run's simulated-time bound in seconds (default: the driver's)")
    ap.add_argument("--scale", help="comma-separated message counts: linearity check")
    ap.add_argument("--compiled-check", action="store_true",
                    help="print which build is imported; exit 1 unless compiled")
    args = ap.parse_args(argv)
    print(f"build: {build()}")
    if args.compiled_check:
        sys.exit(0 if build().startswith("compiled") else 1)
    if args.profile:
        profile(args.profile, args.messages)
        return
    if args.scale:
        scale([int(n) for n in args.scale.split(",")], args.modes.split(","))
        return
    print(f"S3, {args.messages:,} messages per mode")
    print(f"{'mode':<8} {'sim s':>6} {'cpu s':>6} {'segments':>9} {'records':>9} "
          f"{'records/s':>10} {'ms/msg':>7} {'write s':>7} {'run --json s':>12} "
          f"{'(cpu)':>6} {'peak MB':>8} {'JSON MB':>8} {'/1 MB':>7} {'load s':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for mode in args.modes.split(","):
            text = scenario_text(mode, args.messages)
            sc = scenario.loads(text, f"bench-{mode}")
            start, cpu = time.perf_counter(), time.process_time()
            limits: dict[str, int] = {}
            cli_limits: list[str] = []
            if args.record_limit is not None:
                limits["record_limit"] = args.record_limit
                cli_limits += ["--record-limit", str(args.record_limit)]
            if args.time_limit is not None:
                limits["time_limit"] = round(args.time_limit * 1_000_000)
                cli_limits += ["--time-limit", f"{args.time_limit:g}"]
            trace = run_sim(sc, **limits)
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            assert trace.outcome is Outcome.OK, trace.message
            segments = len(trace.segments)
            records = len(trace.events) + segments + len(trace.ops)
            per_msg = trace.end / 1000 / args.messages
            v1 = _json_bytes(trace, 1) / 1e6
            write = _write_cpu(trace)
            del trace
            line = f"{mode:<8} {wall:>6.2f} {cpu:>6.2f} {segments:>9,} {records:>9,}"
            if args.no_cli:
                peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                print(f"{line} {records / wall:>10,.0f} {per_msg:>7.3f} {write:>7.2f} "
                      f"{'':>12} {'':>6} {peak:>8.0f} {'':>8} {v1:>7.1f}")
                continue
            path, out = Path(tmp, f"s3-{mode}.toml"), Path(tmp, f"s3-{mode}.json")
            path.write_text(text, "utf-8")
            cli_wall, cli_cpu, peak = _cli(path, out, cli_limits)
            start = time.perf_counter()
            try:
                back: Trace | None = Trace.load(out)
            except TraceError as exc:   # e.g. /1 NODELAY: 148 MB, over the 128 MiB bound
                print(f"  ({mode}: the trace does not read back: {exc})")
                back = None
            load = time.perf_counter() - start if back else float("nan")
            assert back is None or len(back.segments) == segments
            print(f"{line} {records / wall:>10,.0f} {per_msg:>7.3f} {write:>7.2f} "
                  f"{cli_wall:>12.2f} {cli_cpu:>6.2f} {peak:>8.0f} "
                  f"{out.stat().st_size / 1e6:>8.1f} {v1:>7.1f} {load:>7.2f}")
            del back
            out.unlink()


if __name__ == "__main__":
    main()
