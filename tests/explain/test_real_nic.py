"""Captures from NIC-like links explained the same as their loopback twins.

A veth pair between two network namespaces behaves like a NIC with offloads: with TSO/GSO
on, a capture on the sender shows super-segments (7,240 B for 5 × 1,448) the wire never
carried; with GRO on the receiving side, a capture there shows the segments merged again;
with TX checksum offload the sender's capture holds partial checksums. Each variant runs
the same write-write-read client (Nagle on) against a NODELAY server answering 8,000 B,
and must be explained as its loopback twin is: the same stalls, the same causes. The
emulated link (realnet: TUN devices and a relay, no offloads) is the third twin.

Needs root (namespaces, veth, ethtool, tcpdump). The namespaces follow realnet's naming
(``nsim-<pid>-<n>-c|s``) so `realnet cleanup` removes them if a run is killed; each test
removes its own.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from nagle_sim.explain import explain_file, read_capture

from .realcap import Tcpdump, recv_exact

pytestmark = pytest.mark.realnet

ROUNDS = 6
REPLY = 8_000
_seq = itertools.count(9_100)


@pytest.fixture(autouse=True)
def _root() -> None:
    from tests.realnet.conftest import realnet_unavailable
    why = realnet_unavailable()
    if why:
        pytest.skip(why)
    for tool in ("tcpdump", "ethtool", "ip"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@contextlib.contextmanager
def veth(client: str, server: str) -> Iterator[tuple[str, str, str, str]]:
    """Two namespaces joined by a veth pair; ``client``/``server``: ethtool -K settings
    for each end ("tso on gso on gro off"). Yields (client ns, server ns, client device,
    server device)."""
    from realnet.cleanup import link_tag
    tag = link_tag(os.getpid(), next(_seq))
    cns, sns = f"{tag}-c", f"{tag}-s"
    cdev, sdev = f"nsv{os.getpid() % 100000}c", f"nsv{os.getpid() % 100000}s"
    made = []
    try:
        for ns in (cns, sns):
            _ip("netns", "add", ns)
            made.append(ns)
        _ip("link", "add", cdev, "type", "veth", "peer", "name", sdev)
        _ip("link", "set", cdev, "netns", cns)
        _ip("link", "set", sdev, "netns", sns)
        for ns, dev, addr, opts in ((cns, cdev, "10.77.0.1/24", client),
                                    (sns, sdev, "10.77.0.2/24", server)):
            _ip("-n", ns, "addr", "add", addr, "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            subprocess.run(["ip", "netns", "exec", ns, "ethtool", "-K", dev, *opts.split()],
                           check=True, capture_output=True, timeout=30)
        yield cns, sns, cdev, sdev
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30,
                           check=False)


def run_pair(path: Path, client_sock: socket.socket, server_sock: socket.socket,
             server_addr: str, iface: str, netns: str | None) -> Path:
    """The write-write-read exchange between two sockets made in their namespaces,
    captured on ``iface`` (in ``netns``)."""
    server_sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server_sock.bind((server_addr, 0))
    server_sock.listen(1)
    port = server_sock.getsockname()[1]
    cap = Tcpdump(path, port, iface=iface, netns=netns)
    try:
        def serve() -> None:
            conn, _ = server_sock.accept()
            with conn:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                with contextlib.suppress(OSError, EOFError):
                    for _ in range(ROUNDS):
                        recv_exact(conn, 13)
                        conn.sendall(b"r" * REPLY)
                    conn.recv(1)
        t = threading.Thread(target=serve, daemon=True)
        t.start()
        with client_sock as c:
            c.connect((server_addr, port))
            for _ in range(ROUNDS):
                c.send(b"a" * 6)
                c.send(b"b" * 7)
                recv_exact(c, REPLY)
        t.join(20)
    finally:
        cap.stop()
        server_sock.close()
    return path


def on_veth(tmp_path: Path, name: str, client: str, server: str, where: str) -> Path:
    from realnet.netns import socket_in_namespace
    with veth(client, server) as (cns, sns, cdev, sdev):
        ns, dev = (cns, cdev) if where == "client" else (sns, sdev)
        return run_pair(tmp_path / f"{name}.pcap", socket_in_namespace(cns),
                        socket_in_namespace(sns), "10.77.0.2", dev, ns)


@pytest.fixture(scope="module")
def loopback_twin(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    path = run_pair(tmp_path_factory.mktemp("lo") / "lo.pcap", socket.socket(),
                    socket.socket(), "127.0.0.1", "lo", None)
    causes = [s.cause for s in explain_file(str(path)).stalls if s.cause != "app"]
    # every request after the first waits for the server's delayed ACK
    assert causes.count("nagle+delayed_ack") >= ROUNDS - 2, causes
    return causes


def _nagle(path: Path) -> list[str]:
    return [s.cause for s in explain_file(str(path)).stalls if s.cause != "app"]


def _sizes(path: Path) -> list[int]:
    return [p.plen for p in read_capture(path).packets if p.plen]


@pytest.mark.parametrize(("name", "client", "server", "where", "merged"), [
    # TSO/GSO on the server: its capture holds the super-segments it handed the "NIC"
    ("tso-at-sender", "gro off", "tso on gso on", "server", True),
    # the same link, captured at the receiver: veth passes the GSO packet through whole
    ("tso-at-receiver", "gro off", "tso on gso on", "client", True),
    # the sender cuts in software (no TSO/GSO), the receiver's GRO merges them again
    ("gro-at-receiver", "gro on", "tso off gso off", "client", True),
    # offloads off on both ends: the capture is what the wire carried
    ("no-offloads", "gro off", "tso off gso off", "client", False),
])
def test_offloaded_captures_are_explained_as_their_loopback_twin(
        tmp_path: Path, loopback_twin: list[str], name: str, client: str, server: str,
        where: str, merged: bool) -> None:
    path = on_veth(tmp_path, name, client, server, where)
    sizes = _sizes(path)
    assert (max(sizes) > 1448) is merged, (name, sorted(set(sizes))[-5:])
    ex = explain_file(str(path))
    # explained as wire segments: none longer than the MSS
    assert all(s.length <= ex.captured.mss for s in ex.captured.trace.segments)
    assert any("super-segments" in n for n in ex.notes) is merged
    assert _nagle(path) == loopback_twin, name


def test_offloaded_checksums_are_ignored(tmp_path: Path, loopback_twin: list[str]) -> None:
    """With TX checksum offload the sender's capture holds partial checksums (tshark,
    validating them, calls them bad): explain never checks them, so nothing changes."""
    path = on_veth(tmp_path, "csum", "gro off tx on", "tso off gso off tx on", "server")
    tshark = shutil.which("tshark")
    if tshark is not None:
        done = subprocess.run([tshark, "-n", "-r", str(path), "-o", "tcp.check_checksum:TRUE",
                               "-Y", "tcp.checksum.status == 0 && ip.src == 10.77.0.2",
                               "-T", "fields", "-e", "frame.number"],
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split(), "the server's own segments should carry bad checksums"
    assert _nagle(path) == loopback_twin


def test_the_emulated_link_twin(tmp_path: Path, loopback_twin: list[str]) -> None:
    """realnet's emulated link (TUN devices and a relay: no offloads, MTU 1500), no delay:
    the same stalls as on loopback."""
    from realnet.netns import EmulatedLink
    with EmulatedLink() as link:
        path = run_pair(tmp_path / "tun.pcap", link.socket_in("client"),
                        link.socket_in("server"), link.server_addr, link.ifname,
                        link.client_ns)
    assert max(_sizes(path)) <= 1460
    assert _nagle(path) == loopback_twin


FORWARD = {"net.ipv4.ip_forward": "1", "net.ipv4.conf.all.rp_filter": "0",
           "net.ipv4.conf.default.rp_filter": "0"}


def test_a_capture_mid_path_is_between_and_names_the_same_stalls(tmp_path: Path) -> None:
    """client ==5 ms== router -veth- router ==5 ms== server: two emulated links chained
    by a veth pair, captured on the veth (mid-path) and on the client at once. The
    mid-path capture sees both directions late: explain places it between the hosts, 5 ms
    from each, and names the same Nagle stalls (the same held bytes) as the client's."""
    from realnet.netns import EmulatedLink, socket_in_namespace
    rounds = 5
    with EmulatedLink(5_000, 5_000, side_sysctls={"server": FORWARD}) as near, \
            EmulatedLink(5_000, 5_000, client_addr="10.98.0.1", server_addr="10.98.0.2",
                         side_sysctls={"client": FORWARD}) as far:
        a, b, c, d = near.client_ns, near.server_ns, far.client_ns, far.server_ns
        vb, vc = f"nsm{os.getpid() % 100000}b", f"nsm{os.getpid() % 100000}c"
        _ip("link", "add", vb, "type", "veth", "peer", "name", vc)
        _ip("link", "set", vb, "netns", b)
        _ip("link", "set", vc, "netns", c)
        for ns, dev, addr in ((b, vb, "10.97.0.1/24"), (c, vc, "10.97.0.2/24")):
            _ip("-n", ns, "addr", "add", addr, "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
        _ip("-n", a, "route", "add", "10.98.0.0/24", "via", "10.99.0.2")
        _ip("-n", b, "route", "add", "10.98.0.0/24", "via", "10.97.0.2")
        _ip("-n", c, "route", "add", "10.99.0.0/24", "via", "10.97.0.1")
        _ip("-n", d, "route", "add", "10.99.0.0/24", "via", "10.98.0.1")
        srv = socket_in_namespace(d)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("10.98.0.2", 0))
        srv.listen(1)
        port = srv.getsockname()[1]
        mid = Tcpdump(tmp_path / "mid.pcap", port, iface=vb, netns=b)
        edge = Tcpdump(tmp_path / "client.pcap", port, iface=near.ifname, netns=a)
        try:
            def serve() -> None:
                conn, _ = srv.accept()
                with conn:
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    with contextlib.suppress(OSError, EOFError):
                        for _ in range(rounds):
                            recv_exact(conn, 13)
                            conn.sendall(b"r" * 13)
                        conn.recv(1)
            t = threading.Thread(target=serve, daemon=True)
            t.start()
            with socket_in_namespace(a) as cl:
                cl.connect(("10.98.0.2", port))
                for _ in range(rounds):
                    cl.send(b"a" * 6)
                    cl.send(b"b" * 7)
                    recv_exact(cl, 13)
            t.join(20)
        finally:
            mid.stop()
            edge.stop()
            srv.close()
    ex_mid = explain_file(str(tmp_path / "mid.pcap"))
    ex_edge = explain_file(str(tmp_path / "client.pcap"))
    meta = ex_mid.captured.trace.meta
    assert ex_mid.captured.captured_on == "between"
    assert 4.5 <= meta["client_distance_ms"] <= 9 and 4.5 <= meta["server_distance_ms"] <= 9
    assert ex_edge.captured.captured_on == "client"
    assert abs(meta["rtt_ms"] - ex_edge.captured.trace.meta["rtt_ms"]) <= 3

    def held(ex: object) -> list[tuple[str, int] | None]:
        return [s.key for s in ex.stalls if "nagle" in s.causes]  # type: ignore[attr-defined]
    assert len(held(ex_edge)) >= rounds - 2
    assert held(ex_mid) == held(ex_edge)
    assert ex_mid.rebuilt is not None and "delay_ms = 10" in ex_mid.rebuilt.toml


def test_nothing_is_left_behind() -> None:
    """Every namespace these tests made is gone."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                            timeout=30, check=False).stdout
    mine = [line for line in listed.splitlines() if f"nsim-{os.getpid()}-91" in line]
    assert mine == []


if __name__ == "__main__":      # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
