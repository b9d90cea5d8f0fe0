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
    args = parser.parse_args()
    status = 0
    if args.classes:
        run_classes(args.tree.resolve(), args.timeout, args.mem_gb, args.only)
    if args.fuzz or not args.classes:
        status = run_fuzz(args.fuzz or 10_000, args.seed)
    return status


if __name__ == "__main__":
    sys.exit(main())
