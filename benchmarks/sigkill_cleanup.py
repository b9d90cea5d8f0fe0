"""SIGKILL emulated-link runs at random moments and count what is left (issue 29.10).

Each trial starts ``python -m realnet FILE`` on a scenario with link delays (two network
namespaces, TUN devices, a relay, side processes), SIGKILLs it after a random delay
(seeded; from the first moments of set-up to the middle of the run) and runs nothing
else. Then, polling for up to 5 s: the run's namespaces, relays and side processes, its
watchdog, TUN devices (every namespace of ours is gone, so are they) and temp files.

    sudo PYTHONPATH=. python benchmarks/sigkill_cleanup.py [TRIALS] [SEED]

Prints one line per trial and a summary; exit 1 if anything survived 5 s.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from realnet import cleanup, watchdog  # noqa: E402

SCENARIO = ('[link]\ndelay_ms = 20\n[client]\nscript = "repeat 20 { write 10; read 10 }"\n'
            '[server]\nscript = "repeat 20 { read 10; write 10 }"\n')


def _descendants(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (one level: sides, relay, watchdog)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_bytes()
            except OSError:
                continue
            if int(stat[stat.rfind(b")") + 2:].split()[1]) == pid:
                out.append(int(entry))
    return out


def _left(pid: int, kids: list[int]) -> dict[str, object]:
    ours = cleanup.list_ours(owner_pid=pid)
    return {"namespaces": ours.namespaces, "relays": [r.pid for r in ours.relays],
            "files": [str(f) for f in ours.files]
            + [str(p) for p in Path(tempfile.gettempdir()).glob(f"nsim-{pid}-*")],
            "processes": [k for k in kids if cleanup.pid_alive(k)],
            "watchdogs": [w for w, owner in watchdog.list_watchdogs() if owner == pid]}


def main() -> int:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 29)
    path = Path(tempfile.mkdtemp(prefix="sigkill-")) / "link.toml"
    path.write_text(SCENARIO)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    pids: list[int] = []
    worst, failures = 0.0, 0
    try:
        for trial in range(trials):
            child = subprocess.Popen([sys.executable, "-m", "realnet", str(path),
                                      "--json"], env=env, cwd=ROOT,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # half the trials at any moment of start-up and set-up, half at a moment of
            # the run itself (after its namespaces exist)
            started = time.monotonic()
            if trial % 2:
                time.sleep(rng.uniform(0.0, 3.0))
            else:
                deadline = started + 15
                while not cleanup.list_ours(owner_pid=child.pid).namespaces \
                        and time.monotonic() < deadline and child.poll() is None:
                    time.sleep(0.005)
                time.sleep(rng.uniform(0.0, 0.8))
            at = time.monotonic() - started
            pids.append(child.pid)
            had = cleanup.list_ours(owner_pid=child.pid).namespaces
            kids = _descendants(child.pid)
            child.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            child.wait()
            left = _left(child.pid, kids)
            while any(left.values()) and time.monotonic() - killed < 5:
                time.sleep(0.02)
                left = _left(child.pid, kids)
            took = time.monotonic() - killed
            worst = max(worst, took)
            bad = any(left.values())
            failures += bad
            print(f"trial {trial + 1:2d}: killed at {at:.2f} s with {len(had)} namespaces; "
                  f"{'LEFT ' + str({k: v for k, v in left.items() if v}) if bad else 'clean'}"
                  f" after {took:.2f} s", flush=True)
    finally:
        path.unlink()
        path.parent.rmdir()
    new = [n for n in cleanup.list_namespaces() if cleanup.owner_of(n) in pids]
    print(f"{trials} SIGKILLs, no further run: {failures} left something after 5 s; slowest "
          f"clean-up {worst:.2f} s; namespaces of the killed runs now: {len(new)}")
    return 1 if failures or new else 0


if __name__ == "__main__":
    sys.exit(main())
