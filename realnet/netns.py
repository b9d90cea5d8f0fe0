"""Link emulation: two network namespaces joined by a delaying relay process.

Owns: creating/removing the client and server namespaces, their TUN devices and
addresses, starting/stopping the `realnet.relay` process, and switching the
calling thread into a namespace so one process (one asyncio loop) can own
sockets on both ends.

Topology::

    client ns (nsim-<pid>-<n>-c)                    server ns (nsim-<pid>-<n>-s)
    10.99.0.1/24 on nsimtun0 ==fd==> relay ==fd==> 10.99.0.2/24 on nsimtun0
                             <=====  (own process, one-way delays) <=====

The TUN devices are non-persistent and only the relay holds their fds, so the
devices vanish with the relay. Each TUN also gets an AF_PACKET "tap" (opened
here, handed to the relay) whose kernel timestamps give every packet's send
time, so the delay is exact even when the relay wakes up late. The namespaces
are bind mounts under /run/netns and must be removed explicitly: `close()` does;
if the process is killed (SIGKILL: no ``finally`` runs) its `realnet.watchdog` does,
and `realnet.cleanup` removes those whose owner PID is dead.

TUN devices have no offloads unless TUNSETOFFLOAD is used (we never do), so the
kernel software-segments any GSO skb *before* the capture tap and the relay: every
packet on the wire is at most MTU, and the MSS is what the caller sets with
TCP_MAXSEG (bounded by ``mtu - 40``, minus 12 with TCP timestamps).

Must not import: textual, rich, simpy or nagle_sim.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import fcntl
import itertools
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Literal, Self

from pyroute2 import IPRoute
from pyroute2 import netns as pr_netns

from realnet import cleanup, watchdog
from realnet import relay as relay_mod

Side = Literal["client", "server"]

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
TUN_NAME = "nsimtun0"

_libc = ctypes.CDLL(None, use_errno=True)
_seq = itertools.count()
_live: set[EmulatedLink] = set()
_live_lock = threading.Lock()
_handlers_installed = False


# --------------------------------------------------------------------------- netns


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def netns_path(name: str) -> str:
    return os.path.join(pr_netns.NETNS_RUN_DIR, name)


@contextlib.contextmanager
def in_namespace(name: str) -> Iterator[None]:
    """Run the body with the *calling thread* inside network namespace `name`.

    setns(2) is per-thread, so other threads (and the rest of the process) are
    unaffected. Sockets, TUN fds and /proc/sys/net files opened inside keep that
    namespace for their whole life after we switch back -- which is how one
    asyncio loop owns both the client and the server sockets. Do not ``await``
    inside the block: another coroutine could then run in the wrong namespace.
    """
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        target = os.open(netns_path(name), os.O_RDONLY | os.O_CLOEXEC)
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(home)


def socket_in_namespace(
    name: str,
    family: int = socket.AF_INET,
    type: int = socket.SOCK_STREAM,
    proto: int = 0,
) -> socket.socket:
    """A new socket living in namespace `name` (usable from any thread afterwards)."""
    with in_namespace(name):
        return socket.socket(family, type, proto)


@contextlib.contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM wait (blocked for this thread) until the body is done.

    For pyroute2's namespace creation, which mounts the namespace from a forked child: an
    interrupt in the middle used to unwind the parent while the child still finished the
    mount, after close() had looked (a SIGTERM 0 s after both names existed left the
    server's namespace to the watchdog). A blocked signal stays pending and is handled
    as soon as the body ends (tens of ms)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def write_sysctl(name: str, key: str, value: str) -> None:
    """Set sysctl `key` (dotted, e.g. ``net.ipv4.tcp_autocorking``) inside namespace `name`.

    /proc/sys/net resolves against the opening thread's namespace, so opening it
    inside `in_namespace` targets the namespace and never the host.
    """
    path = Path("/proc/sys", *key.split("."))
    with in_namespace(name), open(path, "w") as f:
        f.write(value)


def _open_tun(ns: str, ifname: str) -> int:
    """Create a non-persistent L3 TUN (raw IP, no packet-info header) inside `ns`."""
    with in_namespace(ns):
        # The device is created in the netns of the thread doing the open/ioctl.
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)
        try:
            ifr = struct.pack("16sH", ifname.encode(), IFF_TUN | IFF_NO_PI)
            fcntl.ioctl(fd, TUNSETIFF, ifr)
        except BaseException:
            os.close(fd)
            raise
    return fd


def _in_fresh_thread(fn: Callable[[], None]) -> None:
    """Run `fn` in a new thread and re-raise its exception here.

    pyroute2 >= 0.9's synchronous IPRoute drives an asyncio loop internally and
    fails with "This event loop is already running" when called from a
    coroutine; a fresh thread has no running loop.
    """
    errors: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=target, name="realnet-rtnl")
    t.start()
    t.join()
    if errors:
        raise errors[0]


def _configure(ns: str, ifname: str, addr: str, prefixlen: int, mtu: int, txqlen: int,
               quickack: bool = False) -> None:
    _in_fresh_thread(lambda: _configure_now(ns, ifname, addr, prefixlen, mtu, txqlen, quickack))


def _configure_now(ns: str, ifname: str, addr: str, prefixlen: int, mtu: int, txqlen: int,
                   quickack: bool = False) -> None:
    with IPRoute(netns=ns) as ipr:
        (lo,) = ipr.link_lookup(ifname="lo")
        ipr.link("set", index=lo, state="up")
        (idx,) = ipr.link_lookup(ifname=ifname)
        # tun drops (rather than back-pressures) when its ring is full; a long
        # ring keeps cwnd-sized bursts intact until the relay drains them.
        ipr.link("set", index=idx, mtu=mtu, txqlen=txqlen)
        ipr.addr("add", index=idx, address=addr, prefixlen=prefixlen)
        ipr.link("set", index=idx, state="up")
        if quickack:
            # `ip route replace <net>/<len> dev tun quickack 1`: RTAX_QUICKACK on the
            # connected route, so tcp_in_quickack_mode() is true for every segment
            net = socket.inet_ntoa(struct.pack(
                "!I", struct.unpack("!I", socket.inet_aton(addr))[0]
                & (0xFFFFFFFF << (32 - prefixlen)) & 0xFFFFFFFF))
            ipr.route("replace", dst=net, dst_len=prefixlen, oif=idx, scope="link",
                      proto="kernel", prefsrc=addr, metrics={"quickack": 1})


def _loopback_now(ns: str, quickack: bool) -> None:
    """Bring lo up in `ns`; with `quickack`, the local route to 127.0.0.1 gets
    `quickack 1` (the route a loopback connection's dst comes from)."""
    with IPRoute(netns=ns) as ipr:
        (lo,) = ipr.link_lookup(ifname="lo")
        ipr.link("set", index=lo, state="up")
        if quickack:
            ipr.route("replace", dst="127.0.0.1", dst_len=32, oif=lo, table=255, type="local",
                      scope="host", proto="kernel", prefsrc="127.0.0.1",
                      metrics={"quickack": 1})


class PrivateLoopback:
    """A loopback run inside a namespace of its own (``nsim-<pid>-<n>-l``): per-namespace
    sysctls (e.g. net.ipv4.tcp_pingpong_thresh) and route metrics (quickack) then touch
    only this run, never the host. Needs root; removed on close, or by
    `realnet.cleanup` once its owner is dead."""

    def __init__(self, *, sysctls: Mapping[str, str] | None = None,
                 quickack: bool = False) -> None:
        self.sysctls = dict(sysctls or {})
        self.quickack = quickack
        self.ns_name = ""
        self._owner_pid = os.getpid()
        self._created = False

    def __enter__(self) -> Self:
        cleanup.remove_stale()
        watchdog.ensure()       # removes the namespace if this process is killed
        self.ns_name = f"{cleanup.link_tag(self._owner_pid, next(_seq))}-l"
        self._created = True        # before it exists, as EmulatedLink._create_ns
        with _interrupts_deferred():
            pr_netns.create(self.ns_name)
        try:
            for key, value in self.sysctls.items():
                write_sysctl(self.ns_name, key, value)
            _in_fresh_thread(lambda: _loopback_now(self.ns_name, self.quickack))
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def socket(self) -> socket.socket:
        return socket_in_namespace(self.ns_name)

    def close(self) -> None:
        if self._created and os.getpid() == self._owner_pid:
            cleanup.remove_namespace(self.ns_name)
            self._created = False


# --------------------------------------------------------------------------- link


class EmulatedLink:
    """Two namespaces joined by a relay with fixed one-way delays (and optionally a
    bandwidth with a drop-tail queue, scripted losses and holds (`faults`, as
    `LinkFault.spec` writes them), and `quickack 1` on both connected routes).

    ``with EmulatedLink(to_server_delay_us=20_000, to_client_delay_us=5_000) as link:``
    then ``link.socket_in("server")`` / ``link.socket_in("client")`` and connect
    ``link.client_addr`` -> ``link.server_addr``.

    The relay runs SCHED_FIFO at `relay_rt_priority` (0 disables) so a busy
    caller cannot delay its wake-ups; it sleeps in select() between packets.

    `sysctls` are applied in both namespaces (a new netns starts from kernel
    defaults for most net.ipv4.tcp_* knobs, not from the host's values), then each
    side's `side_sysctls` in its own. IPv6 is
    disabled in both namespaces so the link carries only the caller's traffic.
    """

    def __init__(
        self,
        to_server_delay_us: int = 0,
        to_client_delay_us: int = 0,
        mtu: int = 1500,
        *,
        client_addr: str = "10.99.0.1",
        server_addr: str = "10.99.0.2",
        prefixlen: int = 24,
        sysctls: Mapping[str, str] | None = None,
        side_sysctls: Mapping[Side, Mapping[str, str]] | None = None,
        rate_bps: int = 0,
        queue: int = 1000,
        quickack: bool = False,
        faults: Sequence[str] = (),
        txqueuelen: int = 10_000,
        relay_rt_priority: int = 10,
        ready_timeout_s: float = 10.0,
    ) -> None:
        if to_server_delay_us < 0 or to_client_delay_us < 0:
            raise ValueError("delays must be >= 0")
        self.to_server_delay_us = to_server_delay_us
        self.to_client_delay_us = to_client_delay_us
        self.mtu = mtu
        self.client_addr = client_addr
        self.server_addr = server_addr
        self.prefixlen = prefixlen
        self.sysctls = dict(sysctls or {})
        self.side_sysctls = {side: dict(v) for side, v in (side_sysctls or {}).items()}
        self.rate_bps = rate_bps
        self.queue = queue
        self.quickack = quickack
        self.faults = tuple(faults)
        self.txqueuelen = txqueuelen
        self.relay_rt_priority = relay_rt_priority
        self.ready_timeout_s = ready_timeout_s
        self.ifname = TUN_NAME
        self.tag = ""
        self.client_ns = ""
        self.server_ns = ""
        self.relay: subprocess.Popen[bytes] | None = None
        self.relay_stats: dict[str, object] | None = None
        self.relay_stderr = ""
        self._created_ns: list[str] = []
        self._closed = False
        self._owner_pid = os.getpid()

    # -- public helpers -------------------------------------------------------

    def ns(self, side: Side) -> str:
        return {"client": self.client_ns, "server": self.server_ns}[side]

    def addr(self, side: Side) -> str:
        return {"client": self.client_addr, "server": self.server_addr}[side]

    def in_namespace(self, side: Side) -> contextlib.AbstractContextManager[None]:
        return in_namespace(self.ns(side))

    def socket_in(
        self,
        side: Side,
        family: int = socket.AF_INET,
        type: int = socket.SOCK_STREAM,
        proto: int = 0,
    ) -> socket.socket:
        return socket_in_namespace(self.ns(side), family, type, proto)

    @property
    def relay_pid(self) -> int | None:
        return self.relay.pid if self.relay else None

    # -- lifecycle ------------------------------------------------------------

    def __enter__(self) -> Self:
        if self.tag:
            raise RuntimeError("EmulatedLink is not re-entrant; create a new one")
        cleanup.remove_stale()
        _install_safety_nets()
        watchdog.ensure()       # removes the namespaces if this process is killed
        self._owner_pid = os.getpid()
        self.tag = cleanup.link_tag(self._owner_pid, next(_seq))
        self.client_ns, self.server_ns = f"{self.tag}-c", f"{self.tag}-s"
        with _live_lock:
            _live.add(self)
        try:
            self._setup()
        except BaseException:  # incl. KeyboardInterrupt half-way through setup
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        """Same as __enter__, but off the event loop (setup takes ~100 ms)."""
        return await asyncio.to_thread(self.__enter__)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.close)

    def _setup(self) -> None:
        tuns: list[int] = []
        taps: list[socket.socket] = []
        try:
            sides = ((self.client_ns, self.client_addr), (self.server_ns, self.server_addr))
            for ns, addr in sides:
                self._create_ns(ns, "client" if ns == self.client_ns else "server")
                tuns.append(_open_tun(ns, self.ifname))
                _configure(ns, self.ifname, addr, self.prefixlen, self.mtu, self.txqueuelen,
                           self.quickack)
                with in_namespace(ns):
                    taps.append(relay_mod.open_tap(self.ifname))
            self._start_relay(tuns, [t.fileno() for t in taps])
        finally:
            # The relay owns these fds now; keeping our copies would keep the
            # devices alive after the relay dies.
            for fd in tuns:
                os.close(fd)
            for tap in taps:
                tap.close()

    def _create_ns(self, ns: str, side: Side) -> None:
        # Named for close() before it exists: an interrupt (Ctrl-C, SIGTERM) landing
        # between the mount and the bookkeeping must not leave it (removing a name that
        # was never created is a no-op).
        self._created_ns.append(ns)
        with _interrupts_deferred():
            pr_netns.create(ns)
        settings = {
            "net.ipv6.conf.all.disable_ipv6": "1",
            "net.ipv6.conf.default.disable_ipv6": "1",
        }
        if not os.path.exists("/proc/sys/net/ipv6"):
            settings.clear()
        settings.update(self.sysctls)
        settings.update(self.side_sysctls.get(side, {}))
        for key, value in settings.items():
            write_sysctl(ns, key, value)

    def _start_relay(self, tun_fds: list[int], tap_fds: list[int]) -> None:
        env = dict(os.environ)
        # Make `-m realnet.relay` importable even when the project is not installed.
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        argv = [
            sys.executable, "-m", cleanup.RELAY_MODULE,
            cleanup.RELAY_TAG_FLAG, self.tag,
            "--owner-pid", str(os.getpid()),
            "--client-fd", str(tun_fds[0]),
            "--server-fd", str(tun_fds[1]),
            "--client-tap-fd", str(tap_fds[0]),
            "--server-tap-fd", str(tap_fds[1]),
            "--to-server-delay-us", str(self.to_server_delay_us),
            "--to-client-delay-us", str(self.to_client_delay_us),
            "--rate-bps", str(self.rate_bps),
            "--queue", str(self.queue),
            "--rt-priority", str(self.relay_rt_priority),
            *(arg for spec in self.faults for arg in ("--fault", spec)),
        ]  # fmt: skip
        self.relay = subprocess.Popen(
            argv,
            pass_fds=(*tun_fds, *tap_fds),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        """Block until the relay prints READY: packets sent earlier would sit in the
        TUN ring and be timestamped late, i.e. get extra delay."""
        assert self.relay is not None and self.relay.stdout is not None
        fd = self.relay.stdout.fileno()
        deadline = time.monotonic() + self.ready_timeout_s
        buf = b""
        while b"\n" not in buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"relay {self.tag} not ready after {self.ready_timeout_s}s")
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    _, err = self.relay.communicate(timeout=5)
                    raise RuntimeError(f"relay {self.tag} exited early:\n{err.decode()}")
                buf += chunk
        if buf.strip() != b"READY":
            raise RuntimeError(f"relay {self.tag}: unexpected start-up output {buf!r}")

    def close(self) -> None:
        """Stop the relay and remove both namespaces. Idempotent, never raises
        for already-gone resources."""
        if self._closed or os.getpid() != self._owner_pid:
            # A fork()ed child (pyroute2 forks helpers for netns work, and they
            # inherit our atexit/SIGTERM hooks) must never tear down our link.
            return
        self._stop_relay()
        for ns in list(self._created_ns):
            cleanup.remove_namespace(ns)
            self._created_ns.remove(ns)
        self._closed = True
        with _live_lock:
            _live.discard(self)

    def _stop_relay(self) -> None:
        proc = self.relay
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        self.relay_stderr = err.decode(errors="replace")
        lines = out.decode(errors="replace").strip().splitlines()
        if lines:
            with contextlib.suppress(ValueError):
                self.relay_stats = json.loads(lines[-1])

    def __repr__(self) -> str:
        return (
            f"EmulatedLink(tag={self.tag!r}, to_server={self.to_server_delay_us}us, "
            f"to_client={self.to_client_delay_us}us, mtu={self.mtu})"
        )


# --------------------------------------------------------------------------- safety nets


def close_all() -> None:
    """Close every link this process still has open (atexit / SIGTERM path)."""
    with _live_lock:
        links = list(_live)
    for link in links:
        with contextlib.suppress(Exception):
            link.close()


def _forget_links_in_child() -> None:
    global _live_lock
    _live.clear()
    _live_lock = threading.Lock()  # may have been held by another thread at fork


os.register_at_fork(after_in_child=_forget_links_in_child)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    close_all()
    # Die the way SIGTERM would have killed us, so the exit status is unchanged.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _install_safety_nets() -> None:
    """atexit always; a SIGTERM handler only if nobody else installed one (an
    asyncio app's own handler wins) and only from the main thread (Python rule)."""
    global _handlers_installed
    if _handlers_installed:
        return
    _handlers_installed = True
    atexit.register(close_all)
    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    ):
        signal.signal(signal.SIGTERM, _on_sigterm)
