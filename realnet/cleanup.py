"""Naming conventions and stale-resource cleanup for realnet.

Owns: how realnet names its kernel resources (network namespaces
``<prefix><owner-pid>-<seq>-c|s|l`` and relay processes tagged in their argv) and its temp
files (``nsim-<owner-pid>-*.json``, written by older versions; side logs are now anonymous
memfds that vanish with their last descriptor), and finding/removing those whose owner
process is dead (e.g. a run that was SIGKILLed and never reached ``__exit__``). Every realnet
run calls `remove_stale_quietly` first; ``nagle-sim realnet cleanup`` calls `remove_stale`.

Must not import: textual, rich, simpy, nagle_sim, or `realnet.netns` (netns imports
us). Standard library only: `realnet.watchdog` runs it in a process that must start fast
(pyroute2 alone took ~1 s to import, several on a loaded machine).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

NS_PREFIX = "nsim-"
RELAY_MODULE = "realnet.relay"
# The relay carries ``--tag <link tag>`` in its argv; the tag embeds the owner PID,
# so a plain /proc scan can tell whose relay it is even after it was reparented.
RELAY_TAG_FLAG = "--tag"


NETNS_RUN_DIR = "/var/run/netns"
"""Where named network namespaces are bind-mounted (iproute2's and pyroute2's place)."""
_MNT_DETACH = 2


def _listnetns() -> list[str]:
    try:
        return os.listdir(NETNS_RUN_DIR)
    except FileNotFoundError:
        return []


def _remove_netns(name: str) -> None:
    """Unmount and unlink a named namespace's bind mount, as ``ip netns delete`` does."""
    path = os.path.join(NETNS_RUN_DIR, name)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.umount2(path.encode(), _MNT_DETACH)
    os.unlink(path)


def link_tag(owner_pid: int, seq: int, prefix: str = NS_PREFIX) -> str:
    """Tag shared by a link's namespaces and its relay: ``nsim-<pid>-<seq>``."""
    return f"{prefix}{owner_pid}-{seq}"


def owner_of(name: str, prefix: str = NS_PREFIX) -> int | None:
    """Owner PID encoded in a namespace name or relay tag, or None if not ours."""
    # -c, -s: an emulated link's two sides; -l: a private loopback (these were not
    # matched, so no cleanup ever found a killed private-loopback run's namespace)
    m = re.fullmatch(re.escape(prefix) + r"(\d+)-\d+(?:-[csl])?", name)
    return int(m.group(1)) if m else None


def pid_alive(pid: int) -> bool:
    """True if `pid` is a live (non-zombie) process.

    Zombies count as dead: a SIGKILLed owner that its parent has not reaped yet
    will never clean up after itself.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    # Field 3 follows the parenthesised comm (which may itself contain spaces/parens).
    state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
    return state not in (b"Z", b"X")


@dataclass(frozen=True, slots=True)
class RelayProc:
    pid: int
    tag: str
    owner_pid: int


@dataclass(slots=True)
class Ours:
    """Everything realnet-named that currently exists on the machine."""

    namespaces: list[str] = field(default_factory=list)
    relays: list[RelayProc] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.namespaces or self.relays or self.files)


def list_namespaces(prefix: str = NS_PREFIX) -> list[str]:
    """Names of our namespaces (by prefix + owner-pid pattern) under /run/netns."""
    return sorted(n for n in _listnetns() if owner_of(n, prefix) is not None)


def list_relays(prefix: str = NS_PREFIX) -> list[RelayProc]:
    """Live relay processes, found by ``-m realnet.relay ... --tag <tag>`` in argv."""
    found: list[RelayProc] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue  # raced with exit, or a kernel thread
        if RELAY_MODULE not in argv or RELAY_TAG_FLAG not in argv:
            continue
        i = argv.index(RELAY_TAG_FLAG)
        tag = argv[i + 1] if i + 1 < len(argv) else ""
        owner = owner_of(tag, prefix)
        if owner is not None:
            found.append(RelayProc(pid=int(entry), tag=tag, owner_pid=owner))
    return found


def file_owner(path: Path, prefix: str = NS_PREFIX) -> int | None:
    """Owner PID of a realnet temp file ``<prefix><pid>-<side>-<random>.json``."""
    m = re.fullmatch(re.escape(prefix) + r"(\d+)-(?:client|server)-\w+\.json", path.name)
    return int(m.group(1)) if m else None


def list_files(prefix: str = NS_PREFIX, directory: str | None = None) -> list[Path]:
    """realnet temp files in the temp directory (by name pattern)."""
    base = Path(directory or tempfile.gettempdir())
    try:
        return sorted(p for p in base.glob(f"{prefix}*.json")
                      if file_owner(p, prefix) is not None)
    except OSError:
        return []


def list_ours(prefix: str = NS_PREFIX, owner_pid: int | None = None) -> Ours:
    """Our namespaces, relays and temp files, optionally only those owned by `owner_pid`."""
    namespaces = list_namespaces(prefix)
    relays = list_relays(prefix)
    files = list_files(prefix)
    if owner_pid is not None:
        namespaces = [n for n in namespaces if owner_of(n, prefix) == owner_pid]
        relays = [r for r in relays if r.owner_pid == owner_pid]
        files = [f for f in files if file_owner(f, prefix) == owner_pid]
    return Ours(namespaces=namespaces, relays=relays, files=files)


def list_stale(prefix: str = NS_PREFIX) -> Ours:
    """Resources whose owner process is dead."""
    ours = list_ours(prefix)
    return Ours(
        namespaces=[n for n in ours.namespaces if not pid_alive(owner_of(n, prefix) or 0)],
        relays=[r for r in ours.relays if not pid_alive(r.owner_pid)],
        files=[f for f in ours.files if not pid_alive(file_owner(f, prefix) or 0)],
    )


def remove_namespace(name: str) -> bool:
    """Unmount and unlink /run/netns/<name>; False if it was already gone.

    The kernel frees the namespace (and its TUN device) once the last reference
    (bind mount, socket, or process inside) is gone.
    """
    if name not in _listnetns():
        return False
    with contextlib.suppress(FileNotFoundError):
        _remove_netns(name)
    return True


def kill_process(pid: int, timeout: float = 2.0) -> None:
    """SIGTERM, then SIGKILL after `timeout` seconds. Never raises if `pid` is gone.

    We cannot waitpid() a process that is not our child, so we poll for its exit.
    """
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, timeout)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return
            time.sleep(0.01)


def remove_stale(prefix: str = NS_PREFIX) -> list[str]:
    """Remove namespaces and relays left behind by dead owners.

    Returns what was removed: namespace names and ``relay:<pid>`` entries.
    Resources of live owners (another test session running right now) are left
    alone. A PID reused by an unrelated process makes its stale resources look
    alive; they are then removed the next time that PID is dead.
    """
    return _remove(list_stale(prefix))


def remove_owned(owner_pid: int, prefix: str = NS_PREFIX) -> list[str]:
    """Remove the namespaces, relays and temp files of ``owner_pid`` (dead: the
    `realnet.watchdog` calls this once its owner has exited). Returns what was removed."""
    return _remove(list_ours(prefix, owner_pid=owner_pid))


def _remove(ours: Ours) -> list[str]:
    removed: list[str] = []
    # Names first (instant): a namespace whose name is gone is freed by the kernel as soon
    # as its relay, which holds the TUN fds, has exited (stopping one can take seconds).
    for name in ours.namespaces:
        if remove_namespace(name):
            removed.append(name)
    for relay in ours.relays:
        kill_process(relay.pid)
        removed.append(f"relay:{relay.pid}")
    for path in ours.files:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(str(path))
    return removed


def remove_stale_quietly(prefix: str = NS_PREFIX) -> list[str]:
    """`remove_stale` for the start of every run: what cannot be removed here (no root, a
    namespace still busy) is left for a later run or ``nagle-sim realnet cleanup``."""
    try:
        return remove_stale(prefix)
    except (OSError, ValueError):
        return []
