"""Loading, attaching and reading nagle_watch.bpf.o; the start-up checks.

Owns: what the host offers (privileges, BTF, libbpf, kallsyms, tracefs, each hook) and
the one-line verdicts about it, the `Watcher` (configure, load, attach each hook, read the
ring buffer, count losses, detach everything) and the shipped object's bytes. Every hook
that fails to attach is a named feature lost, not a failure: the rest still works.

Nothing is pinned and no file is written: the kernel frees every program, map and link
when the watching process's file descriptors close, so a SIGKILLed watch leaves nothing
behind (tests/watch/test_kernel.py checks it with bpftool). tracefs is only read (for
the ids of the two syscall tracepoints); when it is not mounted, a short-lived child
mounts it in a private mount namespace of its own, reads the ids and exits, so no mount
is left either.

Must not import rich, textual, simpy or nagle_sim beyond the model's vocabulary.
"""

from __future__ import annotations

import contextlib
import ctypes
import gzip
import os
import platform
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Final

from nagle_sim.errors import UserError

from . import raw
from .libbpf import BpfError, Object, lib, num_possible_cpus

OBJECT_NAME: Final = "nagle_watch.bpf.o"

CAP_SYS_ADMIN: Final = 21
CAP_PERFMON: Final = 38
CAP_BPF: Final = 39

TRACEFS_DIRS: Final = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")


@dataclass(frozen=True, slots=True)
class Hook:
    program: str
    tracepoint: str            # "group:name" (classic) or "name" (raw)
    feature: str               # what is lost without it
    essential: bool = False


HOOKS: Final = (
    Hook("nw_set_state", "inet_sock_set_state",
         "finding new connections and their state changes", essential=True),
    Hook("nw_fork", "sched_process_fork", "following a watched program's child processes"),
    Hook("nw_sendmsg", "tcp_sendmsg_locked", "MSG_MORE (a send's flags)"),
    Hook("nw_send_len", "sock_send_length", "holds (what a send left queued)",
         essential=True),
    Hook("nw_reading", "tcp_rcv_space_adjust", "ACKs sent by a read"),
    Hook("nw_recv_len", "sock_recv_length", "ACKs sent by a read"),
    Hook("nw_seg_in", "tcp_probe", "the ACKs that release held data"),
    Hook("nw_seg_out", "net_dev_start_xmit", "segments sent (releases, ACKs)",
         essential=True),
    Hook("nw_timer_start", "timer_start", "delayed-ACK and probe timers armed"),
    Hook("nw_timer_fire", "timer_expire_entry", "delayed-ACK and probe timers fired"),
    Hook("nw_timer_done", "timer_expire_exit", "what a timer changed (ato, ping-pong)"),
    Hook("nw_softirq_entry", "softirq_entry",
         "telling an ACK that answers a segment from one sent by a system call"),
    Hook("nw_softirq_exit", "softirq_exit",
         "telling an ACK that answers a segment from one sent by a system call"),
    Hook("nw_setsockopt_enter", "syscalls:sys_enter_setsockopt",
         "option changes (TCP_NODELAY, TCP_CORK, TCP_QUICKACK)"),
    Hook("nw_setsockopt_exit", "syscalls:sys_exit_setsockopt",
         "option changes (TCP_NODELAY, TCP_CORK, TCP_QUICKACK)"),
)

WIRE_FALLBACK: Final = ("the wire still tells a lot: capture it (tcpdump) and run "
                        "`nagle-sim explain`")


class WatchError(UserError):
    """watch cannot run here: one line saying what is missing and what still works."""


# -- host facts ---------------------------------------------------------------------------

def effective_caps() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    except OSError:
        pass
    return 0


def privileges_ok() -> bool:
    caps = effective_caps()
    if caps & (1 << CAP_SYS_ADMIN):
        return True
    return bool(caps & (1 << CAP_BPF)) and bool(caps & (1 << CAP_PERFMON))


def kernel_hz() -> int | None:
    """CONFIG_HZ (jiffies a second): from the kernel's config, else measured from
    /proc/timer_list over 200 ms; None when neither can be read."""
    rel = platform.release()
    for cfg in (Path("/proc/config.gz"), Path(f"/boot/config-{rel}")):
        try:
            data = gzip.decompress(cfg.read_bytes()) if cfg.suffix == ".gz" \
                else cfg.read_bytes()
        except OSError:
            continue
        for line in data.decode("ascii", "replace").splitlines():
            if line.startswith("CONFIG_HZ="):
                return int(line.split("=", 1)[1])
    def jiffies() -> int | None:
        try:
            with open("/proc/timer_list", encoding="ascii", errors="replace") as f:
                for line in f:
                    if line.startswith("jiffies:"):
                        return int(line.split()[1])
        except (OSError, ValueError):
            return None
        return None
    j0, t0 = jiffies(), time.monotonic()
    if j0 is None:
        return None
    time.sleep(0.2)
    j1, t1 = jiffies(), time.monotonic()
    if j1 is None:
        return None
    rate = (j1 - j0) / (t1 - t0)
    return min((100, 250, 300, 1000), key=lambda hz: abs(hz - rate))


def kallsyms_has(names: Iterable[str]) -> dict[str, bool]:
    want = set(names)
    seen: dict[str, bool] = dict.fromkeys(want, False)
    try:
        with open("/proc/kallsyms", encoding="ascii", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[2] in want and int(parts[0], 16):
                    seen[parts[2]] = True
    except (OSError, ValueError):
        pass
    return seen


def tracepoint_ids(names: Iterable[str]) -> tuple[dict[str, int], str]:
    """The perf ids of classic tracepoints ("group:name"), and how they were read.

    From a mounted tracefs when there is one; otherwise a child process mounts tracefs in
    a mount namespace of its own (nothing is mounted for anyone else, and the mount dies
    with the child)."""
    wanted = list(names)
    ids: dict[str, int] = {}
    for base in TRACEFS_DIRS:
        if not os.path.isdir(os.path.join(base, "events")):
            continue
        for n in wanted:
            group, name = n.split(":", 1)
            with contextlib.suppress(OSError, ValueError):
                ids[n] = int(Path(base, "events", group, name, "id").read_text())
        return ids, f"tracefs at {base}"
    script = (
        "import ctypes,os,sys\n"
        "libc=ctypes.CDLL(None,use_errno=True)\n"
        "if libc.unshare(0x20000)!=0: sys.exit('unshare: '+os.strerror(ctypes.get_errno()))\n"
        "libc.mount(b'none',b'/',None,0x4000|0x40000,None)\n"   # MS_REC|MS_PRIVATE
        "if libc.mount(b'nodev',b'/sys/kernel/tracing',b'tracefs',0,None)!=0:\n"
        "    sys.exit('mount tracefs: '+os.strerror(ctypes.get_errno()))\n"
        "for n in sys.argv[1:]:\n"
        "    g,t=n.split(':',1)\n"
        "    try: print(n, open(f'/sys/kernel/tracing/events/{g}/{t}/id').read().strip())\n"
        "    except OSError: pass\n")
    try:
        done = subprocess.run([sys.executable, "-I", "-c", script, *wanted],
                              capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {}, f"tracefs not mounted and could not be mounted privately ({exc})"
    if done.returncode:
        why = (done.stderr.strip().splitlines() or ["failed"])[-1]
        return {}, f"tracefs not mounted and could not be mounted privately ({why})"
    for line in done.stdout.splitlines():
        n, _, v = line.partition(" ")
        if v.isdigit():
            ids[n] = int(v)
    return ids, "tracefs mounted privately by a child process"


# -- perf_event_open for classic tracepoints ------------------------------------------------

_PERF_TYPE_TRACEPOINT: Final = 2
_NR_PERF_EVENT_OPEN: Final = {"x86_64": 298, "aarch64": 241, "riscv64": 241,
                              "ppc64le": 319, "s390x": 331}


def perf_tracepoint_fd(tp_id: int) -> int:
    """A perf event on tracepoint id (all CPUs, any process) for a BPF program."""
    nr = _NR_PERF_EVENT_OPEN.get(platform.machine())
    if nr is None:
        raise OSError(f"perf_event_open: unknown syscall number on {platform.machine()}")
    # struct perf_event_attr: type, size, config, sample_period, sample_type, read_format,
    # flags...; 128 bytes (PERF_ATTR_SIZE_VER7), zero except what is set
    attr = bytearray(128)
    struct.pack_into("<IIQQ", attr, 0, _PERF_TYPE_TRACEPOINT, 128, tp_id, 1)
    buf = (ctypes.c_char * len(attr)).from_buffer(attr)
    libc = lib().libc
    ctypes.set_errno(0)
    # PERF_FLAG_FD_CLOEXEC = 8; pid -1 with cpu 0 would be one CPU: pid -1 needs a cpu,
    # so tracepoints are opened per CPU by libbpf's own attach; a BPF tracepoint program
    # attached to one perf event runs on every CPU (the event is a tracepoint hook, not
    # a sampling counter), so cpu 0 with pid -1 is enough
    fd = libc.syscall(nr, ctypes.byref(buf), -1, 0, -1, 8)
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"perf_event_open: {os.strerror(e)}")
    return int(fd)


def object_bytes() -> bytes:
    """The shipped, prebuilt CO-RE object (package data)."""
    return resources.files(__package__).joinpath(OBJECT_NAME).read_bytes()


# -- the watcher -----------------------------------------------------------------------------

@dataclass(slots=True)
class Config:
    pids: tuple[int, ...] = ()
    port: int = 0
    ring_mb: int = 8
    max_sockets: int = 4096
    rate: int = 100_000
    burst: int = 20_000
    segments: bool = False
    """Report every segment of a watched socket, not only the ones a decision is about
    (a trace file's wire: `nagle-sim watch -o`); costs a record per segment."""

    def check(self) -> None:
        if not self.pids and not self.port:
            raise WatchError("watch needs a process (--pid, or -- COMMAND) or a --port")
        if not 0 <= self.port <= 65535:
            raise WatchError(f"--port {self.port}: not a TCP port (0-65535)")
        if not 1 <= self.ring_mb <= 256 or self.ring_mb & (self.ring_mb - 1):
            raise WatchError(f"--ring-mb {self.ring_mb}: a power of two from 1 to 256")
        if not 16 <= self.max_sockets <= 1 << 20:
            raise WatchError(f"--max-sockets {self.max_sockets}: 16 to 1048576")
        if not 1 <= self.rate <= 10_000_000 or not 1 <= self.burst <= 10_000_000:
            raise WatchError("--rate and --burst: 1 to 10,000,000 events")
        for pid in self.pids:
            if not 0 < pid < 1 << 22:
                raise WatchError(f"--pid {pid}: not a process id")
            if not os.path.isdir(f"/proc/{pid}"):
                raise WatchError(f"--pid {pid}: no such process")

    def section(self) -> bytes:
        """struct nw_config (bpf/nagle_watch.h)."""
        return struct.pack("<IIHBB4x", self.rate, self.burst, self.port,
                           1 if self.pids else 0, 1 if self.segments else 0)


@dataclass(slots=True)
class Report:
    """What the start-up found: one line per finding, and the features lost."""

    lines: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    attached: list[str] = field(default_factory=list)
    hz: int | None = None

    def summary(self) -> str:
        if not self.lost:
            return f"watch: all {len(self.attached)} hooks attached"
        return ("watch: missing " + "; ".join(self.lost) + "; everything else works")


def preflight() -> None:
    """The checks that stop watch before anything is loaded (one line each)."""
    if sys.platform != "linux":
        raise WatchError(f"watch needs Linux (this is {sys.platform}); "
                         + WIRE_FALLBACK)
    if not privileges_ok():
        raise WatchError("watch needs root (or CAP_BPF with CAP_PERFMON) to load BPF "
                         "programs; without it " + WIRE_FALLBACK)
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        raise WatchError("the kernel has no BTF (/sys/kernel/btf/vmlinux: "
                         "CONFIG_DEBUG_INFO_BTF is off), which the CO-RE program needs; "
                         + WIRE_FALLBACK)
    try:
        lib()
    except BpfError as exc:
        raise WatchError(f"{exc}; {WIRE_FALLBACK}") from None


class Watcher:
    """Loads the program for one configuration; `poll` hands decoded records to a
    callback; `close` (also from a signal handler's unwinding) detaches everything."""

    def __init__(self, config: Config, on_record: Callable[[bytes], None]) -> None:
        config.check()
        self.config = config
        self.on_record = on_record
        self.obj: Object | None = None
        self.report = Report()
        self._rb = 0
        self._ncpu = 1

    def start(self, extra_tgids: Iterable[int] = ()) -> Report:
        preflight()
        rep = self.report
        rep.hz = kernel_hz()
        syms = kallsyms_has(["tcp_delack_timer", "tcp_write_timer"])
        classic = [h.tracepoint for h in HOOKS if ":" in h.tracepoint]
        ids, how = tracepoint_ids(classic)
        rep.lines.append(f"tracepoint ids: {how}")
        obj = Object(object_bytes())
        self.obj = obj
        try:
            obj.set_max_entries("events", self.config.ring_mb << 20)
            obj.set_max_entries("socks", self.config.max_sockets)
            obj.write_initial(".rodata.cfg", self.config.section())
            progs = {name: ptr for name, _sec, ptr in obj.programs()}
            for h in HOOKS:
                if ":" in h.tracepoint and h.tracepoint not in ids and h.program in progs:
                    obj.set_autoload(progs[h.program], False)
            obj.load()
            for tgid in (*self.config.pids, *extra_tgids):
                obj.update("watch_tgids", struct.pack("<I", tgid), b"\x01")
            for h in HOOKS:
                ptr = progs.get(h.program)
                if ptr is None:
                    self._lose(h, "not in the object")
                    continue
                if ":" in h.tracepoint:
                    if h.tracepoint not in ids:
                        self._lose(h, "no tracefs id")
                        continue
                    try:
                        pfd = perf_tracepoint_fd(ids[h.tracepoint])
                        obj.attach_perf_event(ptr, pfd, h.tracepoint)
                    except (OSError, BpfError) as exc:
                        self._lose(h, str(exc))
                        continue
                else:
                    try:
                        obj.attach_raw_tracepoint(ptr, h.tracepoint)
                    except BpfError as exc:
                        self._lose(h, str(exc))
                        continue
                rep.attached.append(h.tracepoint)
            if not syms.get("tcp_delack_timer") or not syms.get("tcp_write_timer"):
                rep.lost.append("timer callbacks not in /proc/kallsyms "
                                "(no delayed-ACK or probe timers)")
            essential = [h for h in HOOKS if h.essential and h.tracepoint not in rep.attached]
            if essential:
                raise WatchError("watch cannot attach to " + ", ".join(
                    h.tracepoint for h in essential) + ": " + "; ".join(rep.lost)
                    + "; " + WIRE_FALLBACK)
            self._ncpu = num_possible_cpus()
            self._rb = obj.ring_buffer("events", self.on_record)
        except BpfError as exc:
            self.close()
            raise WatchError(f"{exc}; {WIRE_FALLBACK}") from None
        except BaseException:
            self.close()
            raise
        return rep

    def _lose(self, h: Hook, why: str) -> None:
        what = f"{h.tracepoint} ({h.feature}: {why})"
        if what not in self.report.lost:
            self.report.lost.append(what)

    def add_tgid(self, tgid: int) -> None:
        if self.obj is not None:
            self.obj.update("watch_tgids", struct.pack("<I", tgid), b"\x01")

    def remove_tgid(self, tgid: int) -> None:
        if self.obj is not None:
            fd = self.obj.map_fd("watch_tgids")
            key = ctypes.create_string_buffer(struct.pack("<I", tgid), 4)
            lib().so.bpf_map_delete_elem(fd, key)

    def poll(self, timeout_ms: int = 100) -> int:
        if self.obj is None or not self._rb:
            return 0
        n = self.obj.poll(self._rb, timeout_ms)
        return n if n >= 0 else 0

    def drain(self) -> int:
        if self.obj is None or not self._rb:
            return 0
        return max(0, self.obj.consume(self._rb))

    def counters(self) -> dict[str, int]:
        out = dict.fromkeys(raw.COUNTER_NAMES, 0)
        if self.obj is None:
            return out
        for i, name in enumerate(raw.COUNTER_NAMES):
            val = self.obj.lookup("counters", struct.pack("<I", i), 8 * self._ncpu)
            if val is not None:
                out[name] = sum(struct.unpack(f"<{self._ncpu}Q", val))
        return out

    def close(self) -> None:
        if self.obj is not None:
            obj, self.obj = self.obj, None
            obj.close()
            self._rb = 0

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
